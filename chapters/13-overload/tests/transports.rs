//! One pool behind gRPC and REST (loopback, port 0): each transport's caller
//! reads a refusal the same way, with when to come back; a dropped call and
//! bad input get their own clear answers. Codes and counts, not timings.

use std::{sync::Arc, time::Duration};

use clap::ValueEnum;
use overload::{
    Transport,
    client::{Caller, Failure},
    rest::TIMEOUT_HEADER,
    server::{ERROR_DOMAIN, Fate, Order, Rules, Running},
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use rest_server::Problem;
use tonic::Code;
use tonic_types::StatusExt;

fn rules(queue: usize, drop_expired: bool, service: Duration) -> Rules {
    Rules {
        workers: 1,
        queue,
        order: Order::Fifo,
        drop_expired,
        service,
        margin: Duration::ZERO,
    }
}

fn http() -> reqwest::Client {
    let _ = Arc::unwrap_or_clone(certs::config::provider()).install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test]
async fn a_refusal_says_when_to_come_back_over_every_transport() {
    // One worker, no queue, 5 s of work per call: once a call holds the
    // worker, every other is refused, and told to come back when the worker
    // could be free: after 5 s (HTTP counts whole seconds; 5 s is one).
    let server = Running::start(rules(0, false, Duration::from_secs(5)))
        .await
        .unwrap();
    let first = Caller::connect(Transport::Grpc, &server, 4).await.unwrap();
    let holder =
        tokio::spawn(async move { first.attempt("first".into(), Duration::from_secs(30)).await });
    while server.pool.load().0 == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for &transport in Transport::value_variants() {
        let caller = Caller::connect(transport, &server, 4).await.unwrap();
        let answer = caller
            .attempt("second".into(), Duration::from_secs(30))
            .await;
        assert_eq!(
            answer,
            Err(Failure {
                code: Code::ResourceExhausted,
                retry_after: Some(Duration::from_secs(5)),
            }),
            "{transport:?}"
        );
    }

    // What each protocol says, as its own clients see it.
    let channel = tonic::transport::Channel::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = GreeterClient::new(channel)
        .say_hello(HelloRequest {
            name: "third".into(),
            delay_ms: 0,
        })
        .await
        .unwrap_err();
    let info = status.get_details_error_info().expect("an ErrorInfo");
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("OVERLOADED", ERROR_DOMAIN)
    );
    assert_eq!(info.metadata.get("workers").map(String::as_str), Some("1"));

    let response = http()
        .post(server.greetings_url())
        .json(&serde_json::json!({ "name": "fourth" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "5");
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let problem: Problem = response.json().await.unwrap();
    assert_eq!(problem.code(), Some(Code::ResourceExhausted));

    holder.abort();
    assert_eq!(server.pool.fates()[3], (Fate::Shed, 5));
}

#[tokio::test]
async fn over_rest_a_call_that_cannot_end_in_time_is_dropped_with_504() {
    // One worker, 300 ms per call, three calls at once that give up after
    // 400 ms: the first is served; the others could only end at 600 and
    // 900 ms, so they are dropped unworked.
    let server = Running::start(rules(10, true, Duration::from_millis(300)))
        .await
        .unwrap();
    let http = http();
    let calls = (0..3).map(|i| {
        let request = http
            .post(server.greetings_url())
            .header(TIMEOUT_HEADER, "400")
            .json(&serde_json::json!({ "name": format!("call {i}") }))
            .timeout(Duration::from_secs(10));
        tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
    });
    let mut statuses = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        statuses.push(call.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 504, 504]);
    assert_eq!(
        server.pool.fates(),
        [
            (Fate::Served, 1),
            (Fate::Wasted, 0),
            (Fate::Dropped, 2),
            (Fate::Shed, 0)
        ]
    );
}

#[tokio::test]
async fn bad_rest_requests_get_a_problem_that_names_what_was_wrong() {
    let server = Running::start(rules(10, true, Duration::from_millis(10)))
        .await
        .unwrap();
    let http = http();
    let bad_timeout = http
        .post(server.greetings_url())
        .header(TIMEOUT_HEADER, "soon")
        .json(&serde_json::json!({ "name": "Ada" }))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_timeout.status(), 400);
    let problem: Problem = bad_timeout.json().await.unwrap();
    assert_eq!(problem.code(), Some(Code::InvalidArgument));
    assert_eq!(problem.field.as_deref(), Some(TIMEOUT_HEADER));

    let bad_json = http
        .post(server.greetings_url())
        .header("content-type", "application/json")
        .body("{\"name\":")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    let problem: Problem = bad_json.json().await.unwrap();
    assert_eq!(problem.code(), Some(Code::InvalidArgument));
    assert!(problem.detail.contains("JSON"), "{problem:?}");

    // Neither reached the workers.
    assert!(server.pool.records().is_empty());
}
