//! Prometheus metrics for the gRPC port, named and labelled as operators
//! already query them (grpc-ecosystem's go-grpc-prometheus: `grpc_type`,
//! `grpc_service`, `grpc_method`, `grpc_code` with Go's code names): calls
//! started, calls handled by code, handling time, and calls in flight.
//!
//! A call's code is known only when its response ends: a failed call carries
//! `grpc-status` in its headers ("trailers-only"), a served one in the
//! trailers after the last message. So the layer watches the response body
//! for its trailers, and a body dropped before them (the client reset the
//! stream, or went away) counts as `Canceled`, as the call ended for it.
//!
//! The metrics are served on a port of their own, plain HTTP, by [`serve`]:
//! a scrape never competes with calls for the TLS port's limits, and the
//! port can stay on a private interface.

use std::{
    collections::HashMap,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use anyhow::Context as _;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};
use prost::Message as _;
use tonic::{Code, body::Body, codegen::http};
use tower::{Layer, Service};
use tracing::{info, warn};

/// The content type of Prometheus's text exposition format, version 0.0.4.
pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Handling-time buckets (seconds): the Prometheus clients' default buckets,
/// which go-grpc-prometheus uses too, so existing dashboards' `le` match.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    grpc_type: &'static str,
    grpc_service: String,
    grpc_method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    grpc_type: &'static str,
    grpc_service: String,
    grpc_method: String,
    grpc_code: &'static str,
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The gRPC server's metric families, registered in one registry. Cloning is
/// cheap: every clone counts into the same families.
#[derive(Clone, Debug)]
pub struct GrpcMetrics {
    started: Family<MethodLabels, Counter>,
    handled: Family<CodeLabels, Counter>,
    handling: Family<MethodLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<MethodLabels, Gauge>,
    /// `/package.Service/Method` for every method served; any other path is
    /// counted as service and method `unknown`, so the label sets stay few.
    /// Each path's value is its `grpc_type`, as go-grpc-prometheus names it.
    known: Arc<HashMap<String, &'static str>>,
}

impl GrpcMetrics {
    pub fn register(registry: &mut Registry, known: HashMap<String, &'static str>) -> GrpcMetrics {
        let metrics = GrpcMetrics {
            started: Family::default(),
            handled: Family::default(),
            handling: Family::new_with_constructor(histogram),
            in_flight: Family::default(),
            known: Arc::new(known),
        };
        // Counters get their `_total` suffix from the encoder.
        registry.register(
            "grpc_server_started",
            "RPCs started on the server",
            metrics.started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "RPCs completed on the server, by gRPC status code",
            metrics.handled.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Time from an RPC's request headers to the end of its response",
            metrics.handling.clone(),
        );
        registry.register(
            "grpc_server_in_flight",
            "RPCs started and not yet completed",
            metrics.in_flight.clone(),
        );
        metrics
    }

    /// The same families, labelling only these paths.
    pub fn with_known(self, known: HashMap<String, &'static str>) -> GrpcMetrics {
        GrpcMetrics {
            known: Arc::new(known),
            ..self
        }
    }

    fn labels(&self, path: &str) -> MethodLabels {
        let known = self.known.get(path).and_then(|kind| {
            let (service, method) = path.strip_prefix('/')?.split_once('/')?;
            Some((*kind, service, method))
        });
        let (kind, service, method) = known.unwrap_or(("unknown", "unknown", "unknown"));
        MethodLabels {
            grpc_type: kind,
            grpc_service: service.to_owned(),
            grpc_method: method.to_owned(),
        }
    }

    fn start(&self, path: &str) -> Finish {
        let labels = self.labels(path);
        self.started.get_or_create(&labels).inc();
        self.in_flight.get_or_create(&labels).inc();
        Finish {
            metrics: self.clone(),
            labels,
            started: Instant::now(),
            done: false,
        }
    }
}

/// The methods of `services` (full names such as `greeter.v1.Greeter`) as
/// request paths, each with its kind (`unary`, `client_stream`,
/// `server_stream`, `bidi_stream`), read from encoded descriptor sets.
pub fn known_methods(
    sets: &[&[u8]],
    services: &[&str],
) -> anyhow::Result<HashMap<String, &'static str>> {
    let mut paths = HashMap::new();
    for set in sets {
        let set = prost_types::FileDescriptorSet::decode(*set)
            .context("decoding a file descriptor set")?;
        for file in set.file {
            let package = file.package();
            for service in &file.service {
                let full = match package {
                    "" => service.name().to_owned(),
                    p => format!("{p}.{}", service.name()),
                };
                if services.contains(&full.as_str()) {
                    paths.extend(
                        service
                            .method
                            .iter()
                            .map(|m| (format!("/{full}/{}", m.name()), method_kind(m))),
                    );
                }
            }
        }
    }
    Ok(paths)
}

fn method_kind(method: &prost_types::MethodDescriptorProto) -> &'static str {
    match (method.client_streaming(), method.server_streaming()) {
        (false, false) => "unary",
        (true, false) => "client_stream",
        (false, true) => "server_stream",
        (true, true) => "bidi_stream",
    }
}

/// The code's name as go-grpc-prometheus writes it (Go's `codes.Code`
/// names), which is what dashboards filter on: `OK`, `Canceled`, ...
pub fn code_label(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// The call's `grpc-status`, if these headers or trailers carry one.
fn status_in(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from_i32(value.parse().ok()?))
}

/// One call's bookkeeping: recorded exactly once, with a code, or as
/// `Canceled` if it is dropped first.
struct Finish {
    metrics: GrpcMetrics,
    labels: MethodLabels,
    started: Instant,
    done: bool,
}

impl Finish {
    fn record(&mut self, code: Code) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let m = &self.metrics;
        m.in_flight.get_or_create(&self.labels).dec();
        m.handling
            .get_or_create(&self.labels)
            .observe(self.started.elapsed().as_secs_f64());
        let labels = CodeLabels {
            grpc_type: self.labels.grpc_type,
            grpc_service: self.labels.grpc_service.clone(),
            grpc_method: self.labels.grpc_method.clone(),
            grpc_code: code_label(code),
        };
        m.handled.get_or_create(&labels).inc();
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

// ANCHOR: watched
/// A response body that records its call when the trailers pass by.
struct Watched {
    inner: Body,
    finish: Finish,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        match &frame {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_in) {
                    this.finish.record(code);
                }
            }
            // A body that ends without a status broke the protocol.
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => this.finish.record(Code::Unknown),
            Poll::Pending => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
// ANCHOR_END: watched

/// Counts every call that reaches the server; `None` counts nothing and
/// costs one branch per call.
#[derive(Clone, Debug, Default)]
pub struct MetricsLayer(pub Option<GrpcMetrics>);

impl<S> Layer<S> for MetricsLayer {
    type Service = Metered<S>;
    fn layer(&self, inner: S) -> Metered<S> {
        Metered {
            inner,
            metrics: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Metered<S> {
    inner: S,
    metrics: Option<GrpcMetrics>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<http::Request<B>> for Metered<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(metrics) = &self.metrics else {
            return Box::pin(self.inner.call(request));
        };
        // Started now; dropped with the future, it counts as Canceled.
        let mut finish = metrics.start(request.uri().path());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if let Some(code) = status_in(response.headers()) {
                finish.record(code);
                return Ok(response);
            }
            Ok(response.map(|inner| Body::new(Watched { inner, finish })))
        })
    }
}

/// Serves `registry` as `GET /metrics` on `addr` (plain HTTP), until the
/// process ends. Returns the bound address (useful with port 0).
pub async fn serve(addr: SocketAddr, registry: Registry) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    let addr = listener.local_addr()?;
    let registry = Arc::new(registry);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move { scrape(&registry) }
        }),
    );
    info!(%addr, "metrics at http://{addr}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            warn!("the metrics server stopped: {e}");
        }
    });
    Ok(addr)
}

fn scrape(registry: &Registry) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut text = String::new();
    match prometheus_client::encoding::prometheus_text::encode(&mut text, registry) {
        Ok(()) => ([(http::header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => (
            http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the metrics failed: {e}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_come_from_the_descriptors_of_served_services() {
        let known = known_methods(&[proto::FILE_DESCRIPTOR_SET], &["greeter.v1.Greeter"]).unwrap();
        assert_eq!(known.get("/greeter.v1.Greeter/SayHello"), Some(&"unary"));
        // ingest.v1.Ingest is in the same bundle but not served here.
        assert!(known.keys().all(|p| p.starts_with("/greeter.v1.Greeter/")));
        let ingest = known_methods(&[proto::FILE_DESCRIPTOR_SET], &["ingest.v1.Ingest"]).unwrap();
        assert_eq!(
            ingest.get("/ingest.v1.Ingest/Ingest"),
            Some(&"client_stream")
        );
        assert!(known_methods(&[b"\xff\xff"], &[]).is_err());
    }

    #[test]
    fn a_made_up_path_is_counted_as_unknown() {
        let mut registry = Registry::default();
        let known = HashMap::from([("/greeter.v1.Greeter/SayHello".to_owned(), "unary")]);
        let m = GrpcMetrics::register(&mut registry, known);
        for path in [
            "/greeter.v1.Greeter/Nope",
            "/x/y",
            "nonsense",
            "/greeter.v1.Greeter",
        ] {
            assert_eq!(m.labels(path).grpc_method, "unknown", "{path}");
        }
        assert_eq!(
            m.labels("/greeter.v1.Greeter/SayHello").grpc_method,
            "SayHello"
        );
    }

    #[test]
    fn a_call_is_recorded_once_and_a_dropped_one_as_canceled() {
        let mut registry = Registry::default();
        let m = GrpcMetrics::register(&mut registry, HashMap::new());
        let mut f = m.start("/x/y");
        f.record(Code::NotFound);
        f.record(Code::Ok);
        drop(f);
        drop(m.start("/x/y"));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        for line in [
            "grpc_server_started_total{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\"} 2",
            "grpc_server_handled_total{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\",grpc_code=\"NotFound\"} 1",
            "grpc_server_handled_total{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\",grpc_code=\"Canceled\"} 1",
            "grpc_server_in_flight{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\"} 0",
            "grpc_server_handling_seconds_count{grpc_type=\"unknown\",grpc_service=\"unknown\",grpc_method=\"unknown\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
