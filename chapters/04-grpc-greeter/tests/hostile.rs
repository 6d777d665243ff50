//! The gRPC server against clients that do what well-behaved clients do not:
//! requests that are not gRPC calls, oversized metadata, streams it must
//! reset by the thousand, a connection that never says a word. Each test
//! plays that client with a raw HTTP/2 client (the `h2` crate) or a raw TLS
//! socket, and checks what it sees and that everyone else is still served.

use std::time::Duration;

use grpc_server::{
    server::{MAX_LOCAL_ERROR_RESETS, MAX_METADATA_BYTES, PREFACE_TIMEOUT},
    testing::{TestServer, WAIT, raw, tls_channel, wait_until, within},
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::{io::AsyncReadExt, time::Instant};
use tonic::{
    Code, Request,
    codegen::http::{Method, StatusCode},
    transport::Channel,
};

const SAY_HELLO: &str = "/greeter.v1.Greeter/SayHello";

/// The clients these tests play.
trait Clients {
    async fn raw(&self) -> raw::RawH2;
    async fn greeter(&self) -> GreeterClient<Channel>;
}

impl Clients for TestServer {
    async fn raw(&self) -> raw::RawH2 {
        raw::h2_connect(self.addr, &self.pki.ca_cert(), &raw::Builder::new()).await
    }

    async fn greeter(&self) -> GreeterClient<Channel> {
        let channel = tls_channel(self.addr, &self.pki.ca_cert(), None)
            .await
            .expect("connect");
        GreeterClient::new(channel)
    }
}

fn hello(name: &str, delay_ms: u32) -> HelloRequest {
    HelloRequest {
        name: name.into(),
        delay_ms,
    }
}

/// A proper SayHello on `raw`'s connection, answered with grpc-status 0.
async fn assert_raw_connection_still_serves(raw: &mut raw::RawH2) {
    let body = raw::grpc_frame(&hello("Grace", 0));
    let answer = raw::answer(raw::send(raw, raw::grpc_request(SAY_HELLO), Some(body)).await)
        .await
        .expect("a proper call on the same connection");
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.grpc("grpc-status").as_deref(),
        Some("0"),
        "{answer:?}"
    );
}

// ---------------------------------------------------------------------------
// Requests that are not gRPC calls are answered before any handler runs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_grpc_content_types_get_415_and_never_reach_the_handler() {
    let server = TestServer::grpc(false).await;
    let mut raw = server.raw().await;
    // A valid SayHello body: only the media type is wrong, as in a POST that a
    // web page on another site can make a browser send.
    let body = raw::grpc_frame(&hello("Ada", 0));
    for content_type in ["text/plain", "application/json"] {
        let head = raw::request(Method::POST, SAY_HELLO)
            .header("content-type", content_type)
            .body(())
            .unwrap();
        let answer = raw::answer(raw::send(&mut raw, head, Some(body.clone())).await)
            .await
            .expect("an answer, not a reset");
        println!("{content_type}: {answer:?}");
        assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(answer.grpc("grpc-status").as_deref(), Some("3"));
        let message = answer.grpc("grpc-message").unwrap_or_default();
        assert!(message.contains(content_type), "{message}");
    }
    assert_eq!(server.handlers_started(), 0, "a handler ran");
    assert_raw_connection_still_serves(&mut raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_other_than_post_get_405_and_never_reach_the_handler() {
    let server = TestServer::grpc(false).await;
    let mut raw = server.raw().await;
    for method in [Method::GET, Method::PUT] {
        let head = raw::request(method.clone(), SAY_HELLO)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let answer = raw::answer(raw::send(&mut raw, head, None).await)
            .await
            .expect("an answer, not a reset");
        println!("{method}: {answer:?}");
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(answer.grpc("grpc-status").as_deref(), Some("13"));
        assert_eq!(answer.headers["allow"], "POST");
    }
    assert_eq!(server.handlers_started(), 0, "a handler ran");
    assert_raw_connection_still_serves(&mut raw).await;
}

// ---------------------------------------------------------------------------
// Oversized metadata fails its own call, never the connection

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_metadata_fails_its_own_call_and_spares_the_neighbours() {
    let server = TestServer::grpc(false).await;
    let client = server.greeter().await;

    // A call in flight on the same channel, so on the same connection.
    let neighbour = tokio::spawn({
        let mut client = client.clone();
        async move { client.say_hello(hello("Grace", 1_000)).await }
    });
    wait_until("the neighbouring call is in flight", &server.stats, |s| {
        s.in_flight() == 1
    })
    .await;

    let mut request = Request::new(hello("Ada", 0));
    let padding = "a".repeat(64 * 1024);
    request
        .metadata_mut()
        .insert("x-padding", padding.parse().unwrap());
    let status = within("the oversized call", client.clone().say_hello(request))
        .await
        .expect_err("64 KiB of metadata must be refused");
    println!(
        "oversized metadata: {:?} {:?}",
        status.code(),
        status.message()
    );
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains(&MAX_METADATA_BYTES.to_string()),
        "{status:?}"
    );

    let reply = within("the neighbouring call", neighbour)
        .await
        .expect("task")
        .expect("the neighbouring call must survive");
    assert_eq!(reply.into_inner().message, "Hello, Grace!");
    let reply = within("a call after", client.clone().say_hello(hello("Ada", 0)))
        .await
        .expect("the channel must still serve");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
}

/// Past HTTP/2's own limit (MAX_HEADER_LIST_BYTES, 128 KiB) h2 refuses the
/// stream itself, with a bare 431; the connection still stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_list_over_the_protocol_limit_is_refused_on_its_stream_alone() {
    let server = TestServer::grpc(false).await;
    let mut raw = server.raw().await;
    let head = raw::request(Method::POST, SAY_HELLO)
        .header("content-type", "application/grpc")
        .header("x-padding", "a".repeat(150 * 1024))
        .body(())
        .unwrap();
    let body = raw::grpc_frame(&hello("Ada", 0));
    let response = raw::send(&mut raw, head, Some(body)).await;
    // h2 answers 431 and then resets the stream; either may be what arrives.
    match raw::answer(response).await {
        Ok(answer) => assert_eq!(answer.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        Err(e) => assert!(!e.is_go_away(), "the whole connection was closed: {e}"),
    }
    assert_eq!(server.handlers_started(), 0);
    assert_raw_connection_still_serves(&mut raw).await;
}

// ---------------------------------------------------------------------------
// A client that makes the server reset stream after stream is sent away

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_forcing_resets_by_the_thousand_is_sent_goaway() {
    let server = TestServer::grpc(false).await;
    let mut raw = server.raw().await;

    // HEADERS that end the stream yet announce a 5-byte body: a malformed
    // request (RFC 9113, section 8.1.1), which the server answers with
    // RST_STREAM. Each costs the client one small frame. Waiting for each
    // answer before the next request keeps the client from writing into a
    // connection the server has already closed, so the GOAWAY is read.
    let bound = 3 * MAX_LOCAL_ERROR_RESETS;
    let (mut sent, mut reset) = (0, 0);
    let mut ended = None;
    for _ in 0..bound {
        let send = match within("room for a stream", raw.send.clone().ready()).await {
            Ok(send) => send,
            Err(e) => {
                ended = Some(e);
                break;
            }
        };
        raw.send = send;
        let head = raw::request(Method::POST, SAY_HELLO)
            .header("content-type", "application/grpc")
            .header("content-length", "5")
            .body(())
            .unwrap();
        let response = match raw.send.send_request(head, true) {
            Ok((response, _)) => response,
            Err(e) => {
                ended = Some(e);
                break;
            }
        };
        sent += 1;
        match within("the answer", response).await {
            Ok(answer) => panic!("a malformed request was answered: {answer:?}"),
            Err(e) if e.is_go_away() => {
                ended = Some(e);
                break;
            }
            Err(_) => reset += 1,
        }
    }
    println!("sent {sent} malformed requests, {reset} reset; then {ended:?}");
    let error = ended.unwrap_or_else(|| panic!("{sent} malformed requests and no GOAWAY"));
    assert!(error.is_go_away(), "{error}");
    assert_eq!(
        error.reason(),
        Some(raw::h2::Reason::ENHANCE_YOUR_CALM),
        "{error}"
    );
    // The stream that went over the limit ends with the connection; the
    // client may report it as one more failed stream.
    assert!(
        (MAX_LOCAL_ERROR_RESETS..=MAX_LOCAL_ERROR_RESETS + 1).contains(&reset),
        "{reset} streams failed before the GOAWAY"
    );
    assert!(sent <= bound);
    assert_eq!(server.handlers_started(), 0);

    // The server itself is fine: a new connection is served.
    let reply = within(
        "a call on a new connection",
        server.greeter().await.say_hello(hello("Ada", 0)),
    )
    .await
    .expect("a new connection must be served");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
}

// ---------------------------------------------------------------------------
// A connection that completes TLS and then says nothing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_sends_the_preface_is_closed() {
    let server = TestServer::grpc(false).await;
    let mut silent = raw::tls(server.addr, &server.pki.ca_cert(), &[b"h2"])
        .await
        .expect("TLS");
    let started = Instant::now();

    // Meanwhile everyone else is served.
    let reply = within(
        "a call while the silent connection waits",
        server.greeter().await.say_hello(hello("Ada", 0)),
    )
    .await
    .expect("served");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");

    // The server may send its own SETTINGS; then it must close the connection.
    let mut received = Vec::new();
    let closed =
        tokio::time::timeout(PREFACE_TIMEOUT + WAIT, silent.read_to_end(&mut received)).await;
    let waited = started.elapsed();
    println!(
        "silent connection: {closed:?} after {waited:?}, {} bytes",
        received.len()
    );
    assert!(closed.is_ok(), "still open after {waited:?}");
    assert!(
        waited + Duration::from_secs(1) >= PREFACE_TIMEOUT,
        "closed after {waited:?}, before the preface timeout"
    );
}
