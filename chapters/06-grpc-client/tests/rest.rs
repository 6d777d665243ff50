//! The REST client (`grpc_client::rest`, behind `examples/rest_client.rs`)
//! against the chapter 5 server in this process, over real TLS.

use std::time::Duration;

use grpc_client::{
    Failure,
    cli::parse_secs,
    rest::{self, RestError},
};
use grpc_server::{
    MAX_DELAY_MS, check_request,
    testing::{TempPki, TestServer, wait_until, within},
};
use proto::status::{self, Code};
use reqwest::{StatusCode, Version};
use rest_server::testing;

async fn greet(
    server: &TestServer,
    http1: bool,
    path: &str,
    name: &str,
    delay_ms: u32,
    timeout_secs: Option<&str>,
) -> Result<rest::Reply, RestError> {
    let client = rest::client(&server.pki.ca_cert(), http1).unwrap();
    let limit = timeout_secs.map(|t| parse_secs(t).unwrap());
    within(
        "an answer, if only a timeout",
        rest::greet(&client, &server.url(path), name, delay_ms, limit),
    )
    .await
}

#[tokio::test]
async fn greets_over_http2_by_default_and_http1_when_asked() {
    let server = testing::server(false).await;
    for (http1, version) in [(false, Version::HTTP_2), (true, Version::HTTP_11)] {
        let reply = greet(&server, http1, "/v1/greetings", "Ada", 0, None)
            .await
            .unwrap();
        assert_eq!(reply.message, "Hello, Ada!");
        assert_eq!(reply.version, version);
    }
}

#[tokio::test]
async fn error_statuses_come_back_as_problems_that_name_a_grpc_code() {
    let server = testing::server(false).await;
    let too_long = "x".repeat(20_000);
    for (path, name, http, code) in [
        ("/v1/greetings", "", 400, Code::InvalidArgument),
        ("/v1/greeting", "Ada", 404, Code::NotFound),
        (
            "/v1/greetings",
            too_long.as_str(),
            413,
            Code::ResourceExhausted,
        ),
    ] {
        let error = greet(&server, false, path, name, 0, None)
            .await
            .expect_err("an error status");
        let RestError::Status {
            status,
            problem: Some(problem),
            ..
        } = &error
        else {
            panic!("not problem details: {error:?}");
        };
        assert_eq!(*status, StatusCode::from_u16(http).unwrap());
        let row = status::from_problem_type(&problem.kind).expect("a type from the table");
        assert_eq!(row.code, code, "{problem:?}");
        assert_eq!(problem.title, row.title);
        // The report names the code the type leads back to.
        let report = error.to_string();
        assert!(
            report.starts_with(&format!("HTTP {status}, problem details:")),
            "{report}"
        );
        assert!(
            report.contains(&format!(
                "\n  as a gRPC code: {} ({}); retry: {}",
                row.name,
                row.number(),
                row.retry.verdict()
            )),
            "{report}"
        );
    }
}

#[tokio::test]
async fn a_broken_rule_is_printed_as_the_grpc_client_prints_a_bad_request() {
    let server = testing::server(false).await;
    for (name, delay_ms) in [("", 0), ("Ada", MAX_DELAY_MS + 1)] {
        let expected = check_request(name, delay_ms).unwrap_err();
        let error = greet(&server, false, "/v1/greetings", name, delay_ms, None)
            .await
            .expect_err("refused");
        // The report's last line is the violation, in the words and form the
        // gRPC client uses for the same refusal's BadRequest.
        let grpc = Failure::from_status(&expected.to_status(), None, Duration::ZERO);
        let report = error.to_string();
        assert_eq!(
            report.lines().last(),
            Some(format!("  {}", grpc.error_details[0]).as_str())
        );
        assert_eq!(
            grpc.error_details[0],
            format!(
                "bad field: {}: {} ({})",
                expected.field, expected.description, expected.reason
            )
        );
    }
}

#[tokio::test]
async fn a_request_over_its_timeout_reports_timed_out() {
    let server = testing::server(false).await;
    let error = greet(&server, false, "/v1/greetings", "Ada", 10_000, Some("0.3"))
        .await
        .expect_err("the timeout must end the request");
    assert!(matches!(error, RestError::TimedOut(_)), "{error:?}");
    assert_eq!(error.to_string(), "timed out after 0.3s");
    // The server learns of it only as a client that went away.
    wait_until(
        "the server counts the call as ended early",
        &server.stats,
        |s| s.ended_early() == 1,
    )
    .await;
}

#[tokio::test]
async fn nothing_listening_is_a_request_error() {
    // Bound but not listening: the port refuses connections and stays ours,
    // where a listener dropped to free it could see another test take it.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    let pki = TempPki::new();
    let client = rest::client(&pki.ca_cert(), false).unwrap();
    let url = format!("https://127.0.0.1:{port}/v1/greetings");
    let error = within("an answer", rest::greet(&client, &url, "Ada", 0, None))
        .await
        .expect_err("nothing listens there");
    let report = error.to_string();
    assert!(report.starts_with("request failed: "), "{report}");
    assert!(report.contains("Connection refused"), "{report}");
    assert_eq!(
        report.lines().last().unwrap(),
        format!(
            "  next: nothing is listening at https://127.0.0.1:{port}: start the server, \
             or check the URL, then try again"
        )
    );
}
