//! What every request must satisfy around the handlers, and how the server
//! says no so that the client actually hears it.
//!
//! Before the router sees a request, [`serve`] refuses
//!
//! - headers larger than [`MAX_HEADER_BYTES`] (431), and
//! - a body whose `Content-Length` is over the API's limit (413): refused on
//!   the header's word, before a byte of it is read. Reading nothing also
//!   means hyper never sends HTTP/1.1's `100 Continue`, which would invite
//!   a client that asked first (`Expect: 100-continue`) to send it all.
//!
//! While the handler reads the body, [`Tracked`] gives it [`BODY_TIMEOUT`] to
//! arrive (408 after that). After the response has gone out, whatever the
//! handler left unread is drained for a while ([`LINGER_BYTES`],
//! [`LINGER_TIME`]), as nginx's lingering close does. A server that closed
//! the connection (HTTP/1.1) or reset the stream (HTTP/2) while the client
//! was still sending would make the client's TCP stack throw away the answer
//! it had not read yet: a 413 that arrives as "broken pipe" or "stream
//! error" is no answer at all.

use std::{
    convert::Infallible,
    error::Error as StdError,
    fmt,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    http::{HeaderValue, Request, Response, StatusCode, Version, header},
    response::IntoResponse,
};
use grpc_server::refuse::header_list_bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use proto::status::Code;
use tokio::{sync::oneshot, time::Sleep};
use tower::Service;
use tracing::debug;

use crate::{api::MAX_BODY_BYTES, problem::Problem};

// ANCHOR: limits
/// The largest request header list, counted as HTTP/2 counts it (name +
/// value + 32 bytes a field), over either protocol; larger gets a 431 with
/// problem details. The same bound as the gRPC port's metadata limit: real
/// requests carry a few hundred bytes, big cookies a few KiB.
pub const MAX_HEADER_BYTES: usize = grpc_server::server::MAX_METADATA_BYTES;

/// A client gets this long, once its request headers are in, to send the
/// whole body. A greeting is well under a kilobyte; a body that trickles in
/// for longer is stalled or hostile, and would hold its handler forever.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// After a refusal, what the server reads (and discards) of a body it did not
/// want, so that the client can finish sending and read the answer: curl
/// 7.88 over HTTP/2 fails a transfer whose stream ends while it is still
/// uploading, whatever the answer was. A few MiB covers the careless cases
/// (a file posted to the wrong URL); past it the server stops reading.
pub const LINGER_BYTES: u64 = 8 * 1024 * 1024;

/// ... and for at most this long after the answer was sent: a client that
/// neither sends nor closes is not waited for.
pub const LINGER_TIME: Duration = Duration::from_secs(5);
// ANCHOR_END: limits

// ANCHOR: serve
/// Serves one request through the router, with the checks above.
pub async fn serve(
    mut app: Router,
    request: Request<Incoming>,
) -> Result<Response<Lingering>, Infallible> {
    let version = request.version();
    let size = header_list_bytes(request.method(), request.uri(), request.headers());
    if size > MAX_HEADER_BYTES {
        let why = format!(
            "request headers are {size} bytes; this server accepts at most {MAX_HEADER_BYTES}"
        );
        return Ok(too_large(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            why,
            request.into_body(),
        ));
    }
    if let Some(length) = declared_length(&request)
        && length > MAX_BODY_BYTES as u64
    {
        let why = format!(
            "request body is {length} bytes (Content-Length); the limit is {MAX_BODY_BYTES}"
        );
        return Ok(too_large(
            StatusCode::PAYLOAD_TOO_LARGE,
            why,
            request.into_body(),
        ));
    }

    let (parts, body) = request.into_parts();
    let (tracked, leftover) = Tracked::new(body, BODY_TIMEOUT);
    let response = app.call(Request::from_parts(parts, tracked)).await?;
    let (mut head, body) = response.into_parts();
    if head.status == StatusCode::REQUEST_TIMEOUT && version < Version::HTTP_2 {
        // The rest of a stalled body may still come, or never: this
        // connection cannot carry another request, so say so.
        head.headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(Response::from_parts(
        head,
        Lingering::new(body, Some(leftover)),
    ))
}
// ANCHOR_END: serve

fn declared_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A request over one of the limits, refused with `status` (gRPC's
/// RESOURCE_EXHAUSTED in the problem's code) before the router sees it.
fn too_large(status: StatusCode, why: String, body: Incoming) -> Response<Lingering> {
    refuse(Problem::new(Code::ResourceExhausted, status, why), body)
}

/// The problem as the response, with the unread body to drain once it is sent.
fn refuse(problem: Problem, body: Incoming) -> Response<Lingering> {
    debug!(status = problem.status, detail = %problem.detail, "refused before the handler");
    let (head, response_body) = problem.into_response().into_parts();
    let (sender, leftover) = oneshot::channel();
    let _ = sender.send(body);
    Response::from_parts(head, Lingering::new(response_body, Some(leftover)))
}

/// The error a [`Tracked`] body gives once [`BODY_TIMEOUT`] has passed.
#[derive(Debug)]
pub struct BodyTimeout(pub Duration);

impl fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the request body did not arrive within {:?}", self.0)
    }
}

impl StdError for BodyTimeout {}

/// Whether `error`, or anything in its chain of sources, is a [`BodyTimeout`].
pub fn is_body_timeout(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<BodyTimeout>() {
            return true;
        }
        next = e.source();
    }
    false
}

// ANCHOR: tracked
/// The request body as the handler sees it. It fails with [`BodyTimeout`]
/// if the body is not complete in time, and when it is dropped unfinished
/// (the handler refused early, or never read it) it hands the rest of the
/// body back through `leftover`, to be drained after the response.
pub struct Tracked {
    body: Option<Incoming>,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
    finished: bool,
    leftover: Option<oneshot::Sender<Incoming>>,
}
// ANCHOR_END: tracked

impl Tracked {
    fn new(body: Incoming, limit: Duration) -> (Self, oneshot::Receiver<Incoming>) {
        let (sender, leftover) = oneshot::channel();
        let tracked = Tracked {
            finished: body.is_end_stream(),
            body: Some(body),
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
            leftover: Some(sender),
        };
        (tracked, leftover)
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(None) => {
                this.finished = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => Poll::Ready(Some(frame.map_err(Into::into))),
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                // Not worth draining: the client has stopped sending.
                this.body = None;
                Poll::Ready(Some(Err(Box::new(BodyTimeout(this.limit)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(Body::size_hint).unwrap_or_default()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let (false, Some(body), Some(leftover)) =
            (self.finished, self.body.take(), self.leftover.take())
        {
            let _ = leftover.send(body);
        }
    }
}

// ANCHOR: lingering
/// The response body. When hyper drops it, the response has been handed
/// over completely (or the connection is gone), and the request body the
/// handler left unread is drained on a task of its own.
pub struct Lingering {
    body: axum::body::Body,
    leftover: Option<oneshot::Receiver<Incoming>>,
}

impl Drop for Lingering {
    fn drop(&mut self) {
        if let Some(leftover) = self.leftover.take() {
            tokio::spawn(async move {
                if let Ok(body) = leftover.await {
                    drain(body).await;
                }
            });
        }
    }
}

/// Reads and discards `body` until it ends, or LINGER_BYTES or LINGER_TIME
/// run out. If it ended, an HTTP/1.1 connection can carry the next request
/// and an HTTP/2 stream closes cleanly. If not, dropping it closes the
/// connection (HTTP/1.1) or resets the stream with NO_ERROR (HTTP/2, whose
/// response is complete by now: RFC 9113, section 8.1).
async fn drain(mut body: Incoming) {
    let mut drained = 0u64;
    let outcome = tokio::time::timeout(LINGER_TIME, async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return "the client went away";
            };
            drained += frame.data_ref().map_or(0, |d| d.len() as u64);
            if drained > LINGER_BYTES {
                return "more than LINGER_BYTES; stopped reading";
            }
        }
        "drained to its end"
    })
    .await
    .unwrap_or("LINGER_TIME passed; stopped reading");
    debug!(drained, outcome, "unread request body after the response");
}
// ANCHOR_END: lingering

impl Lingering {
    fn new(body: axum::body::Body, leftover: Option<oneshot::Receiver<Incoming>>) -> Self {
        Lingering { body, leftover }
    }
}

impl Body for Lingering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
