//! The REST echo of the server process, over HTTP/1.1 and over h2c, and the
//! flags of the REST shapes.

use std::{path::PathBuf, time::Duration};

use per_call::{
    Arm,
    load::{Rest, rest_client},
    rest::Http,
    run::{snapshot, start_server},
};
use reqwest::{StatusCode, Version};

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_per_call"))
}

#[tokio::test]
async fn the_rest_echo_answers_over_http1_and_h2c_in_both_handler_arms() {
    for text in ["ct-inline", "mt2-spawn"] {
        let arm: Arm = text.parse().unwrap();
        let mut server = start_server(&exe(), arm, None, Vec::new()).await.unwrap();
        let rest = server.ready.rest;
        for (http, addr, version) in [
            (Http::H1, rest.h1, Version::HTTP_11),
            (Http::H2, rest.h2, Version::HTTP_2),
        ] {
            let client = rest_client(http, 4).unwrap();
            for name in ["Ada", "Grace"] {
                let response = client
                    .post(format!("http://{addr}/v1/greetings"))
                    .json(&serde_json::json!({ "name": name }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.version(), version, "{text} {http:?}");
                assert_eq!(response.status(), StatusCode::OK);
                let reply: serde_json::Value = response.json().await.unwrap();
                assert_eq!(reply["message"], format!("Hello, {name}!"));
            }
        }
        let stats = snapshot(&mut server).await.unwrap();
        assert_eq!(stats.rest_requests, 4, "{text}");
        let spawned = if text.ends_with("spawn") { 4 } else { 0 };
        assert_eq!(stats.spawned, spawned, "{text}");
        // One connection per client: each reused its connection.
        assert_eq!(stats.connections, 2, "{text}");
        assert_eq!(stats.failed_connections, 0, "{text}");
        server.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_body_that_is_not_a_greeting_gets_a_problem_that_says_why() {
    let mut server = start_server(&exe(), "ct-inline".parse().unwrap(), None, Vec::new())
        .await
        .unwrap();
    let rest = server.ready.rest;
    for (http, addr) in [(Http::H1, rest.h1), (Http::H2, rest.h2)] {
        let client = rest_client(http, 4).unwrap();
        let url = format!("http://{addr}/v1/greetings");
        for (body, content_type, status, says) in [
            (r#"{"name":"#, "application/json", 400, "JSON"),
            (r#"{"nom":"Ada"}"#, "application/json", 422, "name"),
            (r#"{"name":"Ada"}"#, "text/plain", 415, "application/json"),
        ] {
            let response = client
                .post(&url)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), status, "{http:?} {body}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let problem: serde_json::Value = response.json().await.unwrap();
            assert_eq!(problem["status"], status);
            let detail = problem["detail"].as_str().unwrap();
            assert!(detail.contains(says), "{http:?} {body}: {detail}");
        }
    }
    // Refused requests are not counted as answered ones.
    assert_eq!(snapshot(&mut server).await.unwrap().rest_requests, 0);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn the_load_generators_rest_calls_succeed_and_reuse_the_pool() {
    let mut server = start_server(&exe(), "ct-inline".parse().unwrap(), None, Vec::new())
        .await
        .unwrap();
    let rest = server.ready.rest;
    let deadline = Duration::from_secs(5);
    for (http, addr) in [(Http::H1, rest.h1), (Http::H2, rest.h2)] {
        let load = Rest::new(http, addr, 3, deadline).unwrap();
        // Twelve at once through a pool of three (HTTP/1.1), or one connection.
        let calls = (0..12).map(|index| {
            load.call(loadgen::Slot {
                index,
                step: 0,
                due: Duration::ZERO,
            })
        });
        for result in futures_join(calls).await {
            result.unwrap();
        }
    }
    let stats = snapshot(&mut server).await.unwrap();
    assert_eq!(stats.rest_requests, 24);
    // At most three HTTP/1.1 connections and one HTTP/2 connection (the
    // pool's permits bound the requests out at once, so the connections).
    assert!((2..=4).contains(&stats.connections), "{stats:?}");
    server.stop().await.unwrap();
}

/// Runs the futures concurrently on this task and collects their results.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}
