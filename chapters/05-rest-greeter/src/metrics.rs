//! Prometheus metrics for the REST port, in the registry the gRPC server's
//! metrics use (`grpc_server::metrics`), served by the same `/metrics`.
//!
//! A request is counted where it enters the server, before the guard, so
//! the guard's own refusals (413, 431, 408) are counted with the rest. Its
//! route label is the router's pattern (`/v1/greetings`), never the path the
//! client sent, so the label values stay few: the router tags its response
//! with the route it matched, the fallback's 404 is `unmatched`, and a
//! request the guard refused before routing is `refused`. A request whose
//! client went away before its response was ready counts as status 499
//! ("client closed request", nginx's convention); there is no HTTP status for
//! an answer nobody received.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request},
    middleware::Next,
    response::Response,
};
use grpc_server::metrics::BUCKETS;
use http::Method;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    method: &'static str,
    route: String,
    status: String,
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The REST server's metric families. Clones count into the same families.
#[derive(Clone, Debug)]
pub struct RestMetrics {
    requests: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
}

impl RestMetrics {
    pub fn register(registry: &mut Registry) -> RestMetrics {
        let metrics = RestMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(histogram),
            in_flight: Gauge::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            metrics.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's arrival to its response head",
            metrics.duration.clone(),
        );
        registry.register(
            "http_requests_in_flight",
            "HTTP requests arrived and not yet answered",
            metrics.in_flight.clone(),
        );
        metrics
    }

    /// Starts counting one request; [`Counting::finish`] or a drop ends it.
    pub fn start(&self, method: &Method) -> Counting {
        self.in_flight.inc();
        Counting {
            metrics: self.clone(),
            method: method_label(method),
            started: Instant::now(),
            done: false,
        }
    }
}

/// Methods outside the standard ones share one label value: a client that
/// invents methods must not invent label sets.
fn method_label(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// One request being counted: recorded once, as 499 if dropped unanswered.
pub struct Counting {
    metrics: RestMetrics,
    method: &'static str,
    started: Instant,
    done: bool,
}

impl Counting {
    /// Records `response`'s status under the route the router tagged it with.
    pub fn finish<B>(mut self, response: &http::Response<B>) {
        let route = match response.extensions().get::<MatchedPath>() {
            Some(path) => path.as_str().to_owned(),
            None if response.extensions().get::<Routed>().is_some() => "unmatched".to_owned(),
            None => "refused".to_owned(),
        };
        self.record(route, response.status().as_u16());
    }

    fn record(&mut self, route: String, status: u16) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let m = &self.metrics;
        m.in_flight.dec();
        let labels = Labels {
            method: self.method,
            route,
            status: status.to_string(),
        };
        m.duration
            .get_or_create(&labels)
            .observe(self.started.elapsed().as_secs_f64());
        m.requests.get_or_create(&labels).inc();
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.record("unanswered".to_owned(), 499);
    }
}

/// Marks a response that went through the router, matched or not.
#[derive(Clone, Copy, Debug)]
struct Routed;

/// Router middleware: tags the response with the route pattern the request
/// matched, which only the router knows, for [`Counting::finish`] to read.
pub async fn tag_route(request: Request, next: Next) -> Response {
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(request).await;
    response.extensions_mut().insert(Routed);
    if let Some(matched) = matched {
        response.extensions_mut().insert(matched);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_label() {
        assert_eq!(method_label(&Method::POST), "POST");
        assert_eq!(method_label(&Method::OPTIONS), "OPTIONS");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
        assert_eq!(method_label(&Method::CONNECT), "other");
    }
}
