//! The gRPC server's Prometheus metrics, scraped from a real server while a
//! client makes calls: every scrape must be valid exposition text, and its
//! counters must move by exactly what the client just did.

use std::time::Duration;

use grpc_server::{
    BoundServer,
    metrics::serve,
    testing::{
        TempPki, TestServer,
        scrape::{scrape, scrape_until},
        tls_channel, within,
    },
};
use prometheus_client::registry::Registry;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{Code, Request};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

const SAY_HELLO: &str =
    "grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",grpc_method=\"SayHello\"";

fn handled(code: &str) -> String {
    format!("grpc_server_handled_total{{{SAY_HELLO},grpc_code=\"{code}\"}}")
}

fn series(name: &str) -> String {
    format!("{name}{{{SAY_HELLO}}}")
}

async fn start() -> (TestServer, std::net::SocketAddr) {
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

#[tokio::test]
async fn counters_follow_the_calls_a_client_makes() {
    let (server, metrics) = start().await;
    // A family shows no lines until its first label set.
    let before = scrape(metrics).await;
    assert!(before.samples.is_empty(), "{:#?}", before.samples);

    let channel = tls_channel(server.addr, &server.pki.ca_cert(), None)
        .await
        .expect("connect");
    let mut client = GreeterClient::new(channel.clone());
    for name in ["Ada", "Grace", "Edsger"] {
        let request = HelloRequest {
            name: name.into(),
            delay_ms: 0,
        };
        within("a greeting", client.say_hello(request))
            .await
            .expect("served");
    }
    for name in ["", " "] {
        let request = HelloRequest {
            name: name.into(),
            delay_ms: 0,
        };
        let status = within("a refusal", client.say_hello(request))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
    }
    // A call whose deadline passes while the server waits out its delay.
    let mut slow = Request::new(HelloRequest {
        name: "Tony".into(),
        delay_ms: 5_000,
    });
    slow.set_timeout(Duration::from_millis(100));
    let status = within("a deadline", client.say_hello(slow))
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{status:?}"
    );
    let mut health = HealthClient::new(channel);
    within(
        "a health check",
        health.check(HealthCheckRequest::default()),
    )
    .await
    .expect("serving");

    let after = scrape_until(metrics, |s| {
        s.value(&series("grpc_server_in_flight")) == 0.0
            && s.value(&series("grpc_server_handling_seconds_count")) == 6.0
    })
    .await;
    assert_eq!(after.types["grpc_server_handled_total"], "counter");
    assert_eq!(after.types["grpc_server_handling_seconds"], "histogram");
    assert_eq!(after.types["grpc_server_in_flight"], "gauge");
    assert_eq!(after.value(&series("grpc_server_started_total")), 6.0);
    assert_eq!(after.value(&handled("OK")), 3.0);
    assert_eq!(after.value(&handled("InvalidArgument")), 2.0);
    // The server answers a passed grpc-timeout with DEADLINE_EXCEEDED; the
    // tonic client's own timer may reset the stream a moment before, and
    // then the dropped response counts as Canceled. Either way, one call.
    // (tests/spec_codes.rs checks each case alone.)
    assert_eq!(
        after.value(&handled("DeadlineExceeded")) + after.value(&handled("Canceled")),
        1.0,
        "{:#?}",
        after.samples
    );
    assert_eq!(
        after.value("grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"grpc.health.v1.Health\",grpc_method=\"Check\",grpc_code=\"OK\"}"),
        1.0
    );
    // Every call lands in the +Inf bucket; none of these took over 10 s.
    assert_eq!(
        after.value(&format!(
            "grpc_server_handling_seconds_bucket{{{SAY_HELLO},le=\"+Inf\"}}"
        )),
        6.0
    );
    assert_eq!(
        after.value(&format!(
            "grpc_server_handling_seconds_bucket{{{SAY_HELLO},le=\"10\"}}"
        )),
        6.0
    );
}

#[tokio::test]
async fn a_made_up_method_is_counted_without_its_name() {
    let (server, metrics) = start().await;
    let channel = tls_channel(server.addr, &server.pki.ca_cert(), None)
        .await
        .expect("connect");
    let mut grpc = tonic::client::Grpc::new(channel);
    for method in ["Nope", "AlsoNope", "StillNope"] {
        within("ready", grpc.ready()).await.expect("ready");
        let path = format!("/greeter.v1.Greeter/{method}").parse().unwrap();
        let call = grpc.unary::<_, proto::greeter::v1::HelloReply, _>(
            Request::new(HelloRequest::default()),
            path,
            tonic_prost::ProstCodec::default(),
        );
        let status = within("an unknown method", call).await.unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented);
    }
    let after = scrape_until(metrics, |s| !s.samples.is_empty()).await;
    let unknown = "grpc_server_handled_total{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\",grpc_code=\"Unimplemented\"}";
    assert_eq!(after.value(unknown), 3.0, "{:#?}", after.samples);
    assert!(
        after.samples.keys().all(|k| !k.contains("Nope")),
        "a client-chosen name became a label: {:#?}",
        after.samples
    );
}
