//! One layer's client against a server that always fails: how many attempts
//! each policy sends, what the throttle holds back, and what travels along.
//! Then against one that never answers: whether the server learns that a
//! call was abandoned. Counts, codes and signals only, never a time.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use chain::hop::{Gate, Policy, Retrier, Tally, USER_GIVES_UP, now_us};
use proto::greeter::v1::{
    HelloReply, HelloRequest,
    greeter_server::{Greeter, GreeterServer},
};
use tokio::{
    sync::mpsc,
    time::{Instant, timeout},
};
use tonic::{Code, Request, Response, Status, transport::Endpoint};

/// One call as the failing server saw it: whether a grpc-timeout came, and
/// the user's give-up time, if it came.
type Call = (bool, Option<String>);

#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<Call>>>);

#[tonic::async_trait]
impl Greeter for Seen {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let timeout = request.metadata().get("grpc-timeout").is_some();
        let user = request
            .metadata()
            .get(USER_GIVES_UP)
            .map(|v| v.to_str().unwrap().to_string());
        self.0.lock().unwrap().push((timeout, user));
        Err(Status::unavailable("always down"))
    }
}

/// A server that never answers: it says when a call reaches its handler, and
/// when tonic drops the handler's future.
#[derive(Clone)]
struct Hangs {
    started: mpsc::UnboundedSender<()>,
    dropped: mpsc::UnboundedSender<()>,
}

struct OnDrop(mpsc::UnboundedSender<()>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[tonic::async_trait]
impl Greeter for Hangs {
    async fn say_hello(
        &self,
        _request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let _dropped = OnDrop(self.dropped.clone());
        let _ = self.started.send(());
        std::future::pending().await
    }
}

async fn serve<S: Greeter>(service: S) -> Endpoint {
    let incoming = tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GreeterServer::new(service))
            .serve_with_incoming(incoming),
    );
    Endpoint::from_shared(format!("http://{addr}")).unwrap()
}

async fn failing_server() -> (Seen, Endpoint) {
    let seen = Seen::default();
    let endpoint = serve(seen.clone()).await;
    (seen, endpoint)
}

fn policy(gate: Gate, propagate: bool) -> Policy {
    Policy {
        attempts: 3,
        gate,
        attempt_timeout: Duration::from_secs(5),
        backoff_base: Duration::ZERO,
        backoff_cap: Duration::ZERO,
        propagate,
    }
}

async fn retrier(gate: Gate, propagate: bool) -> (Seen, Retrier, Arc<Tally>) {
    let (seen, endpoint) = failing_server().await;
    let tally = Arc::new(Tally::new(now_us()));
    let channel = endpoint.connect().await.unwrap();
    let retrier = Retrier::new(channel, policy(gate, propagate), 7, tally.clone());
    (seen, retrier, tally)
}

fn totals(tally: &Tally) -> (u64, u64, u64) {
    tally.seconds().iter().fold((0, 0, 0), |(a, r, t), s| {
        (a + s.attempts, r + s.retries, t + s.throttled)
    })
}

#[tokio::test]
async fn with_no_throttle_every_failure_is_retried_up_to_the_attempts() {
    let (seen, retrier, tally) = retrier(Gate::None, false).await;
    for _ in 0..4 {
        let failed = retrier.call(Some(42), None).await.unwrap_err();
        assert_eq!(failed.code(), Code::Unavailable);
    }
    assert_eq!(seen.0.lock().unwrap().len(), 12);
    assert_eq!(totals(&tally), (12, 8, 0));
    // Without propagation no deadline travels; the user's give-up time does.
    assert!(
        seen.0
            .lock()
            .unwrap()
            .iter()
            .all(|(t, u)| !t && u.as_deref() == Some("42"))
    );
}

#[tokio::test]
async fn a6_stops_retrying_once_half_the_bucket_is_gone() {
    // A bucket of 4: each failure takes one; retries go while more than 2
    // are left. The first call fails twice and retries once more (4 -> 3 ->
    // 2: no retry after the second), every later call makes one attempt.
    let gate = Gate::A6 {
        max_tokens: 4.0,
        token_ratio: 0.1,
    };
    let (seen, retrier, tally) = retrier(gate, false).await;
    for _ in 0..5 {
        assert!(retrier.call(None, None).await.is_err());
    }
    assert_eq!(seen.0.lock().unwrap().len(), 2 + 4);
    let (attempts, retries, throttled) = totals(&tally);
    assert_eq!((attempts, retries), (6, 1));
    assert_eq!(throttled, 5, "every call's next retry was held back");
}

#[tokio::test]
async fn a_propagated_deadline_travels_and_a_passed_one_sends_nothing() {
    let (seen, retrier, tally) = retrier(Gate::None, true).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    assert!(retrier.call(None, Some(deadline)).await.is_err());
    assert_eq!(seen.0.lock().unwrap().len(), 3);
    assert!(seen.0.lock().unwrap().iter().all(|(t, _)| *t));
    // A deadline already past: no attempt at all.
    let passed = retrier.call(None, Some(Instant::now())).await.unwrap_err();
    assert_eq!(passed.code(), Code::DeadlineExceeded);
    assert_eq!(seen.0.lock().unwrap().len(), 3);
    assert_eq!(totals(&tally).0, 3);
}

#[tokio::test]
async fn the_sre_throttle_holds_back_first_attempts_too() {
    // K = 1: every failure makes the next request likelier to be rejected
    // locally; after enough of them almost every call fails without a send.
    let gate = Gate::Sre {
        k: 1.0,
        window: Duration::from_secs(600),
    };
    let (seen, retrier, tally) = retrier(gate, false).await;
    for _ in 0..200 {
        let _ = retrier.call(None, None).await;
    }
    let (attempts, _, throttled) = totals(&tally);
    assert_eq!(seen.0.lock().unwrap().len() as u64, attempts);
    assert!(throttled > 150, "{throttled} held back, {attempts} sent");
}

type Signals = (mpsc::UnboundedReceiver<()>, mpsc::UnboundedReceiver<()>);

/// A server that hangs, the signals it sends, and a client of one attempt.
async fn hanging(propagate: bool, attempt_timeout: Duration) -> (Retrier, Signals) {
    let (started, started_rx) = mpsc::unbounded_channel();
    let (dropped, dropped_rx) = mpsc::unbounded_channel();
    let channel = serve(Hangs { started, dropped })
        .await
        .connect()
        .await
        .unwrap();
    let policy = Policy {
        attempts: 1,
        attempt_timeout,
        ..policy(Gate::None, propagate)
    };
    let retrier = Retrier::new(channel, policy, 7, Arc::new(Tally::new(now_us())));
    (retrier, (started_rx, dropped_rx))
}

/// Waits for one signal; ten seconds is far more than a loopback reset needs,
/// and only bounds the test if the signal never comes.
async fn signalled(rx: &mut mpsc::UnboundedReceiver<()>) -> bool {
    matches!(
        timeout(Duration::from_secs(10), rx.recv()).await,
        Ok(Some(()))
    )
}

#[tokio::test]
async fn a_caller_that_stops_waiting_ends_the_handler_below() {
    // What the middle does with deadlines passed on, when its own caller
    // resets the stream: tonic drops its handler, and with it this call.
    let (retrier, (mut started, mut dropped)) = hanging(true, Duration::from_secs(600)).await;
    let call = tokio::spawn(async move { retrier.call(None, None).await });
    assert!(
        signalled(&mut started).await,
        "the call never reached the server"
    );
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(
        signalled(&mut dropped).await,
        "the server went on with a call its caller had dropped"
    );
}

#[tokio::test]
async fn an_attempt_given_up_by_its_own_timer_ends_the_handler_below() {
    // No deadline travels (no propagation): only the reset of the stream
    // can tell the server, and it does.
    let (retrier, (mut started, mut dropped)) = hanging(false, Duration::from_millis(200)).await;
    let ended = retrier.call(None, None).await.unwrap_err();
    assert_eq!(ended.code(), Code::DeadlineExceeded);
    assert!(signalled(&mut started).await);
    assert!(
        signalled(&mut dropped).await,
        "the server went on with an attempt its client had given up"
    );
}
