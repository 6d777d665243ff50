//! The codes the server answers where tonic's would differ from the gRPC
//! specification (`grpc_server::spec_codes`): a deadline the server enforces
//! is DEADLINE_EXCEEDED, a client that gives up is still CANCELLED, and a
//! message over the limit is RESOURCE_EXHAUSTED. Each one is checked in what
//! the client receives and in what the server's metrics count.
//!
//! The deadline calls use a raw HTTP/2 client: a tonic client runs its own
//! timer for the `grpc-timeout` it sends, and whichever of the two timers
//! fires first decides what that client reports. A raw client has no timer,
//! so what it reports is the server's answer, every time.

use std::net::SocketAddr;

use grpc_server::{
    BoundServer,
    metrics::serve,
    testing::{
        TempPki, TestServer,
        raw::{self, RawH2},
        scrape::{Scrape, scrape_until},
        tls_channel, wait_until, within,
    },
};
use prometheus_client::registry::Registry;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{Code, codegen::http};

const SAY_HELLO: &str = "/greeter.v1.Greeter/SayHello";

fn handled(code: &str) -> String {
    format!(
        "grpc_server_handled_total{{grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",\
         grpc_method=\"SayHello\",grpc_code=\"{code}\"}}"
    )
}

/// The greeter with its metrics served on a port of their own.
async fn start() -> (TestServer, SocketAddr) {
    let pki = TempPki::new();
    let mut registry = Registry::default();
    let server = BoundServer::bind(&pki.server_args(false))
        .await
        .expect("bind")
        .with_metrics(&mut registry);
    let metrics = serve("127.0.0.1:0".parse().unwrap(), registry)
        .await
        .expect("metrics port");
    let server = TestServer::start(pki, server.local_addr(), server.stats(), |shutdown| {
        server.serve(shutdown)
    });
    (server, metrics)
}

async fn raw_client(server: &TestServer) -> RawH2 {
    raw::h2_connect(server.addr, &server.pki.ca_cert(), &raw::Builder::new()).await
}

/// A SayHello head with `grpc-timeout: timeout`, if any.
fn say_hello(timeout: Option<&str>) -> http::Request<()> {
    let mut head = raw::grpc_request(SAY_HELLO);
    if let Some(timeout) = timeout {
        head.headers_mut()
            .insert("grpc-timeout", timeout.parse().unwrap());
    }
    head
}

fn hello(delay_ms: u32) -> HelloRequest {
    HelloRequest {
        name: "Ada".into(),
        delay_ms,
    }
}

/// Scrapes until every SayHello the test made has been recorded.
async fn all_recorded(metrics: SocketAddr, calls: f64) -> Scrape {
    let started = "grpc_server_started_total{grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",grpc_method=\"SayHello\"}";
    let in_flight = "grpc_server_in_flight{grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",grpc_method=\"SayHello\"}";
    scrape_until(metrics, |s| {
        s.value(started) == calls && s.value(in_flight) == 0.0
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_the_server_enforces_is_deadline_exceeded() {
    let (server, metrics) = start().await;
    let mut raw = raw_client(&server).await;
    // Several at once, on one connection: every one of them must come back
    // as DEADLINE_EXCEEDED, not some as tonic's CANCELLED.
    const CALLS: u32 = 20;
    let mut responses = Vec::new();
    for _ in 0..CALLS {
        let body = raw::grpc_frame(&hello(800));
        responses.push(raw::send(&mut raw, say_hello(Some("100m")), Some(body)).await);
    }
    for response in responses {
        let answer = raw::answer(response).await.expect("an answer, not a reset");
        assert_eq!(answer.status, http::StatusCode::OK, "{answer:?}");
        assert_eq!(
            answer.grpc("grpc-status").as_deref(),
            Some("4"),
            "{answer:?}"
        );
        let message = answer.grpc("grpc-message").unwrap_or_default();
        assert!(message.contains("grpc-timeout%20of%20100ms"), "{message}");
    }

    // The handlers were dropped mid-wait, not left to run out their delay.
    wait_until("every call ended early", &server.stats, |s| {
        s.ended_early() == u64::from(CALLS) && s.in_flight() == 0
    })
    .await;
    assert_eq!(server.stats.completed(), 0);
    let after = all_recorded(metrics, CALLS.into()).await;
    assert_eq!(
        after.value(&handled("DeadlineExceeded")),
        f64::from(CALLS),
        "{:#?}",
        after.samples
    );
    assert_eq!(
        after.value(&handled("Canceled")),
        0.0,
        "{:#?}",
        after.samples
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_gives_up_before_its_deadline_is_cancelled() {
    let (server, metrics) = start().await;
    let mut raw = raw_client(&server).await;
    // Ten seconds of deadline, five of work: the client resets the stream
    // (RST_STREAM CANCEL) once the handler is waiting, long before either.
    let (response, mut stream) = raw::start(&mut raw, say_hello(Some("10S"))).await;
    stream
        .send_data(raw::grpc_frame(&hello(5_000)), true)
        .expect("the request is sent");
    wait_until("the handler is waiting", &server.stats, |s| {
        s.in_flight() == 1
    })
    .await;
    stream.send_reset(raw::h2::Reason::CANCEL);
    let answer = within("the reset call", response).await;
    assert!(answer.is_err(), "a reset stream has no answer: {answer:?}");

    wait_until("the call ended early", &server.stats, |s| {
        s.ended_early() == 1 && s.in_flight() == 0
    })
    .await;
    let after = all_recorded(metrics, 1.0).await;
    assert_eq!(
        after.value(&handled("Canceled")),
        1.0,
        "{:#?}",
        after.samples
    );
    assert_eq!(
        after.value(&handled("DeadlineExceeded")),
        0.0,
        "{:#?}",
        after.samples
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_resource_exhausted() {
    let (server, metrics) = start().await;

    // A raw client: a prefix that claims 70 000 bytes, and no message at all.
    let mut raw = raw_client(&server).await;
    let prefix = vec![0, 0, 1, 0x11, 0x70].into();
    let answer = raw::answer(raw::send(&mut raw, say_hello(None), Some(prefix)).await)
        .await
        .expect("an answer, not a reset");
    assert_eq!(
        answer.grpc("grpc-status").as_deref(),
        Some("8"),
        "{answer:?}"
    );
    let message = answer.grpc("grpc-message").unwrap_or_default();
    assert!(
        message.contains("decoded%20message%20length%20too%20large"),
        "{message}"
    );

    // A tonic client, with a name that makes the message 100 004 bytes.
    let channel = tls_channel(server.addr, &server.pki.ca_cert(), None)
        .await
        .expect("connect");
    let request = HelloRequest {
        name: "x".repeat(100_000),
        delay_ms: 0,
    };
    let status = within(
        "an oversized call",
        GreeterClient::new(channel).say_hello(request),
    )
    .await
    .expect_err("over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("found 100004 bytes"),
        "{status:?}"
    );

    assert_eq!(server.handlers_started(), 0);
    let after = all_recorded(metrics, 2.0).await;
    assert_eq!(
        after.value(&handled("ResourceExhausted")),
        2.0,
        "{:#?}",
        after.samples
    );
    assert_eq!(
        after.value(&handled("OutOfRange")),
        0.0,
        "{:#?}",
        after.samples
    );
}
