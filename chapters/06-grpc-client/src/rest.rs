//! The REST client: `cargo run --example rest_client -- URL --name Ada`.

use std::{
    fmt,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context;
use program::Exit;
use proto::status;
use reqwest::{StatusCode, Version};
use serde::Deserialize;
use tonic_types::{ErrorDetails, FieldViolation};

use crate::{
    EXIT_FAILED, EXIT_SETUP,
    channel::CONNECT_TIMEOUT,
    cli::{DEFAULT_REST_URL, RestArgs, Seconds},
    report::{self, refused_next_step},
};

// ANCHOR: client
/// One client for the whole process. It owns a connection pool: with HTTP/2
/// every request shares one connection, with HTTP/1.1 each request in flight
/// needs a connection of its own, and idle ones are kept for the next request.
pub fn client(ca: &Path, http1: bool) -> anyhow::Result<reqwest::Client> {
    let mut tls = certs::client_config(ca, None)?;
    // reqwest uses whichever protocol the server picks from this list.
    tls.alpn_protocols = if http1 {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    let builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        // The servers are on this machine; a proxy from the environment would
        // only get in the way.
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT);
    let builder = if http1 { builder.http1_only() } else { builder };
    builder.build().context("building the HTTP client")
}
// ANCHOR_END: client

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct GreetingReply {
    message: String,
}

/// A successful greeting.
#[derive(Debug, Clone)]
pub struct Reply {
    pub message: String,
    pub version: Version,
}

/// RFC 9457 problem details, as far as this client reads them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProblemDetails {
    #[serde(rename = "type", default = "about_blank")]
    pub kind: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub field: Option<String>,
    /// The fields that broke a rule: what a gRPC server sends as BadRequest.
    #[serde(default)]
    pub violations: Vec<Violation>,
}

/// One entry of a problem's `violations`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Violation {
    pub field: String,
    pub description: String,
    #[serde(default)]
    pub reason: String,
}

impl ProblemDetails {
    /// The violations as gRPC's BadRequest, so that one printer
    /// ([`report::detail_lines`]) reads both protocols.
    pub fn error_details(&self) -> ErrorDetails {
        let violations = self.violations.iter().map(|v| FieldViolation {
            reason: v.reason.clone(),
            ..FieldViolation::new(&v.field, &v.description)
        });
        let mut details = ErrorDetails::new();
        if !self.violations.is_empty() {
            details.set_bad_request(violations.collect::<Vec<_>>());
        }
        details
    }
}

fn about_blank() -> String {
    "about:blank".into()
}

/// Why a greeting did not arrive.
#[derive(Debug)]
pub enum RestError {
    /// The server answered with an error status; `problem` when the body was
    /// problem details.
    Status {
        status: StatusCode,
        problem: Option<ProblemDetails>,
        body: String,
    },
    /// No complete answer within the timeout.
    TimedOut(Seconds),
    /// No answer at all: connection refused, TLS failure, reset...
    Request(reqwest::Error),
}

// ANCHOR: greet
/// POSTs one greeting request. `timeout` covers the whole exchange, from
/// connecting (if the pool has no connection) to the last byte of the body.
pub async fn greet(
    client: &reqwest::Client,
    url: &str,
    name: &str,
    delay_ms: u32,
    timeout: Option<Seconds>,
) -> Result<Reply, RestError> {
    let mut request = client
        .post(url)
        .json(&serde_json::json!({ "name": name, "delay_ms": delay_ms }));
    if let Some(timeout) = timeout {
        request = request.timeout(timeout.duration);
    }
    let classify = |e: reqwest::Error| match timeout {
        Some(timeout) if e.is_timeout() => RestError::TimedOut(timeout),
        _ => RestError::Request(e),
    };
    let response = request.send().await.map_err(classify)?;
    let (status, version) = (response.status(), response.version());
    let body = response.text().await.map_err(classify)?;
    if !status.is_success() {
        let problem = serde_json::from_str(&body).ok();
        return Err(RestError::Status {
            status,
            problem,
            body,
        });
    }
    match serde_json::from_str::<GreetingReply>(&body) {
        Ok(reply) => Ok(Reply {
            message: reply.message,
            version,
        }),
        Err(e) => Err(RestError::Status {
            status,
            problem: None,
            body: format!("not a greeting ({e}): {body}"),
        }),
    }
}
// ANCHOR_END: greet

impl fmt::Display for RestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestError::TimedOut(timeout) => write!(f, "timed out after {timeout}"),
            RestError::Request(e) => {
                write!(f, "request failed: {e}")?;
                let mut source = std::error::Error::source(e);
                let mut refused = false;
                while let Some(inner) = source {
                    write!(f, ": {inner}")?;
                    refused |= inner.to_string().contains("Connection refused");
                    source = inner.source();
                }
                // As grpc-client says it: a refused connection is fixed by
                // starting something, not by retrying.
                if let Some(url) = e.url().filter(|_| refused) {
                    let origin = url.origin();
                    let ours = reqwest::Url::parse(DEFAULT_REST_URL)
                        .is_ok_and(|stack| stack.origin() == origin);
                    let at = origin.ascii_serialization();
                    let next = refused_next_step(&at, ours, "start the server, or check the URL");
                    write!(f, "\n  next: {next}")?;
                }
                Ok(())
            }
            RestError::Status {
                status,
                problem: None,
                body,
            } => write!(f, "HTTP {status}\n  body: {body}"),
            RestError::Status {
                status,
                problem: Some(problem),
                ..
            } => {
                writeln!(f, "HTTP {status}, problem details:")?;
                writeln!(f, "  type:   {}", problem.kind)?;
                writeln!(f, "  title:  {}", problem.title)?;
                if let Some(detail) = &problem.detail {
                    writeln!(f, "  detail: {detail}")?;
                }
                if let Some(field) = &problem.field {
                    writeln!(f, "  field:  {field}")?;
                }
                // The type names a row of the status table: the way back to a code.
                match status::from_problem_type(&problem.kind) {
                    Some(row) => write!(
                        f,
                        "  as a gRPC code: {} ({}); retry: {}",
                        row.name,
                        row.number(),
                        row.retry.verdict()
                    )?,
                    None => write!(
                        f,
                        "  as a gRPC code: none (not a type from the status table)"
                    )?,
                }
                for line in report::detail_lines(&problem.error_details()) {
                    write!(f, "\n  {line}")?;
                }
                Ok(())
            }
        }
    }
}

/// Runs the REST client example's command line. Exit statuses as for
/// `grpc-client`: [`EXIT_FAILED`] once a request failed (each one printed its
/// own report), [`EXIT_SETUP`] when the client could not be built.
pub async fn run(args: RestArgs) -> anyhow::Result<()> {
    let ca = args.ca.clone().unwrap_or_else(program::default_ca);
    let client = client(&ca, args.http1).map_err(|e| Exit::error(EXIT_SETUP, e))?;
    // Each request is a task; sequential unless --parallel, and all of them
    // share `client`, so its pool decides which connection each one uses.
    let mut requests = Vec::new();
    for n in 1..=args.repeat {
        let (client, task_args) = (client.clone(), args.clone());
        let request = tokio::spawn(async move {
            let RestArgs {
                url,
                name,
                delay_ms,
                timeout,
                ..
            } = task_args;
            let started = Instant::now();
            let outcome = greet(&client, &url, &name, delay_ms, timeout).await;
            (n, outcome, started.elapsed())
        });
        if args.parallel {
            requests.push(request);
            continue;
        }
        let (n, outcome, elapsed) = request.await.expect("request task");
        if !print(&args, n, outcome, elapsed) {
            return Err(Exit::silent(EXIT_FAILED).into());
        }
    }
    let mut ok = true;
    for request in requests {
        let (n, outcome, elapsed) = request.await.expect("request task");
        ok &= print(&args, n, outcome, elapsed);
    }
    if ok {
        Ok(())
    } else {
        Err(Exit::silent(EXIT_FAILED).into())
    }
}

/// Prints one request's outcome; true if it was a greeting.
fn print(args: &RestArgs, n: u32, outcome: Result<Reply, RestError>, elapsed: Duration) -> bool {
    match outcome {
        Ok(reply) if args.repeat == 1 => println!("{}", reply.message),
        Ok(reply) => println!(
            "request {n}: {} ({:?}, {:.2} ms)",
            reply.message,
            reply.version,
            elapsed.as_secs_f64() * 1e3
        ),
        Err(e) => {
            eprintln!("{e}");
            return false;
        }
    }
    true
}
