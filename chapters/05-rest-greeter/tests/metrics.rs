//! The REST server's Prometheus metrics, scraped from a real server while a
//! client sends requests over HTTP/1.1 and HTTP/2: every scrape must be valid
//! exposition text, and each request must land under its route and status.

use std::time::Duration;

use grpc_server::testing::{
    WAIT,
    scrape::{scrape, scrape_until},
};
use rest_server::{api::MAX_BODY_BYTES, testing};
use serde_json::json;

fn requests(method: &str, route: &str, status: u16) -> String {
    format!("http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}}")
}

fn client(pki: &certs::Pki, http2: bool) -> reqwest::Client {
    let mut tls = certs::client_config(&pki.ca_cert(), None).unwrap();
    tls.alpn_protocols = vec![if http2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    let builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .timeout(WAIT);
    if http2 { builder } else { builder.http1_only() }
        .build()
        .unwrap()
}

#[tokio::test]
async fn each_request_is_counted_under_its_route_and_status() {
    let (server, metrics) = testing::server_with_metrics().await;
    // Before any request only the in-flight gauge has a line.
    let before = scrape(metrics).await;
    assert_eq!(before.samples.len(), 1, "{:#?}", before.samples);
    assert_eq!(before.value("http_requests_in_flight"), 0.0);
    let greetings = server.url("/v1/greetings");
    for http2 in [false, true] {
        let c = client(&server.pki, http2);
        let ok = c
            .post(&greetings)
            .json(&json!({"name": "Ada"}))
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 200);
        let blank = c
            .post(&greetings)
            .json(&json!({"name": " "}))
            .send()
            .await
            .unwrap();
        assert_eq!(blank.status(), 400);
        let nowhere = c.get(server.url("/nope/123")).send().await.unwrap();
        assert_eq!(nowhere.status(), 404);
        let wrong_method = c.get(&greetings).send().await.unwrap();
        assert_eq!(wrong_method.status(), 405);
        // Refused by the guard on its Content-Length, before the router.
        let big = c
            .post(&greetings)
            .body(vec![b' '; MAX_BODY_BYTES + 1])
            .send()
            .await
            .unwrap();
        assert_eq!(big.status(), 413);
    }
    // A client that gives up while the handler waits out its delay.
    let gone = client(&server.pki, true)
        .post(&greetings)
        .json(&json!({"name": "Tony", "delay_ms": 5_000}))
        .timeout(Duration::from_millis(100))
        .send()
        .await;
    assert!(gone.unwrap_err().is_timeout());

    let s = scrape_until(metrics, |s| {
        s.value("http_requests_in_flight") == 0.0
            && s.value(&requests("POST", "unanswered", 499)) == 1.0
    })
    .await;
    assert_eq!(s.types["http_requests_total"], "counter");
    assert_eq!(s.types["http_request_duration_seconds"], "histogram");
    assert_eq!(s.value(&requests("POST", "/v1/greetings", 200)), 2.0);
    assert_eq!(s.value(&requests("POST", "/v1/greetings", 400)), 2.0);
    assert_eq!(s.value(&requests("GET", "unmatched", 404)), 2.0);
    assert_eq!(s.value(&requests("GET", "/v1/greetings", 405)), 2.0);
    assert_eq!(s.value(&requests("POST", "refused", 413)), 2.0);
    assert!(
        s.samples.keys().all(|k| !k.contains("/nope")),
        "a client's path became a label: {:#?}",
        s.samples
    );
    let total: f64 = s
        .samples
        .iter()
        .filter(|(k, _)| k.starts_with("http_requests_total"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(total, 11.0, "{:#?}", s.samples);
}
