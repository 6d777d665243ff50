//! Chapter 6's exercise, `exercises::ch06::greet_all`, against chapter 4's
//! real `Greeter` service in a tonic server on a port of 127.0.0.1 the OS
//! picks. Plain HTTP/2 (no TLS), so the test needs no PKI; the server counts
//! every TCP connection it accepts and the most calls it held at once.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use exercises::ch06::greet_all;
use grpc_server::{CallStats, Greeter};
use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_server::{self, GreeterServer},
};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle, time::timeout};
use tokio_stream::{StreamExt, wrappers::TcpListenerStream};
use tonic::{
    Code, Request, Response, Status,
    transport::{Endpoint, Server},
};

/// The bound on every wait: far above what a healthy run needs, so that a
/// hang is reported as a failure instead of endured.
const WAIT: Duration = Duration::from_secs(20);

/// How long a call is held for the rest of its batch to arrive. Calls made
/// together arrive within milliseconds; calls made one after another never
/// arrive together, and each is let go after this.
const GATHER: Duration = Duration::from_secs(3);

/// Chapter 4's Greeter, holding each call until `batch` calls have arrived
/// (or [`GATHER`] has passed), so that the most calls in flight at once
/// shows whether a batch was sent together.
struct Gathering {
    inner: Greeter,
    batch: usize,
    arrived: watch::Sender<usize>,
    in_flight: AtomicUsize,
    peak: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl greeter_server::Greeter for Gathering {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.arrived.send_modify(|n| *n += 1);
        let mut arrived = self.arrived.subscribe();
        let _ = timeout(GATHER, arrived.wait_for(|n| *n >= self.batch)).await;
        let reply = self.inner.say_hello(request).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        reply
    }
}

/// A Greeter server, stopped when the test drops it.
struct Greeters {
    endpoint: Endpoint,
    accepted: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    stats: Arc<CallStats>,
    task: JoinHandle<()>,
}

impl Drop for Greeters {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Greeters {
    async fn start() -> Greeters {
        Greeters::gathering(1).await
    }

    /// A server that holds each call until `batch` have arrived.
    async fn gathering(batch: usize) -> Greeters {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let incoming = TcpListenerStream::new(listener).map(move |connection| {
            if connection.is_ok() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            connection
        });
        let inner = Greeter::default();
        let stats = inner.stats.clone();
        let peak = Arc::new(AtomicUsize::new(0));
        let greeter = Gathering {
            inner,
            batch,
            arrived: watch::channel(0).0,
            in_flight: AtomicUsize::new(0),
            peak: peak.clone(),
        };
        let task = tokio::spawn(async move {
            Server::builder()
                .add_service(GreeterServer::new(greeter))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        Greeters {
            endpoint: Endpoint::from_shared(format!("http://{addr}")).unwrap(),
            accepted,
            peak,
            stats,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

async fn greet(endpoint: &Endpoint, names: &[&str]) -> Result<Vec<String>, tonic::Status> {
    timeout(WAIT, greet_all(endpoint, names))
        .await
        .unwrap_or_else(|_| panic!("greet_all: no result within {WAIT:?}"))
}

#[tokio::test]
async fn every_call_of_a_batch_shares_one_connection() {
    let server = Greeters::start().await;
    let names = [
        "Ada", "Grace", "Edsger", "Barbara", "Tony", "Frances", "Leslie", "Niklaus",
    ];
    let replies = greet(&server.endpoint, &names)
        .await
        .expect("every call succeeds");
    let expected: Vec<_> = names.iter().map(|n| format!("Hello, {n}!")).collect();
    assert_eq!(replies, expected, "one reply per name, in order");
    assert_eq!(server.stats.completed(), 8, "the server served every call");
    assert_eq!(
        server.accepted(),
        1,
        "still to do (ch06): the server accepted {} connections for 8 calls. \
         Make one channel before the calls and give each call a clone of it: \
         the clones share the channel's one connection, and each call is a \
         stream on it.",
        server.accepted()
    );
}

#[tokio::test]
async fn the_calls_of_a_batch_are_in_flight_together() {
    // A loop that awaits each call before it starts the next would also use
    // one connection, and pay a round trip per name.
    let server = Greeters::gathering(4).await;
    let names = ["Ada", "Grace", "Edsger", "Barbara"];
    let replies = greet(&server.endpoint, &names)
        .await
        .expect("every call succeeds");
    assert_eq!(replies.len(), 4);
    assert_eq!(
        server.peak.load(Ordering::SeqCst),
        4,
        "still to do (ch06): the server never held all 4 calls at once; \
         start every call before awaiting the first (spawn each, then await \
         them in order)."
    );
}

#[tokio::test]
async fn a_refused_name_is_the_batchs_error() {
    let server = Greeters::start().await;
    let status = greet(&server.endpoint, &["Ada", " ", "Grace"])
        .await
        .expect_err("a blank name is refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("name"), "{status:?}");
}

#[tokio::test]
async fn no_names_means_no_calls() {
    let server = Greeters::start().await;
    let replies = greet(&server.endpoint, &[]).await.expect("nothing to fail");
    assert!(replies.is_empty());
    assert_eq!(server.stats.started.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_unavailable() {
    // A port that was free a moment ago, and that nobody listens on now.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let status = greet(&endpoint, &["Ada", "Grace"])
        .await
        .expect_err("nothing answers");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}
