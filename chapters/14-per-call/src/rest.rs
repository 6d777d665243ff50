//! The same echo as REST: `POST /v1/greetings` with `{"name":...}` answers
//! `{"message":"Hello, <name>!"}`, chapter 5's contract and types, plaintext
//! like the gRPC side, on two ports of its own: one speaks HTTP/1.1 only, the
//! other HTTP/2 with prior knowledge (h2c). The handler runs inline or in a
//! task of its own exactly as the gRPC echo does ([`Echo::run`]).
//!
//! The accept loops are ours rather than `axum::serve`'s so that the server
//! can count what a REST client does to it: connections opened, open now, and
//! ended by an error.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    extract::{State, rejection::JsonRejection},
    http::StatusCode,
    routing::post,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    service::TowerToHyperService,
};
use proto::status::Code;
use rest_server::{
    api::{GreetingReply, GreetingRequest},
    problem::Problem,
};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::server::{Counts, Echo};

/// Which HTTP a REST port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Http {
    /// HTTP/1.1 only: one request at a time per connection.
    H1,
    /// HTTP/2 with prior knowledge, no TLS and no upgrade (h2c).
    H2,
}

/// What the REST side counts, per port.
#[derive(Debug, Default)]
pub struct Connections {
    pub accepted: AtomicU64,
    pub open: AtomicU64,
    /// Connections that ended with an error from hyper (reset, bad framing, ...).
    pub failed: AtomicU64,
    /// `accept` itself failed (out of file descriptors, ...).
    pub accept_errors: AtomicU64,
}

// ANCHOR: greet
/// `POST /v1/greetings`. A body that is not a greeting gets chapter 5's
/// problem details (400 for bad JSON, 415 for a wrong media type, 422 for a
/// wrong field), with axum's own message saying what was wrong.
async fn greet(
    State(echo): State<Echo>,
    body: Result<Json<GreetingRequest>, JsonRejection>,
) -> Result<Json<GreetingReply>, Problem> {
    let Json(request) =
        body.map_err(|e| Problem::new(Code::InvalidArgument, e.status(), e.body_text()))?;
    echo.counts.rest_requests.fetch_add(1, Ordering::Relaxed);
    let name = request.name;
    let message = echo
        .run(move || grpc_server::greeting(&name))
        .await
        .map_err(|status| {
            Problem::new(
                Code::Internal,
                StatusCode::INTERNAL_SERVER_ERROR,
                status.message(),
            )
        })?;
    Ok(Json(GreetingReply { message }))
}
// ANCHOR_END: greet

pub fn router(echo: Echo) -> Router {
    Router::new()
        .route("/v1/greetings", post(greet))
        .with_state(echo)
}

// ANCHOR: accept
/// Serves `router` on `listener` in `http`, a task per connection (as tonic
/// does for gRPC), counting connections as they come and go.
pub async fn serve(listener: TcpListener, http: Http, router: Router, counts: Arc<Counts>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Usually EMFILE: wait a little rather than spin on it.
                counts
                    .connections
                    .accept_errors
                    .fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // As on the gRPC side: no Nagle delay on small replies.
        let _ = stream.set_nodelay(true);
        counts.connections.accepted.fetch_add(1, Ordering::Relaxed);
        counts.connections.open.fetch_add(1, Ordering::Relaxed);
        let io = TokioIo::new(stream);
        let service = TowerToHyperService::new(router.clone());
        let counts = counts.clone();
        tokio::spawn(async move {
            let result = match http {
                // Requests on one connection are read, answered and written
                // in turn, inside this task.
                Http::H1 => {
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await
                }
                // hyper spawns a task per stream. No limit on concurrent
                // streams, the same as tonic's default on the gRPC port.
                Http::H2 => {
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .max_concurrent_streams(None)
                        .serve_connection(io, service)
                        .await
                }
            };
            if result.is_err() {
                counts.connections.failed.fetch_add(1, Ordering::Relaxed);
            }
            counts.connections.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}
// ANCHOR_END: accept

/// Where the REST side listens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RestAddrs {
    pub h1: SocketAddr,
    pub h2: SocketAddr,
}

/// The unspecified address: what the records of a run made before the
/// server had REST ports say, so that `--render` still reads them.
impl Default for RestAddrs {
    fn default() -> RestAddrs {
        let none = SocketAddr::from(([0, 0, 0, 0], 0));
        RestAddrs { h1: none, h2: none }
    }
}
