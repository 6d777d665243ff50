//! The balancers against real replicas. p2c over peak-EWMA must steer calls
//! away from a replica that is slower on every call, where round robin, by
//! design, cannot: it hands out turns whatever the replicas are doing. And a
//! pool fed by health watches must stop sending to a replica as soon as it
//! starts to drain, which is what makes a rolling restart lose nothing.

use std::{net::SocketAddr, time::Duration};

use fleet::{
    balance::{Pool, Strategy},
    client::{Answer, Call},
    replica::{Latency, Replica, Spec},
};
use grpc_server::testing::{TempPki, within};
use tokio::{task::JoinSet, time::Instant};
use tonic::Status;

async fn start(spec: Spec) -> Replica {
    within("start a replica", Replica::start(spec))
        .await
        .expect("the replica starts")
}

fn spec(name: &str, pki: &TempPki) -> Spec {
    Spec::new(name, "127.0.0.1:0".parse().unwrap(), pki.dir.clone())
}

/// A fast replica "fast" and one 40 ms slower on every call, "slow".
async fn fast_and_slow(pki: &TempPki) -> (Replica, Replica) {
    let fast = start(spec("fast", pki)).await;
    let slow = start(Spec {
        latency: Latency::Fixed(Duration::from_millis(40)),
        ..spec("slow", pki)
    })
    .await;
    (fast, slow)
}

/// A call that asks for no work, with a deadline no healthy call reaches.
async fn call(pool: &Pool) -> Result<Answer, Status> {
    pool.call(Call {
        name: "test".into(),
        delay_ms: 0,
        deadline: Instant::now() + Duration::from_secs(5),
    })
    .await
}

/// Which replica answered each of `total` calls made `at_once` at a time.
async fn answers(pool: &Pool, total: usize, at_once: usize) -> Vec<String> {
    let mut workers = JoinSet::new();
    for _ in 0..at_once {
        let pool = pool.clone();
        workers.spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..total / at_once {
                seen.push(call(&pool).await.expect("every call is answered").replica);
            }
            seen
        });
    }
    let all = within("the calls", workers.join_all()).await;
    all.into_iter().flatten().collect()
}

fn count(answers: &[String], name: &str) -> usize {
    answers.iter().filter(|a| *a == name).count()
}

#[tokio::test]
async fn p2c_over_peak_ewma_prefers_the_faster_replica() {
    let pki = TempPki::new();
    let (fast, slow) = fast_and_slow(&pki).await;
    let pool = Pool::new(Strategy::P2c, &[fast.addr, slow.addr], &pki.ca_cert()).unwrap();

    let seen = answers(&pool, 200, 8).await;
    let (to_fast, to_slow) = (count(&seen, "fast"), count(&seen, "slow"));
    println!("p2c: fast {to_fast}, slow {to_slow}");
    assert_eq!(to_fast + to_slow, 200);
    // With two replicas p2c compares both on every pick; the slow one's
    // estimate is its 40 ms, the fast one's a few ms times its calls in
    // flight, so the slow one is tried again only when its estimate has
    // decayed. A wide margin: the claim is the direction, not the ratio.
    assert!(to_fast > 2 * to_slow, "fast {to_fast}, slow {to_slow}");
}

#[tokio::test]
async fn round_robin_alternates_whatever_the_replicas_latency() {
    let pki = TempPki::new();
    let (fast, slow) = fast_and_slow(&pki).await;
    let pool = Pool::new(
        Strategy::RoundRobin,
        &[fast.addr, slow.addr],
        &pki.ca_cert(),
    )
    .unwrap();

    // One at a time, so the turns are the order of the answers.
    let seen = answers(&pool, 100, 1).await;
    let expected: Vec<&str> = ["fast", "slow"].into_iter().cycle().take(100).collect();
    assert_eq!(seen, expected);
    assert_eq!((count(&seen, "fast"), count(&seen, "slow")), (50, 50));
}

#[tokio::test]
async fn a_watching_pool_drops_a_replica_as_soon_as_it_drains() {
    let pki = TempPki::new();
    // The one that drains is the one p2c prefers: while "a" is in the set,
    // a run of calls all answered by the slower "b" is all but impossible,
    // so such a run shows that "a" was removed, not merely passed over.
    let a = start(spec("a", &pki)).await;
    let b = start(Spec {
        latency: Latency::Fixed(Duration::from_millis(20)),
        ..spec("b", &pki)
    })
    .await;
    let addrs: [SocketAddr; 2] = [a.addr, b.addr];
    let (pool, _watchers) = Pool::watching(&addrs, &pki.ca_cert()).unwrap();

    // Both join once their watches say SERVING; until each has answered,
    // the pool could be missing one and the rest would prove nothing.
    let mut before = Vec::new();
    within("both replicas answer through the pool", async {
        while count(&before, "a") == 0 || count(&before, "b") == 0 {
            before.push(call(&pool).await.expect("a call before the drain").replica);
        }
    })
    .await;
    println!(
        "before the drain: a {}, b {}",
        count(&before, "a"),
        count(&before, "b")
    );

    // A grace far longer than the watcher needs: "a" answers all through
    // it, so a call that still reaches "a" does not fail, it shows as "a".
    let drain = tokio::spawn(a.drain(Duration::from_secs(2), Duration::from_secs(10)));

    // The watcher hears NOT_SERVING and removes "a"; calls picked before
    // that may still land there. Twenty in a row from "b" means it is out.
    let until_out = within("every call goes to b", async {
        let (mut in_a_row, mut calls) = (0, 0);
        while in_a_row < 20 {
            let answer = call(&pool).await.expect("no call fails during the drain");
            calls += 1;
            in_a_row = if answer.replica == "b" {
                in_a_row + 1
            } else {
                0
            };
        }
        calls - 20
    })
    .await;
    println!("calls to a after the drain started: at most {until_out}");
    let after = answers(&pool, 40, 4).await;
    assert_eq!(count(&after, "b"), 40, "{after:?}");

    // Nothing the pool holds keeps "a" open: its drain ends by itself.
    let drained = within("the drain", drain)
        .await
        .expect("the drain's task")
        .expect("the drain completes");
    assert!(!drained.forced, "{drained:?}");
    drop(b);
}
