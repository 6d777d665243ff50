//! Deadline propagation end to end: client -> frontend -> backend, each a real
//! TLS server on 127.0.0.1:0 with a fresh PKI. The backend here records the
//! `grpc-timeout` it received, which the real greeter does not expose.
//!
//! Nothing asserts speed; only codes, what the backend saw, and that both
//! servers noticed the call ending.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use certs::TlsListener;
use grpc_server::trace::TraceContext;
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
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
    span::{Attributes, Id},
};
use tracing_subscriber::{
    Layer,
    layer::{Context, SubscriberExt},
    registry::LookupSpan,
};

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
    start_chain_traced(margin, false).await
}

async fn start_chain_traced(margin: Duration, trace: bool) -> Chain {
    let pki = TempPki::new();

    let backend = RecordingBackend::default();
    let backend_listener = listener(&pki).await;
    let backend_addr = backend_listener.local_addr().unwrap();
    tokio::spawn(serve(
        backend_listener,
        backend.clone(),
        trace,
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
    tokio::spawn(serve(
        frontend_listener,
        frontend,
        trace,
        std::future::pending(),
    ));

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

/// The `call ended` lines of every traced hop, with their span's fields: an
/// in-memory exporter, installed once for this test binary.
fn ended_calls() -> &'static Mutex<Vec<BTreeMap<String, String>>> {
    static ENDED: OnceLock<&'static Mutex<Vec<BTreeMap<String, String>>>> = OnceLock::new();
    ENDED.get_or_init(|| {
        let ended: &'static Mutex<_> = Box::leak(Box::default());
        let subscriber = tracing_subscriber::registry().with(Capture(ended));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        ended
    })
}

struct Capture(&'static Mutex<Vec<BTreeMap<String, String>>>);

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.0.get("message").map(String::as_str) != Some("call ended") {
            return;
        }
        if let Some(span) = ctx.event_span(event)
            && let Some(own) = span.extensions().get::<Fields>()
        {
            fields.0.extend(own.0.clone());
        }
        self.0.lock().unwrap().push(fields.0);
    }
}

/// The hops of a trace that have ended, in call order: each one's parent is
/// the span before it, the first one's the client's.
async fn ended_hops(context: TraceContext, n: usize) -> Vec<BTreeMap<String, String>> {
    let trace = format!("{:032x}", context.trace_id);
    within("every hop's span to end", async {
        loop {
            let mut hops: Vec<_> = ended_calls()
                .lock()
                .unwrap()
                .iter()
                .filter(|f| f.get("trace_id") == Some(&trace))
                .cloned()
                .collect();
            if hops.len() >= n {
                let mut ordered = Vec::new();
                let mut parent = format!("{:016x}", context.span_id);
                while let Some(i) = hops
                    .iter()
                    .position(|h| h.get("parent_id") == Some(&parent))
                {
                    let hop = hops.swap_remove(i);
                    parent = hop["span_id"].clone();
                    ordered.push(hop);
                }
                assert!(
                    hops.is_empty(),
                    "hops outside the chain of parents: {hops:#?}"
                );
                return ordered;
            }
            sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A request that starts a trace, as a traced client would send it.
fn traced(delay_ms: u32, deadline: Option<Duration>) -> (Request<HelloRequest>, TraceContext) {
    let mut request = hello(delay_ms, deadline);
    let context = TraceContext::of_call(&Default::default());
    context.inject(request.metadata_mut());
    (request, context)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hop_has_a_span_in_one_trace_and_sees_less_of_the_deadline() {
    ended_calls();
    let chain = start_chain_traced(Duration::from_millis(50), true).await;
    let mut client = client(&chain).await;
    within("warm-up", client.say_hello(hello(0, None)))
        .await
        .unwrap();

    let (request, context) = traced(5_000, Some(Duration::from_millis(800)));
    within("a call the deadline ends", client.say_hello(request))
        .await
        .expect_err("the deadline passes first");
    let hops = ended_hops(context, 2).await;
    assert_eq!(hops.len(), 2, "one span per hop: {hops:#?}");
    // In call order: the client's span is the frontend's parent, the
    // frontend's the backend's.
    let (frontend, backend) = (&hops[0], &hops[1]);
    let remaining = |h: &BTreeMap<String, String>| -> u64 { h["remaining_ms"].parse().unwrap() };
    assert!(remaining(frontend) <= 800, "{frontend:?}");
    assert!(
        remaining(backend) + 50 <= remaining(frontend),
        "the backend must see the frontend's remainder minus the margin: {hops:#?}"
    );
    // The backend's shorter deadline ended it first; the frontend passed that on.
    assert_eq!(frontend["outcome"], "DeadlineExceeded", "{hops:#?}");
    // At the backend two timers race for that deadline: its own, which
    // answers DEADLINE_EXCEEDED, and the frontend's client, whose reset
    // drops the call at its deadline (`deadline_passed`).
    assert!(
        ["DeadlineExceeded", "deadline_passed"].contains(&backend["outcome"].as_str()),
        "{hops:#?}"
    );

    // A call the client abandons: the cancellation reaches the last hop.
    let (request, context) = traced(5_000, None);
    let abandoned = timeout(Duration::from_millis(300), client.say_hello(request)).await;
    assert!(abandoned.is_err(), "the call should still be running");
    let hops = ended_hops(context, 2).await;
    for hop in &hops {
        assert_eq!(hop["outcome"], "cancelled", "{hops:#?}");
        assert!(
            !hop.contains_key("remaining_ms"),
            "no deadline was sent: {hop:?}"
        );
    }
}
