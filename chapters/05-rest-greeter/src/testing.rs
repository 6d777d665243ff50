//! The REST server as the integration tests start it (feature `testing`):
//! chapter 4's [`TestServer`] around a [`BoundServer`].

use std::net::SocketAddr;

use grpc_server::testing::{TempPki, TestServer};
use prometheus_client::registry::Registry;

use crate::{Args, BoundServer};

/// A REST server on a fresh PKI and a port the OS picks, served until the
/// returned value is dropped.
pub async fn server(mtls: bool) -> TestServer {
    let (pki, server) = bind(mtls).await;
    TestServer::start(pki, server.local_addr(), server.stats(), |shutdown| {
        server.serve(shutdown)
    })
}

/// [`server`] with its metrics on, and the address of their `/metrics`.
pub async fn server_with_metrics() -> (TestServer, SocketAddr) {
    let (pki, server) = bind(false).await;
    let mut registry = Registry::default();
    let server = server.with_metrics(&mut registry);
    let metrics = grpc_server::metrics::serve("127.0.0.1:0".parse().unwrap(), registry)
        .await
        .expect("metrics port");
    let server = TestServer::start(pki, server.local_addr(), server.stats(), |shutdown| {
        server.serve(shutdown)
    });
    (server, metrics)
}

async fn bind(mtls: bool) -> (TempPki, BoundServer) {
    let pki = TempPki::new();
    let args = Args {
        addr: "127.0.0.1:0".parse().expect("a literal address"),
        tls: pki.tls_args(),
        mtls,
    };
    let server = BoundServer::bind(&args).await.expect("bind");
    (pki, server)
}
