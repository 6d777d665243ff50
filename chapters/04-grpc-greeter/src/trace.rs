//! Traces across hops: one span per call on every server it passes through,
//! tied together by W3C Trace Context's `traceparent` header, so that the
//! log of each hop shows the same trace and the deadline it was left with.
//!
//! [`TraceLayer`] opens a `grpc.call` span for every call a server receives:
//! its trace id comes from the caller's `traceparent` (or is new), its
//! `remaining_ms` from `grpc-timeout`. A server that calls another hop passes
//! the trace on with [`TraceContext::inject`]. When the call ends, the span
//! logs one `call ended` line with how (`outcome`: the gRPC code, such as
//! `DeadlineExceeded` when the server's timer ended the call, or
//! `deadline_passed` or `cancelled` when the response was dropped before the
//! handler answered), and
//! the log subscriber prints it with the span's fields: stdout is the
//! exporter. The spans are ordinary `tracing` spans, so any subscriber (an
//! OpenTelemetry bridge included) sees them too.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Mutex,
    task::{Context, Poll},
    time::{Duration, Instant, SystemTime},
};

use rand::{Rng, SeedableRng, rngs::StdRng};
use tonic::{codegen::http, metadata::MetadataMap};
use tower::{Layer, Service};
use tracing::{Instrument, Span, info, info_span};

use crate::{lifetime::grpc_timeout_header, metrics::code_label};

/// The header W3C Trace Context defines (`00-<trace>-<parent>-<flags>`).
pub const TRACEPARENT: &str = "traceparent";

// ANCHOR: context
/// Where a call is in its trace: the trace, and this hop's span in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: u128,
    pub span_id: u64,
    /// The caller's span, when the caller sent a `traceparent`.
    pub parent_id: Option<u64>,
}

impl TraceContext {
    /// The context of a call that arrived with `headers`: the caller's trace,
    /// or a new one when it sent none (or one that does not parse).
    pub fn of_call(headers: &http::HeaderMap) -> TraceContext {
        let parent = headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_traceparent);
        TraceContext {
            trace_id: parent.map_or_else(
                || with_ids(|ids| ids.random_range(1..=u128::MAX)),
                |(trace, _)| trace,
            ),
            span_id: new_span_id(),
            parent_id: parent.map(|(_, span)| span),
        }
    }

    /// Puts this hop's `traceparent` on an outgoing call, making this span
    /// the next hop's parent.
    pub fn inject(&self, metadata: &mut MetadataMap) {
        let value = format!("00-{:032x}-{:016x}-01", self.trace_id, self.span_id);
        metadata.insert(TRACEPARENT, value.parse().expect("hex digits are ASCII"));
    }
}
// ANCHOR_END: context

/// `00-<32 hex>-<16 hex>-<2 hex>`: the trace id and the parent span id.
/// All-zero ids are invalid by the specification, as are other versions'
/// layouts we do not know.
pub fn parse_traceparent(value: &str) -> Option<(u128, u64)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if version != "00"
        || parts.next().is_some()
        || !hex(trace, 32)
        || !hex(parent, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace = u128::from_str_radix(trace, 16).ok()?;
    let parent = u64::from_str_radix(parent, 16).ok()?;
    (trace != 0 && parent != 0).then_some((trace, parent))
}

/// Span and trace ids: unique, not secret, so a generator seeded from the
/// clock and the process id is enough.
fn with_ids<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
    static IDS: Mutex<Option<StdRng>> = Mutex::new(None);
    let mut guard = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let rng = guard.get_or_insert_with(|| {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        StdRng::seed_from_u64(now ^ (u64::from(std::process::id()) << 32))
    });
    f(rng)
}

fn new_span_id() -> u64 {
    // Zero is invalid as a span id.
    with_ids(|ids| ids.random_range(1..=u64::MAX))
}

struct Hex<T>(T);

impl fmt::Display for Hex<u128> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Display for Hex<u64> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// With `true`, opens a `grpc.call` span for every call and puts its
/// [`TraceContext`] in the request's extensions, for a handler that calls
/// further hops; with `false`, passes calls through untouched.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceLayer(pub bool);

impl<S> Layer<S> for TraceLayer {
    type Service = Traced<S>;
    fn layer(&self, inner: S) -> Traced<S> {
        Traced { inner, on: self.0 }
    }
}

#[derive(Clone, Debug)]
pub struct Traced<S> {
    inner: S,
    on: bool,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> Service<http::Request<B>> for Traced<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if !self.on {
            return Box::pin(self.inner.call(request));
        }
        let context = TraceContext::of_call(request.headers());
        let remaining = grpc_timeout_header(request.headers());
        let span = info_span!(
            "grpc.call",
            trace_id = %Hex(context.trace_id),
            span_id = %Hex(context.span_id),
            parent_id = context.parent_id.map(|p| Hex(p).to_string()),
            rpc = request.uri().path(),
            remaining_ms = remaining.map(|d| d.as_millis() as u64),
        );
        request.extensions_mut().insert(context);
        let started = Instant::now();
        let ended = Ended {
            span: span.clone(),
            started,
            deadline: remaining.map(|r| started + r),
            outcome: None,
        };
        let response = self.inner.call(request);
        Box::pin(
            async move {
                let mut ended = ended;
                let response = response.await?;
                // A failed call's code is in its headers; a served unary call's
                // comes in trailers after this point, and is OK unless the
                // handler failed, which would have put it in the headers.
                ended.outcome = Some(
                    response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .map_or("OK", |c| code_label(tonic::Code::from_i32(c))),
                );
                Ok(response)
            }
            .instrument(span),
        )
    }
}

/// Logs the end of a call inside its span. A deadline the server enforces
/// ([`crate::spec_codes`], inside this layer) is an answer, with its code. A
/// call dropped before any answer was left by its caller: `deadline_passed`
/// when that was at its deadline (the caller's own timer reset the stream a
/// moment before ours fired, or a server without `SpecCodesLayer` let tonic's
/// timer drop it), `cancelled` before.
struct Ended {
    span: Span,
    started: Instant,
    deadline: Option<Instant>,
    outcome: Option<&'static str>,
}

impl Drop for Ended {
    fn drop(&mut self) {
        let now = Instant::now();
        let outcome = self.outcome.unwrap_or(match self.deadline {
            // The caller's own timer started before this layer's clock, so
            // its reset can arrive a little before `deadline` as this layer
            // counts it.
            Some(deadline) if now + Duration::from_millis(1) >= deadline => "deadline_passed",
            _ => "cancelled",
        });
        let elapsed_ms = format!("{:.1}", (now - self.started).as_secs_f64() * 1e3);
        self.span
            .in_scope(|| info!(outcome, elapsed_ms, "call ended"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_by_the_specifications_rules() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse_traceparent(good),
            Some((0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7))
        );
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_call_continues_its_callers_trace_and_passes_on_its_own_span() {
        let mut headers = http::HeaderMap::new();
        let first = TraceContext::of_call(&headers);
        assert_eq!(first.parent_id, None);
        let mut metadata = MetadataMap::new();
        first.inject(&mut metadata);
        headers = metadata.into_headers();
        let second = TraceContext::of_call(&headers);
        assert_eq!(second.trace_id, first.trace_id);
        assert_eq!(second.parent_id, Some(first.span_id));
        assert_ne!(second.span_id, first.span_id);
        // A garbled header starts a new trace instead of failing the call.
        headers.insert(TRACEPARENT, "garbage".parse().unwrap());
        let fresh = TraceContext::of_call(&headers);
        assert_eq!(fresh.parent_id, None);
        assert_ne!(fresh.trace_id, first.trace_id);
    }
}
