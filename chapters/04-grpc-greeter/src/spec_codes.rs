//! The codes the gRPC specification gives two failures that tonic's server,
//! left to itself, reports under other codes.
//!
//! - **An expired deadline** is DEADLINE_EXCEEDED (4). tonic's server ends a
//!   call whose `grpc-timeout` has run out with its own timer, and reports
//!   that as CANCELLED (1) "Timeout expired". In tonic 0.14.9,
//!   `src/status.rs` line 670 turns the timer's error into that status:
//!   `return Some(Status::cancelled(timeout.to_string()));`.
//!   CANCELLED means "the caller gave up"; dashboards, alerts and retry
//!   policies count it apart from a deadline that ran out.
//! - **A message over the size limit** is RESOURCE_EXHAUSTED (8). tonic's
//!   codec refuses it with OUT_OF_RANGE (11): `src/codec/decode.rs` lines
//!   218-219, `Status::out_of_range(format!("Error, decoded message length
//!   too large: ..."))`, and the same in `src/codec/encode.rs` lines 214-215
//!   for a reply over the limit. gRPC lists OUT_OF_RANGE among the codes a
//!   library never produces, so a caller would read it as its own mistake
//!   about a range.
//!
//! [`SpecCodesLayer`] answers both with the specification's code. A client
//! that gives up (RST_STREAM, a closed connection) is still CANCELLED: that
//! call never reaches the code here, as its response is simply dropped.

use std::{
    future::Future,
    pin::{Pin, pin},
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Instant;
use tonic::{
    Code, Status,
    body::Body,
    codegen::http::{self, HeaderMap, HeaderValue},
};
use tower::{Layer, Service};
use tracing::debug;

use crate::lifetime::grpc_timeout_header;

/// Puts [`SpecCodes`] in front of a service. Add it with the server's other
/// layers (`Server::builder().layer(SpecCodesLayer)`), inside any layer that
/// counts or logs codes, so that those see the corrected code.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpecCodesLayer;

impl<S> Layer<S> for SpecCodesLayer {
    type Service = SpecCodes<S>;
    fn layer(&self, inner: S) -> SpecCodes<S> {
        SpecCodes { inner }
    }
}

/// Enforces each call's `grpc-timeout` with DEADLINE_EXCEEDED, and reports a
/// message over the size limit as RESOURCE_EXHAUSTED.
#[derive(Clone, Debug)]
pub struct SpecCodes<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<http::Request<B>> for SpecCodes<S>
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

    // ANCHOR: deadline
    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // tonic's own timer (`GrpcTimeout`, tonic 0.14.9's
        // src/transport/service/grpc_timeout.rs) still runs, one layer
        // further out. Ours is made first, here, while tonic's `call` is
        // calling into us; tonic makes its own after we return (lines 83-84:
        // `inner: self.inner.call(req)`, then `sleep:
        // timeout_duration.map(tokio::time::sleep)`). So our deadline is
        // never later than tonic's, and as tonic polls the call before its
        // timer (line 107), we answer first.
        let deadline = grpc_timeout_header(request.headers())
            .and_then(|timeout| Some((timeout, Instant::now().checked_add(timeout)?)))
            .map(|(timeout, at)| (timeout, at, tokio::time::sleep_until(at)));
        let path = request.uri().path().to_owned();
        let call = self.inner.call(request);
        Box::pin(async move {
            let Some((timeout, at, timer)) = deadline else {
                return call.await.map(size_limit_is_resource_exhausted);
            };
            let (mut call, mut timer) = (pin!(call), pin!(timer));
            let answered = std::future::poll_fn(|cx| {
                if let Poll::Ready(result) = call.as_mut().poll(cx) {
                    return Poll::Ready(Some(result));
                }
                // The clock as well as our timer: whenever tonic's timer has
                // fired, the time is past its deadline, and so past ours.
                if timer.as_mut().poll(cx).is_ready() || Instant::now() >= at {
                    return Poll::Ready(None);
                }
                Poll::Pending
            })
            .await;
            match answered {
                Some(result) => result.map(size_limit_is_resource_exhausted),
                // Returning drops `call`, and with it the handler, at the
                // `.await` it was waiting on (see `lifetime`).
                None => {
                    debug!(path, ?timeout, "deadline passed; DEADLINE_EXCEEDED");
                    Ok(deadline_exceeded(timeout).into_http())
                }
            }
        })
    }
    // ANCHOR_END: deadline
}

/// The status of a call whose `grpc-timeout` of `timeout` ran out.
pub fn deadline_exceeded(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "deadline exceeded: no reply within the caller's grpc-timeout of {timeout:?}"
    ))
}

// ANCHOR: size_limit
/// Whether `headers` (a response's, or its trailers) carry tonic's refusal of
/// a message over the size limit: OUT_OF_RANGE with the codec's message. An
/// OUT_OF_RANGE that a handler chose itself says something else, and is left.
fn is_size_limit(headers: &HeaderMap) -> bool {
    headers.get(Status::GRPC_STATUS).map(HeaderValue::as_bytes) == Some(b"11")
        && Status::from_header_map(headers).is_some_and(|status| {
            status.code() == Code::OutOfRange
                && status.message().contains("message length too large")
        })
}

/// Rewrites tonic's size-limit OUT_OF_RANGE as RESOURCE_EXHAUSTED, keeping
/// its message (which says the size and the limit).
fn fix_size_limit(headers: &mut HeaderMap) {
    if is_size_limit(headers) {
        let code = HeaderValue::from(Code::ResourceExhausted as i32);
        headers.insert(Status::GRPC_STATUS, code);
    }
}

/// A failed call's status is in its headers (a request over the limit); a
/// reply over the limit fails in the trailers, once the reply is encoded.
fn size_limit_is_resource_exhausted(mut response: http::Response<Body>) -> http::Response<Body> {
    if response.headers().contains_key(Status::GRPC_STATUS) {
        fix_size_limit(response.headers_mut());
        return response;
    }
    response.map(|inner| Body::new(FixedTrailers { inner }))
}
// ANCHOR_END: size_limit

/// A response body whose trailers pass through [`fix_size_limit`].
struct FixedTrailers {
    inner: Body,
}

impl HttpBody for FixedTrailers {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut frame = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &mut frame
            && let Some(trailers) = frame.trailers_mut()
        {
            fix_size_limit(trailers);
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

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
    };

    use super::*;

    /// A service whose every call answers with `answer` after `delay`, and
    /// notes whether its future was dropped before it answered.
    #[derive(Clone)]
    struct Slow {
        delay: Duration,
        answer: fn() -> http::Response<Body>,
        dropped_early: Arc<AtomicBool>,
    }

    struct NoteDrop(Arc<AtomicBool>, bool);

    impl Drop for NoteDrop {
        fn drop(&mut self) {
            if !self.1 {
                self.0.store(true, Ordering::Relaxed);
            }
        }
    }

    impl Service<http::Request<()>> for Slow {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let (delay, answer) = (self.delay, self.answer);
            let note = NoteDrop(self.dropped_early.clone(), false);
            Box::pin(async move {
                let mut note = note;
                tokio::time::sleep(delay).await;
                note.1 = true;
                Ok(answer())
            })
        }
    }

    fn ok() -> http::Response<Body> {
        http::Response::new(Body::empty())
    }

    fn slow(
        delay_ms: u64,
        answer: fn() -> http::Response<Body>,
    ) -> (SpecCodes<Slow>, Arc<AtomicBool>) {
        let dropped_early = Arc::new(AtomicBool::new(false));
        let service = SpecCodesLayer.layer(Slow {
            delay: Duration::from_millis(delay_ms),
            answer,
            dropped_early: dropped_early.clone(),
        });
        (service, dropped_early)
    }

    fn with_timeout(timeout: &str) -> http::Request<()> {
        let mut request = http::Request::new(());
        request
            .headers_mut()
            .insert("grpc-timeout", timeout.parse().unwrap());
        request
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_deadline_is_answered_and_the_handler_dropped() {
        let (mut service, dropped_early) = slow(10_000, ok);
        let response = service.call(with_timeout("100m")).await.unwrap();
        let status = Status::from_header_map(response.headers()).expect("a status");
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
        assert!(dropped_early.load(Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_answered_in_time_or_without_a_deadline_is_passed_on() {
        for request in [
            with_timeout("10S"),
            with_timeout("garbage"),
            http::Request::new(()),
        ] {
            let (mut service, dropped_early) = slow(100, ok);
            let response = service.call(request).await.unwrap();
            assert!(!response.headers().contains_key(Status::GRPC_STATUS));
            assert!(!dropped_early.load(Ordering::Relaxed));
        }
    }

    /// A served call whose reply was over the limit: headers, then trailers
    /// with tonic's OUT_OF_RANGE, as tonic's encoder ends such a reply.
    fn reply_over_the_limit() -> http::Response<Body> {
        struct Trailers(Option<HeaderMap>);
        impl HttpBody for Trailers {
            type Data = Bytes;
            type Error = Status;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
                Poll::Ready(self.0.take().map(|t| Ok(Frame::trailers(t))))
            }
        }
        let status = Status::out_of_range(
            "Error, encoded message length too large: found 70000 bytes, the limit is: 65536 bytes",
        );
        http::Response::new(Body::new(Trailers(Some(status_headers(status)))))
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_over_the_limit_ends_with_resource_exhausted_in_its_trailers() {
        let (mut service, _) = slow(0, reply_over_the_limit);
        let response = service.call(http::Request::new(())).await.unwrap();
        let mut body = response.into_body();
        let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .expect("a frame")
            .expect("not an error");
        let status = Status::from_header_map(frame.trailers_ref().expect("trailers")).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }

    fn status_headers(status: Status) -> HeaderMap {
        let mut headers = HeaderMap::new();
        status.add_header(&mut headers).unwrap();
        headers
    }

    #[test]
    fn tonics_size_limit_becomes_resource_exhausted_and_keeps_its_message() {
        for message in [
            "Error, decoded message length too large: found 100004 bytes, the limit is: 65536 bytes",
            "Error, encoded message length too large: found 70000 bytes, the limit is: 65536 bytes",
        ] {
            let mut headers = status_headers(Status::out_of_range(message));
            fix_size_limit(&mut headers);
            let status = Status::from_header_map(&headers).unwrap();
            assert_eq!(status.code(), Code::ResourceExhausted);
            assert_eq!(status.message(), message);
        }
    }

    #[test]
    fn other_codes_and_an_applications_own_out_of_range_are_left_alone() {
        for status in [
            Status::out_of_range("offset 12 is past the end of the guest book"),
            Status::invalid_argument("message length too large"),
            Status::ok(""),
        ] {
            let before = status_headers(status);
            let mut after = before.clone();
            fix_size_limit(&mut after);
            assert_eq!(after, before);
        }
    }

    #[test]
    fn the_deadline_status_is_deadline_exceeded_and_names_the_timeout() {
        let status = deadline_exceeded(Duration::from_millis(100));
        assert_eq!(status.code(), Code::DeadlineExceeded);
        assert!(status.message().contains("100ms"), "{status:?}");
    }
}
