//! Chapter 14's exercise, `exercises::ch14::incoming`: real connections to a
//! port of 127.0.0.1 the OS picks, accepted by a `TcpListenerStream` and
//! handed on through `incoming`; once to chapter 4's `Greeter` in a tonic
//! server, with `serve_with_incoming` as chapter 14's server uses it.

use std::{
    io,
    pin::pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use exercises::ch14::incoming;
use grpc_server::Greeter;
use proto::greeter::v1::{
    HelloRequest, greeter_client::GreeterClient, greeter_server::GreeterServer,
};
use tokio::{
    net::{TcpListener, TcpStream},
    time::timeout,
};
use tokio_stream::{Stream, StreamExt, wrappers::TcpListenerStream};
use tonic::transport::{Endpoint, Server};

/// The bound on every wait: far above what a healthy run needs, so that a
/// hang is reported as a failure instead of endured.
const WAIT: Duration = Duration::from_secs(20);

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// The next item `incoming` hands on; the stream must not end.
async fn next(
    connections: &mut (impl Stream<Item = io::Result<TcpStream>> + Unpin),
) -> io::Result<TcpStream> {
    timeout(WAIT, connections.next())
        .await
        .unwrap_or_else(|_| panic!("no connection handed on within {WAIT:?}"))
        .expect("the stream of connections ended")
}

#[tokio::test]
async fn an_accepted_connection_is_handed_on_with_nodelay_on() {
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    let mut connections = pin!(incoming(TcpListenerStream::new(listener)));
    let _client = TcpStream::connect(addr).await.unwrap();
    let accepted = next(&mut connections)
        .await
        .expect("an accepted connection");
    assert!(
        accepted.nodelay().unwrap(),
        "still to do (ch14): the connection was handed on with TCP_NODELAY off, \
         so Nagle's algorithm holds a small reply back while the one before it \
         is unacknowledged; call `set_nodelay(true)` on each accepted stream"
    );
}

#[tokio::test]
async fn a_greeter_served_through_incoming_answers_on_a_nodelay_connection() {
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    // What tonic is given: each connection's TCP_NODELAY, as tonic gets it.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let connections = incoming(TcpListenerStream::new(listener)).map(move |connection| {
        if let Ok(stream) = &connection {
            record.lock().unwrap().push(stream.nodelay().unwrap());
        }
        connection
    });
    let server = tokio::spawn(
        Server::builder()
            .add_service(GreeterServer::new(Greeter::default()))
            .serve_with_incoming(connections),
    );
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let call = async {
        let mut client = GreeterClient::new(endpoint.connect().await?);
        let request = HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        };
        let reply = client.say_hello(request).await?;
        Ok::<_, Box<dyn std::error::Error>>(reply.into_inner().message)
    };
    let reply = timeout(WAIT, call)
        .await
        .unwrap_or_else(|_| panic!("no reply within {WAIT:?}"))
        .expect("the call is answered");
    server.abort();
    assert_eq!(reply, "Hello, Ada!");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one client, one connection");
    assert_eq!(
        seen,
        [true],
        "still to do (ch14): tonic served the Greeter's call on a connection \
         with TCP_NODELAY off; `serve_with_incoming` serves sockets as it gets \
         them, so `incoming` must set it"
    );
}

#[tokio::test]
async fn every_connection_is_handed_on_in_the_order_it_was_accepted() {
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    // Five handshakes complete, one after another, before anything is accepted.
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut connections = pin!(incoming(TcpListenerStream::new(listener)));
    for (i, client) in clients.iter().enumerate() {
        let accepted = next(&mut connections)
            .await
            .expect("an accepted connection");
        assert_eq!(
            accepted.peer_addr().unwrap(),
            client.local_addr().unwrap(),
            "connection {i} handed on is client {i}'s: none skipped, none overtaking"
        );
    }
}

#[tokio::test]
async fn a_failed_accept_is_handed_on_and_the_next_connection_still_comes() {
    let listener = listener().await;
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    // A listener's stream as it would be if one accept had failed first.
    let failed = io::Error::new(io::ErrorKind::ConnectionAborted, "accept failed");
    let accepted = tokio_stream::iter([Err(failed), Ok(stream)]);
    let mut connections = pin!(incoming(accepted));
    let error = next(&mut connections)
        .await
        .expect_err("a failed accept is handed on as an error, for tonic to log and skip");
    assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted);
    let accepted = next(&mut connections)
        .await
        .expect("the connection after it is handed on");
    assert_eq!(accepted.peer_addr().unwrap(), client.local_addr().unwrap());
    let end = timeout(WAIT, connections.next()).await.unwrap();
    assert!(end.is_none(), "and nothing else");
}
