//! The real `Ingest` service (gate, handler, worker) behind a real tonic
//! server and client, connected by an in-memory pipe instead of a socket.
//! Nothing in it waits on the operating system, so it runs under Tokio's
//! paused clock: sleeps and service times take no real time, and every run
//! with the same inputs takes the same course.

#![allow(dead_code)]

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use hyper_util::rt::TokioIo;
use ingest::{
    plan::ServicePlan,
    service::{IngestService, Ingestor, Policy},
};
use loadgen::{
    Counters, Slot, Timer,
    ingest::{IngestRun, ingest},
};
use proto::ingest::v1::ingest_server::IngestServer;
use tokio::io::DuplexStream;
use tonic::transport::{Channel, Endpoint, Server, Uri};

/// Hands out one end of the pipe, once.
struct Pipe(Arc<Mutex<Option<DuplexStream>>>);

impl tonic::codegen::Service<Uri> for Pipe {
    type Response = TokioIo<DuplexStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let io = self.0.lock().unwrap().take();
        Box::pin(async move {
            io.map(TokioIo::new)
                .ok_or_else(|| io::Error::other("the in-memory pipe connects once"))
        })
    }
}

/// Starts an ingestor and serves it; returns it and a client channel.
pub async fn start(policy: Policy, plan: &str) -> (Arc<Ingestor>, Channel) {
    let plan: ServicePlan = plan.parse().expect("a valid plan");
    let ingestor = Ingestor::start(policy, plan, 1, Duration::from_millis(100));
    let channel = serve(ingestor.clone()).await;
    (ingestor, channel)
}

/// Serves `ingestor` over an in-memory HTTP/2 connection.
pub async fn serve(ingestor: Arc<Ingestor>) -> Channel {
    let (client, server) = tokio::io::duplex(256 * 1024);
    tokio::spawn(async move {
        Server::builder()
            .add_service(IngestServer::new(IngestService(ingestor)))
            .serve_with_incoming(tokio_stream::once(Ok::<_, io::Error>(server)))
            .await
    });
    Endpoint::from_static("http://in-memory.test")
        .connect_with_connector(Pipe(Arc::new(Mutex::new(Some(client)))))
        .await
        .expect("in-memory connection")
}

/// A current-thread runtime with the clock paused: time only moves when
/// every task is waiting for a timer, and then straight to the next one.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// One open-loop `Ingest` call of `bytes`-byte messages on Tokio's timer
/// (which the paused clock drives), nothing written as it goes.
pub async fn call(channel: Channel, slots: &[Slot], bytes: usize) -> IngestRun {
    ingest(
        channel,
        slots,
        Timer::Tokio,
        bytes,
        1,
        &Counters::default(),
        None,
    )
    .await
}
