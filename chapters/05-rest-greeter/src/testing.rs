//! The REST server as the integration tests start it (feature `testing`):
//! chapter 4's [`TestServer`] around a [`BoundServer`].

use grpc_server::testing::{TempPki, TestServer};

use crate::{Args, BoundServer};

/// A REST server on a fresh PKI and a port the OS picks, served until the
/// returned value is dropped.
pub async fn server(mtls: bool) -> TestServer {
    let pki = TempPki::new();
    let args = Args {
        addr: "127.0.0.1:0".parse().expect("a literal address"),
        tls: pki.tls_args(),
        mtls,
    };
    let server = BoundServer::bind(&args).await.expect("bind");
    TestServer::start(pki, server.local_addr(), server.stats(), |shutdown| {
        server.serve(shutdown)
    })
}
