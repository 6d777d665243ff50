//! Deadline propagation end to end: client -> frontend -> backend, each a real
//! TLS server on 127.0.0.1:0 with a fresh PKI. The backend here records the
//! `grpc-timeout` it received, which the real greeter does not expose.
//!
//! Nothing asserts speed; only codes, what the backend saw, and that both
//! servers noticed the call ending.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use certs::TlsListener;
use grpc_server::{
    CallStats,
    lifetime::grpc_timeout,
    testing::{TempPki, wait_until, within},
};
use perf::propagation::{Frontend, serve};
use proto::greeter::v1::{
    HelloReply, HelloRequest, greeter_client::GreeterClient, greeter_server::Greeter,
};
use tokio::time::{Instant, sleep, timeout};
use tonic::{Code, Request, Response, Status, transport::Channel};

/// A backend that records the deadline each call arrived with.
#[derive(Clone, Default)]
struct RecordingBackend {
    seen: Arc<Mutex<Vec<Option<Duration>>>>,
    stats: Arc<CallStats>,
}

#[tonic::async_trait]
impl Greeter for RecordingBackend {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let deadline = grpc_timeout(request.metadata());
        self.seen.lock().unwrap().push(deadline);
        let HelloRequest { name, delay_ms } = request.into_inner();
        let call = self.stats.start("test backend", deadline);
        sleep(Duration::from_millis(delay_ms.into())).await;
        call.finish();
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}

struct Chain {
    frontend_addr: SocketAddr,
    backend: RecordingBackend,
    frontend_stats: Arc<CallStats>,
    pki: TempPki,
}

async fn listener(pki: &TempPki) -> TlsListener {
    let tls = certs::server_config(&pki.tls_args(), false, &[b"h2"]).unwrap();
    TlsListener::bind("127.0.0.1:0".parse().unwrap(), tls)
        .await
        .unwrap()
}

async fn start_chain(margin: Duration) -> Chain {
    let pki = TempPki::new();

    let backend = RecordingBackend::default();
    let backend_listener = listener(&pki).await;
    let backend_addr = backend_listener.local_addr().unwrap();
    tokio::spawn(serve(
        backend_listener,
        backend.clone(),
        std::future::pending(),
    ));

    let target = grpc_client::Target {
        url: format!("https://{backend_addr}"),
        ca: pki.ca_cert(),
        identity: None,
    };
    let channel = grpc_client::endpoint(&target).unwrap().connect_lazy();
    let frontend = Frontend::new(channel, margin);
    let frontend_stats = frontend.stats.clone();
    let frontend_listener = listener(&pki).await;
    let frontend_addr = frontend_listener.local_addr().unwrap();
    tokio::spawn(serve(frontend_listener, frontend, std::future::pending()));

    Chain {
        frontend_addr,
        backend,
        frontend_stats,
        pki,
    }
}

async fn client(chain: &Chain) -> GreeterClient<Channel> {
    let target = grpc_client::Target {
        url: format!("https://{}", chain.frontend_addr),
        ca: chain.pki.ca_cert(),
        identity: None,
    };
    let channel = within("connect", grpc_client::endpoint(&target).unwrap().connect())
        .await
        .expect("connect to the frontend");
    GreeterClient::new(channel)
}

fn hello(delay_ms: u32, deadline: Option<Duration>) -> Request<HelloRequest> {
    let mut request = Request::new(HelloRequest {
        name: "Ada".into(),
        delay_ms,
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_gets_the_callers_deadline_minus_the_margin_and_the_chain_gives_up_together() {
    let margin = Duration::from_millis(50);
    let chain = start_chain(margin).await;
    let mut client = client(&chain).await;

    // Warm the frontend -> backend connection, and check a call without a
    // deadline passes none on.
    let reply = within("warm-up", client.say_hello(hello(0, None)))
        .await
        .expect("a quick call succeeds through the frontend");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
    assert_eq!(*chain.backend.seen.lock().unwrap(), vec![None]);

    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let status = within("slow call", client.say_hello(hello(5_000, Some(deadline))))
        .await
        .expect_err("the deadline must pass first");
    let elapsed = started.elapsed();
    // The backend's shorter deadline runs out first, so the answer is the
    // frontend's DEADLINE_EXCEEDED, a margin before the client's own timer
    // (which tonic would report as CANCELLED) would have fired.
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    assert!(elapsed >= deadline - margin, "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");

    let seen = chain.backend.seen.lock().unwrap()[1].expect("the backend got a deadline");
    assert!(
        seen <= deadline,
        "backend saw {seen:?}, later than the client's {deadline:?}"
    );
    assert!(
        seen <= deadline - margin,
        "backend saw {seen:?}: the margin was not kept"
    );

    // The backend noticed its deadline and stopped; the frontend answered
    // (with the backend's DEADLINE_EXCEEDED) instead of waiting on.
    wait_until("the backend stopped", &chain.backend.stats, |s| {
        s.ended_early() == 1
    })
    .await;
    wait_until("the frontend answered", &chain.frontend_stats, |s| {
        s.completed() == 2
    })
    .await;
    assert_eq!(chain.backend.stats.in_flight(), 0);
    assert_eq!(chain.frontend_stats.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_client_call_stops_frontend_and_backend() {
    let chain = start_chain(Duration::from_millis(50)).await;
    let mut client = client(&chain).await;
    let call = client.say_hello(hello(5_000, Some(Duration::from_secs(10))));
    // Give up from the client side once the backend is working on the call.
    let cancelled = timeout(Duration::from_millis(300), call).await;
    assert!(cancelled.is_err(), "the call should still be running");
    wait_until("the frontend stopped", &chain.frontend_stats, |s| {
        s.ended_early() == 1
    })
    .await;
    wait_until("the backend stopped", &chain.backend.stats, |s| {
        s.ended_early() == 1
    })
    .await;
    let seen = chain.backend.seen.lock().unwrap()[0].expect("a deadline");
    assert!(seen <= Duration::from_secs(10) - Duration::from_millis(50));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontend_fails_fast_when_the_margin_eats_the_deadline() {
    // A margin longer than the whole deadline: the backend can never be in time.
    let chain = start_chain(Duration::from_secs(2)).await;
    let mut client = client(&chain).await;

    let status = within(
        "call",
        client.say_hello(hello(100, Some(Duration::from_millis(1_500)))),
    )
    .await
    .expect_err("fails fast");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("not called"), "{status:?}");
    assert!(
        chain.backend.seen.lock().unwrap().is_empty(),
        "the backend was called"
    );
}
