//! The same pool of workers behind REST: `POST /v1/greetings`, over HTTP/1.1
//! or HTTP/2 (plaintext, like the gRPC side, so that TLS's cost is not part
//! of the comparison).
//!
//! A refusal is `429 Too Many Requests` with `Retry-After` and a problem
//! (RFC 9457) whose type is chapter 7's for RESOURCE_EXHAUSTED; a call dropped
//! unworked is `504` with DEADLINE_EXCEEDED's type. HTTP has no standard way
//! to say when the caller gives up, so this server reads the time left from
//! a header of our own, [`TIMEOUT_HEADER`].

use std::{sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{State, rejection::JsonRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use proto::status::Code;
use rest_server::{
    api::{GreetingReply, GreetingRequest},
    problem::Problem,
};
use tokio::{net::TcpListener, time::Instant};

use crate::server::{Done, MAX_CONCURRENT_STREAMS, Pool, Refused};

/// Milliseconds the caller will still wait for this request. Ours: HTTP
/// defines no such header (gRPC has `grpc-timeout`).
pub const TIMEOUT_HEADER: &str = "request-timeout-ms";

pub fn router(pool: Arc<Pool>) -> Router {
    Router::new()
        .route("/v1/greetings", post(greet))
        .with_state(pool)
}

// ANCHOR: handler
async fn greet(
    State(pool): State<Arc<Pool>>,
    headers: HeaderMap,
    body: Result<Json<GreetingRequest>, JsonRejection>,
) -> Result<Json<GreetingReply>, Response> {
    let arrived = Instant::now();
    let Json(request) = body.map_err(|rejection| {
        Problem::invalid_argument(rejection.status(), None, rejection.body_text()).into_response()
    })?;
    // The caller's time left, if it said; anything but a count of
    // milliseconds is the caller's mistake, and refused as one.
    let timeout = match headers
        .get(TIMEOUT_HEADER)
        .map(|v| v.to_str().map(str::parse::<u64>))
    {
        None => None,
        Some(Ok(Ok(ms))) => Some(Duration::from_millis(ms)),
        Some(_) => {
            return Err(Problem::invalid_argument(
                StatusCode::BAD_REQUEST,
                Some(TIMEOUT_HEADER.into()),
                format!("the {TIMEOUT_HEADER} header must be a whole number of milliseconds"),
            )
            .into_response());
        }
    };
    let deadline = timeout.map(|t| arrived + t);
    let done = pool.submit(arrived, deadline).map_err(refusal)?;
    match done.await {
        Ok(Done::Served) => Ok(Json(GreetingReply {
            message: grpc_server::greeting(&request.name),
        })),
        Ok(Done::Dropped) => Err(Problem::new(
            Code::DeadlineExceeded,
            StatusCode::GATEWAY_TIMEOUT,
            "dropped unworked: the deadline would pass before the work ended",
        )
        .into_response()),
        Err(_) => Err(Problem::new(
            Code::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is stopping",
        )
        .into_response()),
    }
}

/// `429` with `Retry-After`. The header counts whole seconds (RFC 9110,
/// section 10.2.3), so the pool's estimate is rounded up: a caller told 0
/// would come straight back.
pub fn refusal(refused: Refused) -> Response {
    let seconds = refused.retry_after.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = Problem::new(
        Code::ResourceExhausted,
        StatusCode::TOO_MANY_REQUESTS,
        "overloaded: every worker busy and the queue full",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}
// ANCHOR_END: handler

/// Serves `router` on `listener`, HTTP/1.1 and HTTP/2 (prior knowledge:
/// hyper-util's `auto` builder reads the first bytes to tell them apart),
/// until the task is aborted.
pub async fn serve(listener: TcpListener, router: Router) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The same explicit stream limit as the gRPC side.
    builder
        .http2()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let builder = Arc::new(builder);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: try again rather than stop serving.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // As on the gRPC side: no Nagle delay on small replies.
        let _ = stream.set_nodelay(true);
        let (builder, service) = (builder.clone(), TowerToHyperService::new(router.clone()));
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
