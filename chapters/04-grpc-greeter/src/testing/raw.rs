//! Clients that behave as careless or hostile clients do: raw TLS sockets,
//! and a raw HTTP/2 client (the `h2` crate, already under hyper) that sends
//! exactly the requests and frames a test asks for and reads only what the
//! test reads. A tonic or reqwest client would refuse to misbehave, or would
//! hide what the server answered.

use std::{io, net::SocketAddr, path::Path, sync::Arc};

use h2::{
    RecvStream, SendStream,
    client::{ResponseFuture, SendRequest},
};
use tokio::{net::TcpStream, task::JoinHandle};
use tokio_rustls::{
    TlsConnector,
    rustls::{ClientConfig, pki_types::ServerName},
};
use tonic::codegen::{Bytes, http};

use super::within;

pub use h2::{self, client::Builder};
pub use tokio_rustls::client::TlsStream;

/// A TLS connection to `addr` that trusts only the CA in `ca` and offers
/// exactly the ALPN protocols in `alpn` (none: an empty slice).
pub async fn tls(addr: SocketAddr, ca: &Path, alpn: &[&[u8]]) -> io::Result<TlsStream<TcpStream>> {
    let mut config: ClientConfig = certs::client_config(ca, None).expect("client TLS config");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = TlsConnector::from(Arc::new(config));
    let tcp = within("TCP connect", TcpStream::connect(addr)).await?;
    let name = ServerName::try_from("localhost").expect("a valid server name");
    within("TLS handshake", connector.connect(name, tcp)).await
}

/// One raw HTTP/2 connection: `send` starts requests on it, and `connection`
/// is the task that drives it. That task ends with the connection, with the
/// error (a GOAWAY, say) that ended it.
pub struct RawH2 {
    pub send: SendRequest<Bytes>,
    pub connection: JoinHandle<Result<(), h2::Error>>,
}

/// Opens a TLS connection offering only `h2` and completes the HTTP/2
/// handshake with `builder`'s settings (its initial windows, say).
pub async fn h2_connect(addr: SocketAddr, ca: &Path, builder: &Builder) -> RawH2 {
    let tls = tls(addr, ca, &[b"h2"]).await.expect("TLS to the server");
    let (send, connection) = within("HTTP/2 handshake", builder.handshake::<_, Bytes>(tls))
        .await
        .expect("HTTP/2 handshake");
    RawH2 {
        send,
        connection: tokio::spawn(connection),
    }
}

/// The head of a request to `path` on the server (`/greeter.v1.Greeter/SayHello`).
/// A gRPC call would add `content-type: application/grpc` and `te: trailers`.
pub fn request(method: http::Method, path: &str) -> http::request::Builder {
    http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
}

/// A well-formed gRPC request head for `path`.
pub fn grpc_request(path: &str) -> http::Request<()> {
    request(http::Method::POST, path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a valid request head")
}

/// `message` as one gRPC message: not compressed, 4-byte length, protobuf.
pub fn grpc_frame(message: &impl prost::Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.push(0);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame.into()
}

/// Sends `head` with `body` (the whole body; the stream ends with it) and
/// returns the response future.
pub async fn send(raw: &mut RawH2, head: http::Request<()>, body: Option<Bytes>) -> ResponseFuture {
    let send = within("room for a new stream", raw.send.clone().ready())
        .await
        .expect("the connection accepts a new stream");
    raw.send = send;
    let (response, mut stream) = raw
        .send
        .send_request(head, body.is_none())
        .expect("the request is sent");
    if let Some(body) = body {
        stream.send_data(body, true).expect("the body is sent");
    }
    response
}

/// Sends `head` and returns the response future with the open request
/// stream, for a body the test sends itself ([`upload`], or nothing more).
pub async fn start(
    raw: &mut RawH2,
    head: http::Request<()>,
) -> (ResponseFuture, SendStream<Bytes>) {
    let send = within("room for a new stream", raw.send.clone().ready())
        .await
        .expect("the connection accepts a new stream");
    raw.send = send;
    raw.send
        .send_request(head, false)
        .expect("the request is sent")
}

/// Sends `len` bytes of body on `stream` as fast as flow control lets it,
/// then ends the stream: what a client uploading a file does. Fails with the
/// server's reason if the server resets the stream first.
pub async fn upload(stream: &mut SendStream<Bytes>, len: usize) -> Result<(), h2::Error> {
    let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
    let mut left = len;
    if left == 0 {
        return stream.send_data(Bytes::new(), true);
    }
    while left > 0 {
        stream.reserve_capacity(left.min(chunk.len()));
        match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(granted)) => {
                let n = granted.min(left);
                stream.send_data(chunk.slice(..n), n == left)?;
                left -= n;
            }
            Some(Err(e)) => return Err(e),
            // The stream is gone: the server reset it. Say with what.
            None => {
                let reason = std::future::poll_fn(|cx| stream.poll_reset(cx)).await?;
                return Err(reason.into());
            }
        }
    }
    Ok(())
}

/// A response as the test sees it: status, headers, the whole body and the
/// trailers (gRPC's `grpc-status` is in the trailers, or in the headers of a
/// Trailers-Only response).
#[derive(Debug)]
pub struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
    pub trailers: Option<http::HeaderMap>,
}

impl Answer {
    /// `name` from the trailers, or from the headers if there are none.
    pub fn grpc(&self, name: &str) -> Option<String> {
        self.trailers
            .as_ref()
            .and_then(|t| t.get(name))
            .or_else(|| self.headers.get(name))
            .map(|v| v.to_str().unwrap_or("(not text)").to_string())
    }
}

/// Waits for the response and reads it to its end, releasing flow-control
/// capacity as it reads (as a well-behaved reader does).
pub async fn answer(response: ResponseFuture) -> Result<Answer, h2::Error> {
    let response = within("the response head", response).await?;
    let (parts, body) = response.into_parts();
    let (body, trailers) = within("the response body", read_to_end(body)).await?;
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
        trailers,
    })
}

async fn read_to_end(
    mut body: RecvStream,
) -> Result<(Vec<u8>, Option<http::HeaderMap>), h2::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, body.trailers().await?))
}
