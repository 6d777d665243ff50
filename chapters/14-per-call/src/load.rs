//! The two load shapes, as calls for `loadgen::run_bounded`: one slot is one
//! unary call, or one message sent on one of N long-lived streams and
//! answered by its echo. Either way a slot's latency runs from when it was
//! due to when its answer came back.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use loadgen::{
    Counters, SendError, Slot, SlotRecord, Timer, WhenFull, cli::code_name, run_bounded,
};
use proto::{
    greeter::v1::{HelloRequest, greeter_client::GreeterClient},
    streaming::v1::{Chunk, streamer_client::StreamerClient},
};
use rest_server::api::GreetingRequest;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::Channel;

use crate::{ramp::Shape, rest::Http};

/// One HTTP/2 connection to the server, plaintext, made at once.
pub async fn connect(addr: std::net::SocketAddr) -> anyhow::Result<Channel> {
    Ok(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect()
            .await?,
    )
}

fn failed(code: impl Into<String>) -> SendError {
    SendError {
        code: code.into(),
        fatal: false,
    }
}

/// What one slot's send is, for the driver.
pub type SlotFuture = std::pin::Pin<Box<dyn Future<Output = Result<(), SendError>> + Send>>;

/// One unary echo for `slot`.
pub fn unary_call(client: &GreeterClient<Channel>, deadline: Duration, slot: Slot) -> SlotFuture {
    let mut client = client.clone();
    let mut request = tonic::Request::new(HelloRequest {
        name: format!("{}", slot.index),
        delay_ms: 0,
    });
    request.set_timeout(deadline);
    Box::pin(async move {
        client
            .say_hello(request)
            .await
            .map(drop)
            .map_err(|status| failed(code_name(status.code())))
    })
}

/// One long-lived Echo stream: messages go in through `outbound`, and a
/// reader task hands each echo to whoever is waiting for its `seq`.
struct EchoStream {
    outbound: mpsc::UnboundedSender<Chunk>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>>,
}

/// N persistent bidirectional streams on one connection.
#[derive(Clone)]
pub struct Streams {
    streams: Arc<Vec<EchoStream>>,
    deadline: Duration,
}

impl Streams {
    pub async fn open(
        channel: Channel,
        count: usize,
        deadline: Duration,
    ) -> anyhow::Result<Streams> {
        let mut streams = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            let (outbound, rx) = mpsc::unbounded_channel();
            let mut client = StreamerClient::new(channel.clone());
            let mut inbound = client
                .echo(UnboundedReceiverStream::new(rx))
                .await?
                .into_inner();
            let waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>> = Arc::default();
            let reader = waiting.clone();
            tokio::spawn(async move {
                while let Ok(Some(chunk)) = inbound.message().await {
                    let waiter = reader.lock().expect("not poisoned").remove(&chunk.seq);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(());
                    }
                }
                // The stream is over: every caller still waiting gets an error.
                reader.lock().expect("not poisoned").clear();
            });
            streams.push(EchoStream { outbound, waiting });
        }
        Ok(Streams {
            streams: Arc::new(streams),
            deadline,
        })
    }

    // ANCHOR: stream_call
    /// One message per slot, on stream `index % N`: consecutive slots go to
    /// different streams, so the load is spread evenly over them.
    pub fn call(&self, slot: Slot) -> impl Future<Output = Result<(), SendError>> + Send + 'static {
        let streams = self.streams.clone();
        let deadline = self.deadline;
        async move {
            let stream = &streams[(slot.index % streams.len() as u64) as usize];
            let (tx, rx) = oneshot::channel();
            // Registered before sending, so the echo cannot arrive unawaited.
            stream
                .waiting
                .lock()
                .expect("not poisoned")
                .insert(slot.index, tx);
            let chunk = Chunk {
                seq: slot.index,
                data: vec![0; 16],
            };
            if stream.outbound.send(chunk).is_err() {
                return Err(failed("stream closed"));
            }
            match tokio::time::timeout(deadline, rx).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(failed("stream closed")),
                Err(_) => {
                    stream
                        .waiting
                        .lock()
                        .expect("not poisoned")
                        .remove(&slot.index);
                    Err(failed("DEADLINE_EXCEEDED"))
                }
            }
        }
    }
    // ANCHOR_END: stream_call
}

// ANCHOR: rest_client
/// A REST client as a reader would configure one. HTTP/1.1: a pool that
/// keeps up to `connections` idle connections, and (see [`Rest`]) never has
/// more than that many requests out. HTTP/2: every request a stream on one
/// connection, as tonic's channel does for gRPC.
pub fn rest_client(http: Http, connections: usize) -> reqwest::Result<reqwest::Client> {
    // reqwest builds a TLS configuration even for http:// URLs; it must find
    // the workspace's one crypto provider installed (an error here means
    // another one already is, which serves as well).
    let _ = Arc::unwrap_or_clone(certs::config::provider()).install_default();
    let builder = reqwest::Client::builder().no_proxy().tcp_nodelay(true);
    match http {
        Http::H1 => builder.http1_only().pool_max_idle_per_host(connections),
        Http::H2 => builder.http2_prior_knowledge(),
    }
    .build()
}
// ANCHOR_END: rest_client

/// `POST /v1/greetings` against one of the server's REST ports.
#[derive(Clone)]
pub struct Rest {
    client: reqwest::Client,
    url: String,
    deadline: Duration,
    /// HTTP/1.1 only: a permit per pooled connection. reqwest's pool bounds
    /// the *idle* connections, not the busy ones: without this, a request
    /// that finds every connection busy opens another one.
    pool: Option<Arc<Semaphore>>,
}

impl Rest {
    pub fn new(
        http: Http,
        addr: std::net::SocketAddr,
        connections: usize,
        deadline: Duration,
    ) -> anyhow::Result<Rest> {
        Ok(Rest {
            client: rest_client(http, connections)?,
            url: format!("http://{addr}/v1/greetings"),
            deadline,
            pool: (http == Http::H1).then(|| Arc::new(Semaphore::new(connections))),
        })
    }

    // ANCHOR: rest_call
    /// One greeting per slot. The deadline covers the wait for a free
    /// connection too. A request cut off by it takes its HTTP/1.1 connection
    /// with it (hyper closes a connection whose caller stopped waiting for
    /// the answer); an HTTP/2 one resets only its stream.
    pub fn call(&self, slot: Slot) -> SlotFuture {
        let rest = self.clone();
        Box::pin(async move {
            let request = async {
                let _permit = match &rest.pool {
                    Some(pool) => Some(pool.acquire().await.map_err(|_| failed("pool closed"))?),
                    None => None,
                };
                let body = GreetingRequest {
                    name: slot.index.to_string(),
                    delay_ms: 0,
                };
                let response = rest
                    .client
                    .post(&rest.url)
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| failed(error_kind(&e)))?;
                let status = response.status();
                // The whole body is read, or the connection cannot be reused.
                response.bytes().await.map_err(|e| failed(error_kind(&e)))?;
                if !status.is_success() {
                    return Err(failed(format!("HTTP {}", status.as_u16())));
                }
                Ok(())
            };
            match tokio::time::timeout(rest.deadline, request).await {
                Ok(result) => result,
                Err(_) => Err(failed("DEADLINE_EXCEEDED")),
            }
        })
    }
    // ANCHOR_END: rest_call
}

/// A failed request's kind, for counting: what reqwest says went wrong, and
/// the operating system's word for it when there is one (connection refused,
/// reset, ...).
pub fn error_kind(error: &reqwest::Error) -> String {
    let what = if error.is_connect() {
        "connect"
    } else if error.is_timeout() {
        "timeout"
    } else if error.is_body() || error.is_decode() {
        "body"
    } else if error.is_request() {
        "request"
    } else {
        "other"
    };
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return format!("{what}: {:?}", io.kind());
        }
        source = inner.source();
    }
    what.to_string()
}

/// Any shape, as one value: what a slot does under the bounded open-loop
/// driver. Every shape hands the driver a boxed future per slot, so the
/// generator's own cost per slot is the same for all of them.
#[derive(Clone)]
pub enum Load {
    Unary(GreeterClient<Channel>, Duration),
    Stream(Streams),
    Rest(Rest),
}

impl Load {
    /// Opens what `shape` needs on `channel`: nothing more for unary calls,
    /// `streams` Echo streams for messages.
    pub async fn open(
        shape: Shape,
        channel: Channel,
        streams: usize,
        deadline: Duration,
    ) -> anyhow::Result<Load> {
        Ok(match shape {
            Shape::Unary => Load::Unary(GreeterClient::new(channel), deadline),
            Shape::Stream => Load::Stream(Streams::open(channel, streams, deadline).await?),
            Shape::RestH1 | Shape::RestH2 => {
                anyhow::bail!("a REST load is made with Load::Rest(Rest::new(...))")
            }
        })
    }

    /// Sends `slots` at their due times, at most `max_in_flight` at once.
    pub async fn run(
        &self,
        slots: &[Slot],
        max_in_flight: usize,
        when_full: WhenFull,
        drain: Duration,
        counters: Arc<Counters>,
    ) -> Vec<SlotRecord> {
        let send = |slot: Slot| -> SlotFuture {
            match self {
                Load::Unary(client, deadline) => unary_call(client, *deadline, slot),
                Load::Stream(streams) => Box::pin(streams.call(slot)),
                Load::Rest(rest) => rest.call(slot),
            }
        };
        run_bounded(
            slots,
            Timer::Precise,
            max_in_flight,
            when_full,
            drain,
            counters,
            send,
        )
        .await
    }
}
