//! The REST server against careless and hostile clients: bodies it will not
//! take, headers too large, connections and bodies that stall. Each test is
//! the client (a raw TLS socket speaking HTTP/1.1 by hand, a raw HTTP/2
//! client, or reqwest) and checks what that client sees: the status and its
//! problem details, that the connection survives where it should, and that
//! everyone else is served meanwhile.
//!
//! One file (about 510 lines) because every case shares the raw clients and
//! the check that the server still serves others; the gRPC port's cases are in
//! chapter 4's `tests/hostile.rs`.

use axum::{body::Bytes, http::Method};
use grpc_server::testing::{TestServer, WAIT, raw, within};
use reqwest::StatusCode;
use rest_server::{
    api::MAX_BODY_BYTES,
    guard::{BODY_TIMEOUT, MAX_HEADER_BYTES},
    problem,
    server::{HEADER_READ_TIMEOUT, PREFACE_TIMEOUT},
    testing,
};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt, WriteHalf},
    time::Instant,
};

/// The clients these tests play.
trait Clients {
    async fn tls(&self, alpn: &[u8]) -> Tls;
    async fn h1(&self) -> H1;
    async fn h2(&self) -> raw::RawH2;
    fn reqwest(&self, alpn: &[u8]) -> reqwest::Client;
}

impl Clients for TestServer {
    async fn tls(&self, alpn: &[u8]) -> Tls {
        raw::tls(self.addr, &self.pki.ca_cert(), &[alpn])
            .await
            .expect("TLS")
    }

    async fn h1(&self) -> H1 {
        H1 {
            io: self.tls(b"http/1.1").await,
            buf: Vec::new(),
        }
    }

    async fn h2(&self) -> raw::RawH2 {
        raw::h2_connect(self.addr, &self.pki.ca_cert(), &raw::Builder::new()).await
    }

    /// A reqwest client of one HTTP version that trusts the test CA.
    fn reqwest(&self, alpn: &[u8]) -> reqwest::Client {
        let mut tls = certs::client_config(&self.pki.ca_cert(), None).unwrap();
        tls.alpn_protocols = vec![alpn.to_vec()];
        let builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .no_proxy()
            .timeout(WAIT);
        if alpn == b"h2" {
            builder
        } else {
            builder.http1_only()
        }
        .build()
        .unwrap()
    }
}

type Tls = raw::TlsStream<tokio::net::TcpStream>;

/// HTTP/1.1 by hand over one TLS connection: what was written is exactly
/// what the test wrote, and what arrives is read as it arrives.
struct H1 {
    io: Tls,
    /// Bytes read past the end of the last response.
    buf: Vec<u8>,
}

#[derive(Debug)]
struct H1Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl H1Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn problem(&self) -> Value {
        assert_eq!(
            self.header("content-type"),
            Some(problem::CONTENT_TYPE),
            "{self:?}"
        );
        serde_json::from_slice(&self.body).expect("problem details JSON")
    }
}

/// Reads one response (head, and a body of its Content-Length) from `io`.
async fn read_response(
    io: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<H1Response> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or("0");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    buf.drain(..head_end);
    while buf.len() < length {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf.drain(..length).collect();
    Ok(H1Response {
        status: status.parse().unwrap_or(0),
        headers,
        body,
    })
}

impl H1 {
    async fn send(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.expect("write");
    }

    async fn response(&mut self) -> H1Response {
        within(
            "an HTTP/1.1 response",
            read_response(&mut self.io, &mut self.buf),
        )
        .await
        .expect("a response, not a closed connection")
    }

    /// Reads the answer while `upload` writes the request, as a client that
    /// sends everything before it reads anything; returns the answer and,
    /// once the whole upload has gone through, the connection.
    async fn answer_while_uploading<F, Fut>(self, upload: F) -> (H1Response, H1)
    where
        F: FnOnce(WriteHalf<Tls>) -> Fut,
        Fut: Future<Output = std::io::Result<WriteHalf<Tls>>> + Send + 'static,
    {
        let H1 { io, mut buf } = self;
        let (mut reader, writer) = tokio::io::split(io);
        let upload = tokio::spawn(upload(writer));
        let response = within("the answer", read_response(&mut reader, &mut buf))
            .await
            .expect("the answer must arrive, not a reset");
        let writer = within("the upload", upload)
            .await
            .unwrap()
            .expect("the upload completes");
        let h1 = H1 {
            io: reader.unsplit(writer),
            buf,
        };
        (response, h1)
    }

    /// GET /healthz on this connection: it still carries requests.
    async fn assert_still_serves(&mut self) {
        self.send(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await;
        let response = self.response().await;
        assert_eq!(response.status, 200, "{response:?}");
    }
}

/// A greeting head over HTTP/1.1 with these extra header lines.
fn greeting_head(extra: &str) -> String {
    format!(
        "POST /v1/greetings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{extra}\r\n"
    )
}

// Two MiB: what a careless client posts (a file), far over the 16 KiB limit.
const BIG: usize = 2 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Bodies over the limit: the client hears the 413

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_a_declared_oversized_body_gets_413_at_once_without_100_continue() {
    let server = testing::server(false).await;
    let mut h1 = server.h1().await;
    // The client asks before sending (as curl does for large bodies) and
    // then waits: the server must answer 413 without reading anything.
    h1.send(
        greeting_head(&format!(
            "Content-Length: {BIG}\r\nExpect: 100-continue\r\n"
        ))
        .as_bytes(),
    )
    .await;
    let response = h1.response().await;
    println!("{response:?}");
    assert_eq!(
        response.status, 413,
        "the first answer must be the 413, not 100 Continue"
    );
    let problem = response.problem();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(&BIG.to_string()) && detail.contains(&MAX_BODY_BYTES.to_string()),
        "{detail}"
    );
    assert_eq!(server.handlers_started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_an_oversized_body_sent_without_asking_still_gets_its_413() {
    let server = testing::server(false).await;
    // A careless client: it sends the whole body before it reads anything.
    let (response, mut h1) = server
        .h1()
        .await
        .answer_while_uploading(|mut writer| async move {
            let head = greeting_head(&format!("Content-Length: {BIG}\r\n"));
            writer.write_all(head.as_bytes()).await?;
            writer.write_all(&vec![b'x'; BIG]).await?;
            writer.flush().await?;
            Ok(writer)
        })
        .await;
    assert_eq!(response.status, 413, "{response:?}");
    response.problem();
    // The server read the rest of the body and threw it away, so the whole
    // upload went through and the connection still carries requests.
    h1.assert_still_serves().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_a_chunked_body_over_the_limit_gets_413_and_the_connection_survives() {
    let server = testing::server(false).await;
    // No Content-Length: the size is only known by reading, so the handler's
    // limit trips after 16 KiB and the rest must be drained.
    let (response, mut h1) = server
        .h1()
        .await
        .answer_while_uploading(|mut writer| async move {
            writer
                .write_all(greeting_head("Transfer-Encoding: chunked\r\n").as_bytes())
                .await?;
            let chunk = vec![b'x'; 16 * 1024];
            for _ in 0..64 {
                writer
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
                writer.write_all(&chunk).await?;
                writer.write_all(b"\r\n").await?;
            }
            writer.write_all(b"0\r\n\r\n").await?;
            Ok(writer)
        })
        .await;
    assert_eq!(response.status, 413, "{response:?}");
    h1.assert_still_serves().await;
}

/// Over HTTP/2, with and without a declared length: the 413 arrives, the
/// client can finish its upload, and the stream closes cleanly (curl 7.88
/// reports exit 92 for a stream reset while it is still sending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_an_oversized_upload_gets_413_and_its_stream_closes_cleanly() {
    let server = testing::server(false).await;
    let mut h2 = server.h2().await;
    for declared in [true, false] {
        let mut head =
            raw::request(Method::POST, "/v1/greetings").header("content-type", "application/json");
        if declared {
            head = head.header("content-length", BIG.to_string());
        }
        let (response, mut stream) = raw::start(&mut h2, head.body(()).unwrap()).await;
        let (answer, uploaded) = tokio::join!(
            raw::answer(response),
            within("the upload", raw::upload(&mut stream, BIG))
        );
        let answer = answer.expect("the answer, not a reset");
        println!(
            "declared length {declared}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.status, 413);
        assert_eq!(answer.headers["content-type"], problem::CONTENT_TYPE);
        uploaded.unwrap_or_else(|e| panic!("declared {declared}: the upload was cut short: {e}"));
    }
    assert_eq!(server.handlers_started(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_a_404_for_a_request_with_a_body_reaches_the_client_and_the_stream_closes_cleanly() {
    let server = testing::server(false).await;
    let mut h2 = server.h2().await;
    let head = raw::request(Method::POST, "/v1/no-such-thing")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (response, mut stream) = raw::start(&mut h2, head).await;
    let (answer, uploaded) = tokio::join!(
        raw::answer(response),
        within("the upload", raw::upload(&mut stream, 1024 * 1024))
    );
    let answer = answer.expect("the answer, not a reset");
    assert_eq!(answer.status, 404);
    uploaded.expect("the upload was cut short");
}

// ---------------------------------------------------------------------------
// Headers over the limit: 431, on that request alone

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_over_the_limit_get_a_431_problem_over_both_protocols() {
    let server = testing::server(false).await;
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let client = server.reqwest(alpn);
        let response = client
            .get(server.url("/healthz"))
            .header("x-padding", "a".repeat(64 * 1024))
            .send()
            .await
            .expect("an answer");
        assert_eq!(
            response.status(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
        let problem: Value = response.json().await.unwrap();
        println!("{}: {problem}", String::from_utf8_lossy(alpn));
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains(&MAX_HEADER_BYTES.to_string())
        );
        let ok = client.get(server.url("/healthz")).send().await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_a_large_header_fails_its_own_stream_and_not_the_connection() {
    let server = testing::server(false).await;
    let mut h2 = server.h2().await;
    // 64 KiB: refused by the server (problem details); 150 KiB: over HTTP/2's
    // own limit, refused by h2 (a bare 431, then a reset). Neither may cost
    // the connection.
    for (padding, problem_details) in [(64 * 1024, true), (150 * 1024, false)] {
        let head = raw::request(Method::GET, "/healthz")
            .header("x-padding", "a".repeat(padding))
            .body(())
            .unwrap();
        match raw::answer(raw::send(&mut h2, head, None).await).await {
            Ok(answer) => {
                assert_eq!(answer.status, 431, "{padding}");
                if problem_details {
                    assert_eq!(answer.headers["content-type"], problem::CONTENT_TYPE);
                }
            }
            Err(e) => {
                assert!(!problem_details, "{padding}: {e}");
                assert!(!e.is_go_away(), "{padding}: the connection was closed: {e}");
            }
        }
        let head = raw::request(Method::GET, "/healthz").body(()).unwrap();
        let ok = raw::answer(raw::send(&mut h2, head, None).await)
            .await
            .expect("the same connection still serves");
        assert_eq!(ok.status, 200);
    }
}

/// Past MAX_HEAD_BYTES hyper answers a bare 431 and closes at once, without
/// reading the rest of the head. A client still writing may therefore see its
/// write fail, or a reset instead of the 431 (the kernel drops what it had
/// received when the reset arrives): the limit is best effort about the
/// answer, but never lets the head in and never keeps the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_a_head_over_the_protocol_limit_is_refused_and_the_connection_closed() {
    let server = testing::server(false).await;
    let mut h1 = server.h1().await;
    let padding = "a".repeat(200 * 1024);
    let head = format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: {padding}\r\n\r\n");
    // A failed write is one of the outcomes; what the server sent is read next.
    let _ = h1.io.write_all(head.as_bytes()).await;
    let answer = within(
        "a 431 or the end of the connection",
        read_response(&mut h1.io, &mut h1.buf),
    )
    .await;
    match answer {
        Ok(response) => assert_eq!(response.status, 431, "{response:?}"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
            ),
            "neither a 431 nor a closed connection: {e}"
        ),
    }
}

// ---------------------------------------------------------------------------
// Connections and bodies that stall

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_silent_after_tls_is_closed_over_both_protocols() {
    let server = testing::server(false).await;
    let started = Instant::now();
    let mut silent_h1 = server.tls(b"http/1.1").await;
    let mut silent_h2 = server.tls(b"h2").await;

    // Meanwhile others are served.
    let ok = server
        .reqwest(b"h2")
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);

    let limit = HEADER_READ_TIMEOUT.max(PREFACE_TIMEOUT);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (h1, h2) = tokio::join!(
        tokio::time::timeout(limit + WAIT, silent_h1.read_to_end(&mut a)),
        tokio::time::timeout(limit + WAIT, silent_h2.read_to_end(&mut b)),
    );
    let waited = started.elapsed();
    println!("silent http/1.1: {h1:?}; silent h2: {h2:?}; after {waited:?}");
    assert!(
        h1.is_ok(),
        "the silent HTTP/1.1 connection was still open after {waited:?}"
    );
    assert!(
        h2.is_ok(),
        "the silent HTTP/2 connection was still open after {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gets_408_over_both_protocols() {
    let server = testing::server(false).await;

    // HTTP/1.1: 10 of the 100 announced bytes, then nothing.
    let mut h1 = server.h1().await;
    h1.send(greeting_head("Content-Length: 100\r\n").as_bytes())
        .await;
    h1.send(br#"{"name":"A"#).await;
    // HTTP/2: the same, on a stream.
    let mut h2 = server.h2().await;
    let head = raw::request(Method::POST, "/v1/greetings")
        .header("content-type", "application/json")
        .header("content-length", "100")
        .body(())
        .unwrap();
    let (response, mut stream) = raw::start(&mut h2, head).await;
    stream
        .send_data(Bytes::from_static(br#"{"name":"A"#), false)
        .unwrap();

    let started = Instant::now();
    let stalled = tokio::time::timeout(BODY_TIMEOUT + WAIT, h1.response())
        .await
        .expect("no answer to a stalled body over HTTP/1.1");
    println!("http/1.1 after {:?}: {stalled:?}", started.elapsed());
    assert_eq!(stalled.status, 408);
    assert_eq!(stalled.header("connection"), Some("close"));
    stalled.problem();

    let answer = raw::answer(response).await.expect("an answer over HTTP/2");
    assert_eq!(answer.status, 408, "{answer:?}");
    assert_eq!(server.handlers_started(), 0);
    // The HTTP/2 connection itself is fine.
    let head = raw::request(Method::GET, "/healthz").body(()).unwrap();
    let ok = raw::answer(raw::send(&mut h2, head, None).await)
        .await
        .unwrap();
    assert_eq!(ok.status, 200);
}
