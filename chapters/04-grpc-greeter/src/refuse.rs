//! What the gRPC port refuses before any handler runs.
//!
//! tonic routes a request by its path alone: a `GET`, or a `POST` with
//! `content-type: text/plain`, to `/greeter.v1.Greeter/SayHello` runs the
//! handler like a real call. A `text/plain` POST is what any web page on any
//! site can make a browser send without asking first (no CORS preflight), so
//! a server that accepts it runs calls on a visitor's behalf. [`RefuseLayer`]
//! answers such requests itself, as grpc-go does, and refuses request
//! metadata larger than [`MAX_METADATA_BYTES`] with a status on that call
//! alone.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tonic::{
    Code, Status,
    body::Body,
    codegen::http::{self, HeaderValue, Method, StatusCode, header},
};
use tower::{Layer, Service};
use tracing::debug;

use crate::server::MAX_METADATA_BYTES;

/// The size of a request's header list as HTTP/2 counts it for
/// `SETTINGS_MAX_HEADER_LIST_SIZE` (RFC 9113, section 6.5.2): name plus value
/// plus 32 bytes for each field, the pseudo-headers included. The REST server
/// measures its requests the same way, over either HTTP version.
pub fn header_list_bytes(method: &Method, uri: &http::Uri, headers: &http::HeaderMap) -> usize {
    const PER_FIELD: usize = 32;
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    let path = uri.path_and_query().map_or(1, |p| p.as_str().len());
    let scheme = uri.scheme_str().map_or(0, str::len);
    let pseudo = ":method".len()
        + method.as_str().len()
        + ":scheme".len()
        + scheme
        + ":authority".len()
        + authority
        + ":path".len()
        + path
        + 4 * PER_FIELD;
    pseudo
        + headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + PER_FIELD)
            .sum::<usize>()
}

/// Why a request is not a gRPC call this server will run, in the terms
/// grpc-go answers with: the HTTP status a non-gRPC client understands, and
/// the gRPC status a gRPC client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub http: StatusCode,
    pub code: Code,
    pub message: String,
}

// ANCHOR: refusal
/// The refusal for this request head, if it gets one.
pub fn refusal(method: &Method, uri: &http::Uri, headers: &http::HeaderMap) -> Option<Refusal> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if !content_type.as_deref().is_some_and(is_grpc) {
        return Some(Refusal {
            http: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: Code::InvalidArgument,
            message: format!(
                "invalid gRPC request content-type {:?}; a gRPC call is application/grpc",
                content_type.unwrap_or_default()
            ),
        });
    }
    if method != Method::POST {
        return Some(Refusal {
            http: StatusCode::METHOD_NOT_ALLOWED,
            code: Code::Internal,
            message: format!("invalid gRPC request method {method}; a gRPC call is a POST"),
        });
    }
    let size = header_list_bytes(method, uri, headers);
    if size > MAX_METADATA_BYTES {
        // A gRPC client is talking: HTTP 200 and the status in the headers,
        // as for any other failed call (a Trailers-Only response).
        return Some(Refusal {
            http: StatusCode::OK,
            code: Code::ResourceExhausted,
            message: format!(
                "request metadata is {size} bytes; this server accepts at most {MAX_METADATA_BYTES}"
            ),
        });
    }
    None
}
// ANCHOR_END: refusal

/// `application/grpc`, `application/grpc+proto`, `application/grpc;...`:
/// gRPC's media type with or without a codec suffix, in any case.
fn is_grpc(content_type: &str) -> bool {
    let lower = content_type.trim().to_ascii_lowercase();
    match lower.strip_prefix("application/grpc") {
        Some(rest) => rest.is_empty() || rest.starts_with('+') || rest.starts_with(';'),
        None => false,
    }
}

impl Refusal {
    /// A Trailers-Only response: no body, the status in the only header block.
    pub fn into_response(self) -> http::Response<Body> {
        let mut response = Status::new(self.code, self.message).into_http::<Body>();
        *response.status_mut() = self.http;
        if self.http == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// Puts [`Refuse`] in front of a service.
#[derive(Clone, Copy, Debug, Default)]
pub struct RefuseLayer;

impl<S> Layer<S> for RefuseLayer {
    type Service = Refuse<S>;
    fn layer(&self, inner: S) -> Refuse<S> {
        Refuse { inner }
    }
}

/// Answers refused requests itself; passes the rest to `inner`.
#[derive(Clone, Debug)]
pub struct Refuse<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<http::Request<B>> for Refuse<S>
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
        match refusal(request.method(), request.uri(), request.headers()) {
            Some(refusal) => {
                debug!(
                    path = request.uri().path(),
                    ?refusal,
                    "refused before the handler"
                );
                // The request, body and all, is dropped here. Once the response
                // has gone out, h2 tells a client still sending to stop with
                // RST_STREAM(NO_ERROR), which RFC 9113 (section 8.1) provides for.
                Box::pin(std::future::ready(Ok(refusal.into_response())))
            }
            None => Box::pin(self.inner.call(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: Method, content_type: Option<&str>) -> (Method, http::Uri, http::HeaderMap) {
        let mut headers = http::HeaderMap::new();
        if let Some(ct) = content_type {
            headers.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        }
        let uri = "https://localhost/greeter.v1.Greeter/SayHello"
            .parse()
            .unwrap();
        (method, uri, headers)
    }

    fn refused(method: Method, content_type: Option<&str>) -> Option<Refusal> {
        let (m, u, h) = head(method, content_type);
        refusal(&m, &u, &h)
    }

    #[test]
    fn grpc_content_types_pass_and_others_get_415() {
        for ok in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; charset=x",
        ] {
            assert_eq!(refused(Method::POST, Some(ok)), None, "{ok}");
        }
        for bad in [
            None,
            Some("text/plain"),
            Some("application/json"),
            Some("application/grpcx"),
        ] {
            let r = refused(Method::POST, bad).expect("refused");
            assert_eq!(
                (r.http, r.code),
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, Code::InvalidArgument)
            );
        }
    }

    #[test]
    fn methods_other_than_post_get_405() {
        for method in [Method::GET, Method::PUT, Method::OPTIONS] {
            let r = refused(method.clone(), Some("application/grpc")).expect("refused");
            assert_eq!(
                (r.http, r.code),
                (StatusCode::METHOD_NOT_ALLOWED, Code::Internal)
            );
            assert!(r.message.contains(method.as_str()), "{r:?}");
        }
        let response = refused(Method::GET, Some("application/grpc"))
            .unwrap()
            .into_response();
        assert_eq!(response.headers()["allow"], "POST");
        assert_eq!(response.headers()["grpc-status"], "13");
    }

    #[test]
    fn metadata_over_the_limit_gets_resource_exhausted_with_http_200() {
        let (m, u, mut h) = head(Method::POST, Some("application/grpc"));
        let ok = header_list_bytes(&m, &u, &h);
        let room = MAX_METADATA_BYTES - ok - "x-pad".len() - 32;
        h.insert("x-pad", "a".repeat(room).parse().unwrap());
        assert_eq!(header_list_bytes(&m, &u, &h), MAX_METADATA_BYTES);
        assert_eq!(refusal(&m, &u, &h), None, "exactly at the limit is allowed");

        h.insert("x-pad", "a".repeat(room + 1).parse().unwrap());
        let r = refusal(&m, &u, &h).expect("one byte over is refused");
        assert_eq!((r.http, r.code), (StatusCode::OK, Code::ResourceExhausted));
        assert!(r.message.contains(&MAX_METADATA_BYTES.to_string()), "{r:?}");
    }
}
