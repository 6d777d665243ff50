//! What makes one call: the reused channel and clients, the naive clients
//! that rebuild everything per call, and the floor's ping-pong, behind one
//! [`Caller`] whose [`Caller::call`] times a call and checks its answer. The
//! fresh-connection caller drives its own connections, in `fresh.rs`.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;
use tonic::transport::Channel;

use super::{Handshakes, Http, fresh::fresh_call};

/// No call in this program should come near this; it is here so that a hung
/// server ends the run with an error instead of hanging it.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The name every arm greets; with `delay_ms` 0 the server answers at once.
pub const NAME: &str = "Ada";

/// What a call is made with. The reused callers are cheap to clone (a clone
/// shares the connection), so `choose_deadline` hands them to its workers.
#[derive(Clone)]
pub enum Caller {
    /// SayHello on one tonic channel.
    Grpc(GreeterClient<Channel>),
    /// POST /v1/greetings on one reqwest client (and so its connection pool).
    Rest {
        client: reqwest::Client,
        url: String,
    },
    /// A new TCP + TLS connection per call, from one shared TLS configuration,
    /// driven with hyper; `grpc` picks the gRPC request over the JSON one.
    Fresh {
        grpc: bool,
        http: Http,
        addr: SocketAddr,
        tls: TlsConnector,
        handshakes: Arc<Handshakes>,
    },
    /// Everything rebuilt for every call, as a naive client does: the CA file
    /// read, a TLS configuration and a client (or channel) built, then one call.
    NaiveGrpc {
        url: String,
        ca: PathBuf,
    },
    NaiveRest {
        url: String,
        ca: PathBuf,
    },
    /// A persistent plain TCP connection to an echo listener: `len` bytes out,
    /// the same back.
    Floor {
        stream: Arc<tokio::sync::Mutex<TcpStream>>,
        len: usize,
    },
}

/// The JSON body every REST arm sends.
pub fn rest_body() -> Vec<u8> {
    serde_json::to_vec(&rest_server::api::GreetingRequest {
        name: NAME.into(),
        delay_ms: 0,
    })
    .expect("a greeting always serialises")
}

pub(super) fn hello_request() -> HelloRequest {
    HelloRequest {
        name: NAME.into(),
        delay_ms: 0,
    }
}

impl Caller {
    /// SayHello on a channel made (and connected) once.
    pub async fn grpc(url: &str, ca: &Path) -> anyhow::Result<Caller> {
        let endpoint = grpc_client::endpoint(&grpc_client::Target {
            url: url.into(),
            ca: ca.into(),
            identity: None,
        })?;
        let channel = endpoint.connect().await.with_context(|| {
            format!("cannot connect to {url}: is the stack running (`cargo run`)? Or pass --spawn")
        })?;
        Ok(Caller::Grpc(GreeterClient::new(channel)))
    }

    /// POST on one reqwest client: HTTP/2 or, with `http1`, HTTP/1.1 only.
    pub fn rest(base: &str, ca: &Path, http1: bool) -> anyhow::Result<Caller> {
        Ok(Caller::Rest {
            client: grpc_client::rest::client(ca, http1)?,
            url: format!("{base}/v1/greetings"),
        })
    }

    /// Makes one call and checks its answer; returns how long it took.
    pub async fn call(&self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        tokio::time::timeout(CALL_TIMEOUT, self.call_once())
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {CALL_TIMEOUT:?}"))??;
        Ok(started.elapsed())
    }

    async fn call_once(&self) -> anyhow::Result<()> {
        match self {
            Caller::Grpc(client) => {
                let mut request = tonic::Request::new(hello_request());
                request.set_timeout(CALL_TIMEOUT);
                client.clone().say_hello(request).await?;
            }
            Caller::Rest { client, url } => post_json(client, url).await?,
            Caller::Fresh {
                grpc,
                http,
                addr,
                tls,
                handshakes,
            } => fresh_call(*grpc, *http, *addr, tls, handshakes).await?,
            Caller::NaiveGrpc { url, ca } => {
                // What `grpc-client --fresh-channel` does: a new endpoint
                // (which reads the CA file) and a new connection, every call.
                let Caller::Grpc(client) = Caller::grpc(url, ca).await? else {
                    unreachable!()
                };
                client.clone().say_hello(hello_request()).await?;
            }
            Caller::NaiveRest { url, ca } => {
                let client = grpc_client::rest::client(ca, false)?;
                post_json(&client, url).await?;
            }
            Caller::Floor { stream, len } => {
                let mut stream = stream.lock().await;
                let out = vec![b'x'; *len];
                stream.write_all(&out).await?;
                let mut back = vec![0; *len];
                stream.read_exact(&mut back).await?;
            }
        }
        Ok(())
    }
}

async fn post_json(client: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(rest_body())
        .timeout(CALL_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    // Read the body to the end, as a real client must before the connection
    // can carry the next request.
    let body = response.bytes().await?;
    if !status.is_success() {
        bail!(
            "POST {url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}
