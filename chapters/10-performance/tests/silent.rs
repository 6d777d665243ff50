//! What a deadline covers, against a server that accepts TCP and never
//! answers: the call's deadline does not start until a connection exists, so
//! the TLS handshake's timeout is what ends it. Codes and lower bounds only (a
//! timer never fires early); nothing asserts how fast anything was.

use std::{net::SocketAddr, time::Duration};

use grpc_server::testing::{TempPki, within};
use perf::silent::hold;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::{
    io::AsyncReadExt,
    net::{TcpListener, TcpStream},
    sync::oneshot,
    time::Instant,
};
use tonic::{Code, Request, transport::Endpoint};

use grpc_client::channel::CONNECT_TIMEOUT;

const DEADLINE: Duration = Duration::from_millis(100);

async fn silent_server(max_held: usize) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(hold(listener, max_held, async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// The chapter 6 client's endpoint, TLS trusting the test CA, with its
/// connect and handshake timeouts.
fn endpoint(pki: &TempPki, addr: SocketAddr) -> Endpoint {
    let target = grpc_client::Target {
        url: format!("https://localhost:{}", addr.port()),
        ca: pki.ca_cert(),
        identity: None,
    };
    grpc_client::endpoint(&target).unwrap()
}

#[tokio::test]
async fn a_lazy_channels_deadline_does_not_cover_connecting() {
    let pki = TempPki::new();
    let (addr, _stop) = silent_server(8).await;
    let endpoint = endpoint(&pki, addr);
    let mut client = GreeterClient::new(endpoint.connect_lazy());
    let mut request = Request::new(HelloRequest {
        name: "Ada".into(),
        ..Default::default()
    });
    request.set_timeout(DEADLINE);

    let started = Instant::now();
    let status = within("the call", client.say_hello(request))
        .await
        .unwrap_err();

    // Had the deadline covered the TLS handshake, this would be
    // DEADLINE_EXCEEDED after 100 ms. It is the handshake timeout's UNAVAILABLE.
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        started.elapsed() >= CONNECT_TIMEOUT,
        "ended after {:?}, before the handshake timeout",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_eager_channel_fails_to_connect_before_any_call() {
    let pki = TempPki::new();
    let (addr, _stop) = silent_server(8).await;
    let endpoint = endpoint(&pki, addr);
    let error = within("connect", endpoint.connect()).await.unwrap_err();
    assert!(
        format!("{error:?}").contains("HandshakeTimeout"),
        "{error:?}"
    );
}

#[tokio::test]
async fn beyond_its_limit_the_silent_server_closes_the_oldest_connection() {
    let (addr, _stop) = silent_server(2).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let _third = TcpStream::connect(addr).await.unwrap();
    // The first connection was closed to make room: it reads end-of-file.
    let mut byte = [0u8; 1];
    let read = within("the first connection's end", first.read(&mut byte)).await;
    assert_eq!(read.unwrap(), 0);
}
