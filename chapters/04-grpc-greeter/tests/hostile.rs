//! The gRPC server against clients that do what well-behaved clients do not:
//! requests that are not gRPC calls, oversized metadata. Each test
//! plays that client with a raw HTTP/2 client (the `h2` crate) or a raw TLS
//! socket, and checks what it sees and that everyone else is still served.

use std::{net::SocketAddr, sync::Arc};

use grpc_server::{
    BoundServer, CallStats,
    server::MAX_METADATA_BYTES,
    testing::{Serving, TempPki, raw, spawn_until_dropped, tls_channel, wait_until, within},
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{
    Code, Request,
    codegen::http::{Method, StatusCode},
    transport::Channel,
};

const SAY_HELLO: &str = "/greeter.v1.Greeter/SayHello";

struct TestServer {
    addr: SocketAddr,
    stats: Arc<CallStats>,
    _serving: Serving,
    pki: TempPki,
}

async fn start_server() -> TestServer {
    let pki = TempPki::new();
    let server = BoundServer::bind(&pki.server_args(false))
        .await
        .expect("bind");
    TestServer {
        addr: server.local_addr(),
        stats: server.stats(),
        _serving: spawn_until_dropped(|shutdown| server.serve(shutdown)),
        pki,
    }
}

impl TestServer {
    async fn raw(&self) -> raw::RawH2 {
        raw::h2_connect(self.addr, &self.pki.ca_cert(), &raw::Builder::new()).await
    }

    async fn greeter(&self) -> GreeterClient<Channel> {
        let channel = tls_channel(self.addr, &self.pki.ca_cert(), None)
            .await
            .expect("connect");
        GreeterClient::new(channel)
    }

    fn handlers_started(&self) -> u64 {
        self.stats
            .started
            .load(std::sync::atomic::Ordering::Relaxed)
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
    let server = start_server().await;
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
    let server = start_server().await;
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
    let server = start_server().await;
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
    let server = start_server().await;
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
