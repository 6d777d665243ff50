//! One replica on a real TLS server, and the promises the rest of the chapter
//! builds on: a drain tells health watchers first, keeps answering the calls
//! it already has, and only then closes; a kill loses the calls in flight
//! instead of leaving them hanging, and frees the address for a restart; a
//! maximum connection age costs the client nothing; and every answer says
//! which replica gave it, which is how the experiment counts shares.

use std::{net::SocketAddr, sync::atomic::Ordering, time::Duration};

use fleet::{
    client::{Answer, Call, Caller, endpoint},
    replica::{Replica, SERVICE, Spec},
};
use grpc_server::testing::{TempPki, wait_until, within};
use tokio::time::Instant;
use tonic::{Code, Status, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tower::Service;

/// Starts replica `name` on a free port of 127.0.0.1 with `pki`'s files.
async fn start(name: &str, pki: &TempPki) -> Replica {
    start_spec(Spec::new(name, loopback(), pki.dir.clone())).await
}

async fn start_spec(spec: Spec) -> Replica {
    within("start a replica", Replica::start(spec))
        .await
        .expect("the replica starts")
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A channel to `addr`, connected before it returns.
async fn connect(addr: SocketAddr, pki: &TempPki) -> Channel {
    let endpoint = endpoint(addr, &pki.ca_cert()).expect("an endpoint");
    within("connect", endpoint.connect())
        .await
        .expect("the replica accepts a connection")
}

/// One call: `delay_ms` of work on the server, a deadline far beyond it.
async fn call(channel: &Channel, delay_ms: u32) -> Result<Answer, Status> {
    let call = Call {
        name: "test".into(),
        delay_ms,
        deadline: Instant::now() + Duration::from_secs(15),
    };
    Caller::new(channel.clone()).call(call).await
}

#[tokio::test]
async fn a_drain_says_not_serving_first_then_finishes_its_calls_then_closes() {
    let pki = TempPki::new();
    let replica = start("a", &pki).await;
    let stats = replica.stats();
    let channel = connect(replica.addr, &pki).await;

    let mut health = HealthClient::new(channel.clone());
    let request = HealthCheckRequest {
        service: SERVICE.into(),
    };
    let mut statuses = within("open the health watch", health.watch(request))
        .await
        .expect("the watch opens")
        .into_inner();
    let first = within("the first status", statuses.message()).await;
    assert_eq!(
        first.expect("a status").expect("not the end").status(),
        ServingStatus::Serving
    );

    // A call that is still running when the drain starts, and that the drain
    // must wait for: it has reached the handler before the drain begins.
    let long = tokio::spawn({
        let channel = channel.clone();
        async move { call(&channel, 800).await }
    });
    wait_until("the long call reaches the handler", &*stats, |s| {
        s.started.load(Ordering::Relaxed) == 1
    })
    .await;

    let grace = Duration::from_millis(300);
    let drain = tokio::spawn(replica.drain(grace, Duration::from_secs(10)));

    let next = within("the status after the drain started", statuses.message()).await;
    assert_eq!(
        next.expect("a status").expect("not the end").status(),
        ServingStatus::NotServing
    );
    // The watch stream is a call on the connection too, so the drain cannot
    // have finished while it is open: the watcher hears before anything closes.
    assert!(
        !drain.is_finished(),
        "the drain returned before NOT_SERVING was heard"
    );
    // A watcher that heard NOT_SERVING lets go, as the balancer's does;
    // holding the stream would hold the drain open until its limit.
    drop(statuses);

    let answer = within("the long call", long)
        .await
        .expect("the call's task")
        .expect("a call in flight when the drain started is answered");
    assert_eq!(answer.replica, "a");

    let drained = within("the drain", drain)
        .await
        .expect("the drain's task")
        .expect("the drain completes");
    assert!(drained.not_serving <= drained.goaway, "{drained:?}");
    assert!(drained.goaway <= drained.closed, "{drained:?}");
    // The grace is kept in full: clients that have not heard yet are served.
    assert!(drained.goaway - drained.not_serving >= grace, "{drained:?}");
    assert!(!drained.forced, "no call outlived the limit: {drained:?}");

    // Gone now: the same channel cannot reach it any more.
    let after = within("a call after the drain", call(&channel, 0)).await;
    let status = after.expect_err("a drained replica answered");
    println!(
        "a call after the drain: {:?} {}",
        status.code(),
        status.message()
    );
}

#[tokio::test]
async fn a_killed_replica_fails_its_calls_in_flight_and_can_start_again_on_its_address() {
    let pki = TempPki::new();
    let replica = start("a", &pki).await;
    let (addr, stats) = (replica.addr, replica.stats());
    let channel = connect(addr, &pki).await;

    let lost = tokio::spawn({
        let channel = channel.clone();
        async move { call(&channel, 2000).await }
    });
    wait_until("the call reaches the handler", &*stats, |s| {
        s.started.load(Ordering::Relaxed) == 1
    })
    .await;
    // `kill` joins the replica's thread: off the test's runtime.
    within("kill", tokio::task::spawn_blocking(move || replica.kill()))
        .await
        .expect("the kill's task");

    // The connection is gone without a word: the call must learn that from
    // the socket, not wait for its deadline.
    let status = within("the call in flight during the kill", lost)
        .await
        .expect("the call's task")
        .expect_err("a call on a killed replica was answered");
    println!("the lost call: {:?} {}", status.code(), status.message());
    assert_ne!(status.code(), Code::DeadlineExceeded, "{status:?}");

    // Nothing of the old replica holds the port: a restart binds it again,
    // and the client's channel, which knows only the address, reconnects.
    let again = start_spec(Spec::new("a2", addr, pki.dir.clone())).await;
    assert_eq!(again.addr, addr);
    let answer = within("a call to the restarted replica", call(&channel, 0))
        .await
        .expect("the restarted replica answers");
    assert_eq!(answer.replica, "a2");
}

#[tokio::test]
async fn an_idle_channel_reconnects_after_its_connection_reached_the_maximum_age() {
    let pki = TempPki::new();
    let spec = Spec {
        max_age: Some(Duration::from_millis(300)),
        ..Spec::new("a", loopback(), pki.dir.clone())
    };
    let replica = start_spec(spec).await;
    let channel = connect(replica.addr, &pki).await;

    let first = within("the first call", call(&channel, 0)).await;
    assert_eq!(first.expect("the first call").replica, "a");
    // Long past the age: the first connection was sent GOAWAY and closed,
    // and the channel must open a new one by itself.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = within("the second call", call(&channel, 0)).await;
    assert_eq!(
        second
            .expect("a call after the connection aged out")
            .replica,
        "a"
    );
}

#[tokio::test]
async fn every_answer_names_its_replica() {
    let pki = TempPki::new();
    let replica = start("replica-seven", &pki).await;
    let channel = connect(replica.addr, &pki).await;
    let answer = within("a call", call(&channel, 0)).await.expect("the call");
    assert_eq!(answer.replica, replica.spec.name);
    assert_eq!(answer.replica, "replica-seven");
}
