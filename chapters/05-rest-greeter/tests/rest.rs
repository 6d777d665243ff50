//! The REST greeter end to end: real TLS with a fresh PKI in a temporary folder,
//! the server on 127.0.0.1:0, and reqwest as the client over HTTP/1.1 and HTTP/2.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use certs::Pki;
use grpc_server::{
    MAX_DELAY_MS, MAX_NAME_CHARS,
    testing::{TestServer, WAIT, tls_channel, wait_until, within},
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use reqwest::{StatusCode, Version};
use rest_server::{api::MAX_BODY_BYTES, problem, testing};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tonic_types::StatusExt;

fn url(addr: SocketAddr, path: &str) -> String {
    format!("https://{addr}{path}")
}

#[derive(Clone, Copy, Debug)]
enum Http {
    V1,
    V2,
}

/// A client that trusts only the test PKI's CA and speaks exactly one HTTP
/// version, chosen by ALPN, so a test knows which protocol it exercised.
fn client(pki: &Pki, http: Http, with_client_cert: bool) -> reqwest::Client {
    let (cert, key) = (pki.client_cert(), pki.client_key());
    let identity = with_client_cert.then_some((cert.as_path(), key.as_path()));
    let mut tls = certs::client_config(&pki.ca_cert(), identity).unwrap();
    tls.alpn_protocols = vec![match http {
        Http::V1 => b"http/1.1".to_vec(),
        Http::V2 => b"h2".to_vec(),
    }];
    let builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .timeout(3 * WAIT);
    match http {
        Http::V1 => builder.http1_only(),
        Http::V2 => builder,
    }
    .build()
    .unwrap()
}

fn expected_version(http: Http) -> Version {
    match http {
        Http::V1 => Version::HTTP_11,
        Http::V2 => Version::HTTP_2,
    }
}

/// POSTs a greeting request and returns the response.
async fn greet(client: &reqwest::Client, url: &str, body: Value) -> reqwest::Response {
    client.post(url).json(&body).send().await.unwrap()
}

/// Asserts a successful greeting over the expected protocol.
async fn assert_greets(client: &reqwest::Client, server: &TestServer, http: Http) {
    let response = greet(
        client,
        &server.url("/v1/greetings"),
        json!({"name": "Ada", "delay_ms": 10}),
    )
    .await;
    assert_greeting(response, http).await;
}

/// Asserts that `response` greets Ada over the expected protocol, however the
/// call was made (directly, or spawned and answered later).
async fn assert_greeting(response: reqwest::Response, http: Http) {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), expected_version(http));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"message": "Hello, Ada!"}));
}

/// A TCP relay in front of the server that counts connections. It lets a test
/// tell "the client reset one stream and kept the connection" from "the client
/// closed the connection", which the server's counters alone cannot.
struct Relay {
    addr: SocketAddr,
    opened: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
}

async fn relay_to(target: SocketAddr) -> Relay {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay = Relay {
        addr: listener.local_addr().unwrap(),
        opened: Arc::default(),
        open: Arc::default(),
    };
    let (opened, open) = (relay.opened.clone(), relay.open.clone());
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            opened.fetch_add(1, Ordering::SeqCst);
            open.fetch_add(1, Ordering::SeqCst);
            let open = open.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    // Ends once both sides have closed (or either resets).
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    relay
}

impl Relay {
    /// Connections accepted so far: one more means the client had to dial again.
    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }

    /// Connections still up: it drops only when a side actually closes.
    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Asserts that `response` is RFC 9457 problem details with this status, and
/// returns the body for further checks.
async fn assert_problem(response: reqwest::Response, status: StatusCode) -> Value {
    assert_eq!(response.status(), status);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(content_type, problem::CONTENT_TYPE);
    let body: Value = response.json().await.unwrap();
    for member in ["type", "title", "detail"] {
        let text = body[member].as_str().unwrap_or_default();
        assert!(!text.is_empty(), "`{member}` missing or empty in {body}");
    }
    assert_eq!(body["status"], status.as_u16(), "{body}");
    body
}

// ---------------------------------------------------------------------------
// Greetings and health

#[tokio::test]
async fn greets_over_http1() {
    let server = testing::server(false).await;
    assert_greets(&client(&server.pki, Http::V1, false), &server, Http::V1).await;
    assert_eq!(server.stats.completed(), 1);
}

#[tokio::test]
async fn greets_over_http2() {
    let server = testing::server(false).await;
    assert_greets(&client(&server.pki, Http::V2, false), &server, Http::V2).await;
    assert_eq!(server.stats.completed(), 1);
}

#[tokio::test]
async fn health_reports_serving() {
    let server = testing::server(false).await;
    for http in [Http::V1, Http::V2] {
        let response = client(&server.pki, http, false)
            .get(server.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.version(), expected_version(http));
        let body: Value = response.json().await.unwrap();
        assert_eq!(body, json!({"status": "SERVING"}));
    }
}

// ---------------------------------------------------------------------------
// Bad input: a clear problem, and the server keeps serving

/// One bad request and the problem it must produce.
struct BadInput {
    what: &'static str,
    method: reqwest::Method,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: StatusCode,
    /// The `field` member the problem must name, when the fault is one field.
    field: Option<&'static str>,
}

fn bad_inputs() -> Vec<BadInput> {
    use reqwest::Method;
    let json_post = |what, body: Value, status, field| BadInput {
        what,
        method: Method::POST,
        path: "/v1/greetings",
        content_type: Some("application/json"),
        body: body.to_string().into_bytes(),
        status,
        field,
    };
    // Valid JSON, just too big: the size alone must be the reason for the 413.
    let huge_name = "A".repeat(MAX_BODY_BYTES + 1);
    vec![
        json_post(
            "empty name",
            json!({"name": "", "delay_ms": 0}),
            StatusCode::BAD_REQUEST,
            Some("name"),
        ),
        json_post(
            "delay_ms over the maximum",
            json!({"name": "Ada", "delay_ms": MAX_DELAY_MS + 1}),
            StatusCode::BAD_REQUEST,
            Some("delay_ms"),
        ),
        BadInput {
            what: "malformed JSON",
            method: Method::POST,
            path: "/v1/greetings",
            content_type: Some("application/json"),
            body: br#"{"name":"#.to_vec(),
            status: StatusCode::BAD_REQUEST,
            field: None,
        },
        json_post(
            "missing field",
            json!({"delay_ms": 5}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("name"),
        ),
        json_post(
            "wrong type",
            json!({"name": "Ada", "delay_ms": "soon"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("delay_ms"),
        ),
        json_post(
            "unknown field",
            json!({"name": "Ada", "delayms": 5}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("delayms"),
        ),
        json_post(
            "body over the limit",
            json!({"name": huge_name}),
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
        ),
        BadInput {
            content_type: Some("text/plain"),
            ..json_post(
                "wrong content type",
                json!({"name": "Ada"}),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                None,
            )
        },
        BadInput {
            content_type: None,
            ..json_post(
                "missing content type",
                json!({"name": "Ada"}),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                None,
            )
        },
        BadInput {
            what: "wrong method",
            method: Method::GET,
            path: "/v1/greetings",
            content_type: None,
            body: Vec::new(),
            status: StatusCode::METHOD_NOT_ALLOWED,
            field: None,
        },
        BadInput {
            what: "unknown path",
            method: Method::GET,
            path: "/v1/nothing-here",
            content_type: None,
            body: Vec::new(),
            status: StatusCode::NOT_FOUND,
            field: None,
        },
    ]
}

/// Sends every bad input over one protocol, each followed by a good greeting
/// on the same client: a bad request must cost nothing but its own answer.
async fn bad_inputs_get_problems_and_server_keeps_serving(http: Http) {
    let server = testing::server(false).await;
    let client = client(&server.pki, http, false);
    for bad in bad_inputs() {
        let mut request = client
            .request(bad.method.clone(), server.url(bad.path))
            .body(bad.body.clone());
        if let Some(content_type) = bad.content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.version(), expected_version(http), "{}", bad.what);
        let problem = assert_problem(response, bad.status).await;
        if let Some(field) = bad.field {
            assert_eq!(problem["field"], field, "{}: {problem}", bad.what);
            assert!(
                problem["detail"].as_str().unwrap().contains(field),
                "{}: the detail should name `{field}`: {problem}",
                bad.what
            );
        }
        assert_greets(&client, &server, http).await;
    }
    // No bad request reached the slow part of the handler.
    assert_eq!(server.stats.started.load(Ordering::Relaxed), 11);
    assert_eq!(server.stats.completed(), 11);
}

#[tokio::test]
async fn bad_inputs_over_http1() {
    bad_inputs_get_problems_and_server_keeps_serving(Http::V1).await;
}

#[tokio::test]
async fn bad_inputs_over_http2() {
    bad_inputs_get_problems_and_server_keeps_serving(Http::V2).await;
}

/// The greeter's own rules, broken over both protocols: REST's `violations`
/// say exactly what gRPC's BadRequest says, because both come from the one
/// `check_request`.
#[tokio::test]
async fn a_broken_rule_gets_the_same_violation_over_rest_and_grpc() {
    let rest = testing::server(false).await;
    let grpc = TestServer::grpc(false).await;
    let http = client(&rest.pki, Http::V2, false);
    let channel = tls_channel(grpc.addr, &grpc.pki.ca_cert(), None)
        .await
        .unwrap();
    let mut greeter = GreeterClient::new(channel);

    let too_long = "x".repeat(MAX_NAME_CHARS + 1);
    for (name, delay_ms, field, reason) in [
        ("", 0, "name", "NAME_EMPTY"),
        ("  ", 0, "name", "NAME_EMPTY"),
        (too_long.as_str(), 0, "name", "NAME_TOO_LONG"),
        ("Ada", MAX_DELAY_MS + 1, "delay_ms", "DELAY_TOO_LONG"),
    ] {
        let response = http
            .post(rest.url("/v1/greetings"))
            .json(&json!({"name": name, "delay_ms": delay_ms}))
            .send()
            .await
            .unwrap();
        let problem = assert_problem(response, StatusCode::BAD_REQUEST).await;
        assert_eq!(problem["type"], problem::INVALID_ARGUMENT, "{problem}");
        assert_eq!(problem["field"], field, "{problem}");

        let request = HelloRequest {
            name: name.into(),
            delay_ms,
        };
        let status = within("invalid call", greeter.say_hello(request))
            .await
            .expect_err("refused");
        let details = status.check_error_details().expect("details that decode");
        let violation = &details
            .bad_request()
            .expect("a BadRequest")
            .field_violations[0];
        assert_eq!(violation.field, field);
        assert_eq!(violation.reason, reason);
        // The same words, the same field, the same reason, on both protocols.
        assert_eq!(
            problem["violations"],
            json!([{
                "field": violation.field,
                "description": violation.description,
                "reason": violation.reason,
            }]),
            "{problem}"
        );
        assert_eq!(problem["detail"], status.message(), "{problem}");
    }
}

// ---------------------------------------------------------------------------
// A client that gives up during `delay_ms`
//
// Found by test (and by curl first): hyper drops the handler's future in both
// cases, so the CallGuard counts the call as ended early. HTTP/2 cancels just
// the one stream (RST_STREAM) and the connection stays up; HTTP/1.1 has no way
// to cancel a request but to close its connection.

/// Starts a slow greeting to `url` on its own task and returns once the server
/// is in its `delay_ms`: only then does giving up or shutting down act on a call
/// that is really in flight, not on one still connecting.
async fn call_in_flight(
    server: &TestServer,
    client: &reqwest::Client,
    url: String,
    delay_ms: u64,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let call = tokio::spawn({
        let client = client.clone();
        async move { greet(&client, &url, json!({"name": "Ada", "delay_ms": delay_ms})).await }
    });
    wait_until("the call is in flight", &server.stats, |s| {
        s.in_flight() == 1
    })
    .await;
    call
}

/// Starts a 5-second greeting through a relay, waits until the server is in
/// the slow part, then drops the request future (the client itself lives on).
/// Returns once the server has counted the call as ended early.
async fn give_up_mid_call(http: Http) -> (TestServer, Relay, reqwest::Client) {
    let server = testing::server(false).await;
    let relay = relay_to(server.addr).await;
    let client = client(&server.pki, http, false);
    let call = call_in_flight(&server, &client, url(relay.addr, "/v1/greetings"), 5000).await;
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());

    wait_until(
        "the server counts the call as ended early",
        &server.stats,
        |s| s.ended_early() == 1 && s.in_flight() == 0,
    )
    .await;
    assert_eq!(server.stats.completed(), 0);
    (server, relay, client)
}

/// One more greeting through the relay after the abandoned call, answered over
/// `version`; the caller then reads the relay to see which connection carried it.
async fn assert_greets_again_through(relay: &Relay, client: &reqwest::Client, version: Version) {
    let response = greet(
        client,
        &url(relay.addr, "/v1/greetings"),
        json!({"name": "Ada"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), version);
}

#[tokio::test]
async fn http2_client_giving_up_resets_the_stream_and_the_server_stops_work() {
    let (server, relay, client) = give_up_mid_call(Http::V2).await;
    // The server noticed while the one connection was still open: it was told
    // by the stream reset, not by a disconnect.
    assert_eq!(relay.opened(), 1);
    assert_eq!(relay.open(), 1);

    // And that connection still carries new calls.
    assert_greets_again_through(&relay, &client, Version::HTTP_2).await;
    assert_eq!(relay.opened(), 1);
    assert_eq!(server.stats.completed(), 1);
}

#[tokio::test]
async fn http1_client_giving_up_closes_the_connection_and_the_server_stops_work() {
    let (server, relay, client) = give_up_mid_call(Http::V1).await;
    // HTTP/1.1 cannot cancel a request in flight: the client closed the
    // connection, and that is what the server noticed.
    wait_until("the abandoned connection is closed", &relay.open, |open| {
        open.load(Ordering::SeqCst) == 0
    })
    .await;
    assert_eq!(relay.opened(), 1);

    // The next call needs, and gets, a new connection.
    assert_greets_again_through(&relay, &client, Version::HTTP_11).await;
    assert_eq!(relay.opened(), 2);
    assert_eq!(server.stats.completed(), 1);
}

// ---------------------------------------------------------------------------
// Mutual TLS

#[tokio::test]
async fn mtls_rejects_a_client_without_a_certificate_and_accepts_one_with() {
    let server = testing::server(true).await;
    for http in [Http::V1, Http::V2] {
        let anonymous = client(&server.pki, http, false)
            .post(server.url("/v1/greetings"))
            .json(&json!({"name": "Ada"}))
            .send()
            .await;
        // The cause arrives as a TLS alert or as a reset, depending on timing,
        // so only the failure itself is asserted.
        assert!(anonymous.is_err(), "{http:?}: {anonymous:?}");

        assert_greets(&client(&server.pki, http, true), &server, http).await;
    }
    assert_eq!(server.stats.started.load(Ordering::Relaxed), 2);
}

// ---------------------------------------------------------------------------
// Graceful shutdown

/// A call in flight when shutdown starts still gets its answer; then `serve`
/// returns Ok and the port accepts no more connections.
async fn shutdown_drains_the_call_in_flight(http: Http) {
    let mut server = testing::server(false).await;
    let client = client(&server.pki, http, false);
    let call = call_in_flight(&server, &client, server.url("/v1/greetings"), 1000).await;

    server.serving.stop();

    let response = within("the call in flight to be answered", call)
        .await
        .unwrap();
    assert_greeting(response, http).await;

    let served = within("serve() to return after draining", server.serving.join())
        .await
        .unwrap();
    assert!(served.is_ok(), "{served:?}");
    assert_eq!(
        (server.stats.completed(), server.stats.ended_early()),
        (1, 0)
    );

    // The listener is closed: a new TCP connection is refused by the kernel.
    // Polled, because the accept loop closes it on its own task.
    let addr = server.addr;
    let refused = async {
        loop {
            match TcpStream::connect(addr).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    };
    within("new connections to be refused after shutdown", refused).await;
}

#[tokio::test]
async fn shutdown_drains_http1_call_in_flight() {
    shutdown_drains_the_call_in_flight(Http::V1).await;
}

#[tokio::test]
async fn shutdown_drains_http2_call_in_flight() {
    shutdown_drains_the_call_in_flight(Http::V2).await;
}
