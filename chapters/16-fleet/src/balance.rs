//! Three ways to spread calls over replicas, and a discovery stream driven
//! by the replicas' health.
//!
//! - [`Strategy::RoundRobin`]: each replica in turn, whatever it is doing.
//! - [`Strategy::Tonic`]: tonic's balanced channel (`Channel::balance_list`).
//!   It is tower's power-of-two-choices, but tonic's connection reports a
//!   load of 0 (`impl Load for Connection` in tonic 0.14.9's
//!   `transport/channel/service/connection.rs`), so both choices always tie:
//!   in effect, a random pick.
//! - [`Strategy::P2c`]: tower's power-of-two-choices over peak-EWMA load:
//!   pick two replicas at random, send to the one whose recent round trips,
//!   weighted by calls outstanding, are shorter. "Peak" because a slow
//!   answer raises the estimate at once, while fast ones lower it slowly.
//!
//! [`Pool::watching`] feeds the p2c balancer from health `Watch` streams:
//! a replica joins when it says SERVING and leaves when it says NOT_SERVING
//! or its stream breaks. That is the client's half of a rolling restart.

use std::{
    collections::HashMap,
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc};
use tokio_stream::{StreamExt, wrappers::UnboundedReceiverStream};
use tonic::{Status, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tower::{
    Service, ServiceExt,
    balance::p2c::Balance,
    discover::Change,
    load::{CompleteOnResponse, PeakEwmaDiscover},
};

use crate::{
    client::{Answer, Call, Caller, endpoint},
    replica::SERVICE,
};

/// Printed (as the slow part's arms) by the names clap holds. No command line
/// chooses a strategy, so those names are the ones the results have always
/// carried, `p2c_peak_ewma` rather than a bare `p2c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum)]
pub enum Strategy {
    #[value(name = "round_robin")]
    RoundRobin,
    Tonic,
    #[value(name = "p2c_peak_ewma")]
    P2c,
}

program::clap_name_display!(Strategy);

/// The peak-EWMA settings: the round trip a replica is assumed to have
/// until it has answered, and how fast old observations fade.
pub const DEFAULT_RTT: Duration = Duration::from_millis(5);
pub const DECAY: Duration = Duration::from_secs(1);

type Changes =
    UnboundedReceiverStream<Result<Change<SocketAddr, Caller>, std::convert::Infallible>>;
type P2c = Balance<PeakEwmaDiscover<Changes>, Call>;

/// Calls spread over replicas by one strategy.
#[derive(Clone)]
pub enum Pool {
    RoundRobin {
        callers: Arc<Vec<Caller>>,
        next: Arc<AtomicUsize>,
    },
    Tonic(Caller),
    /// tower's balancer needs `&mut` to pick; a call holds the lock only
    /// while it picks, not while it waits for its answer.
    P2c(Arc<Mutex<P2c>>),
}

impl Pool {
    /// A pool over a fixed list of replicas.
    pub fn new(strategy: Strategy, addrs: &[SocketAddr], ca: &Path) -> anyhow::Result<Pool> {
        let endpoints = addrs
            .iter()
            .map(|a| endpoint(*a, ca))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(match strategy {
            Strategy::RoundRobin => Pool::RoundRobin {
                callers: Arc::new(
                    endpoints
                        .iter()
                        .map(|e| Caller::new(e.connect_lazy()))
                        .collect(),
                ),
                next: Arc::default(),
            },
            Strategy::Tonic => {
                Pool::Tonic(Caller::new(Channel::balance_list(endpoints.into_iter())))
            }
            Strategy::P2c => {
                let (changes, pool) = Pool::p2c();
                for (addr, endpoint) in addrs.iter().zip(endpoints) {
                    let _ = changes.send(Ok(Change::Insert(
                        *addr,
                        Caller::new(endpoint.connect_lazy()),
                    )));
                }
                // The set is complete; the balancer keeps it after the
                // sender is gone (the end of discovery changes nothing).
                pool
            }
        })
    }

    /// A p2c pool whose replicas come and go with their health: one task
    /// per replica watches it (see [`watch`]). The tasks run until the
    /// returned [`Watchers`] are dropped: keep them as long as the pool.
    pub fn watching(addrs: &[SocketAddr], ca: &Path) -> anyhow::Result<(Pool, Watchers)> {
        let (changes, pool) = Pool::p2c();
        let mut tasks = tokio::task::JoinSet::new();
        for addr in addrs {
            let endpoint = endpoint(*addr, ca)?;
            tasks.spawn(watch(*addr, endpoint, changes.clone()));
        }
        Ok((pool, Watchers(tasks)))
    }

    fn p2c() -> (ChangeSender, Pool) {
        let (changes, stream) = mpsc::unbounded_channel();
        let discover = PeakEwmaDiscover::new(
            UnboundedReceiverStream::new(stream),
            DEFAULT_RTT,
            DECAY,
            CompleteOnResponse::default(),
        );
        (
            changes,
            Pool::P2c(Arc::new(Mutex::new(Balance::new(discover)))),
        )
    }

    // ANCHOR: pick
    /// Sends one call to the replica the strategy picks.
    pub async fn call(&self, call: Call) -> Result<Answer, Status> {
        match self {
            Pool::RoundRobin { callers, next } => {
                let turn = next.fetch_add(1, Ordering::Relaxed) % callers.len();
                callers[turn].clone().call(call).await
            }
            Pool::Tonic(caller) => caller.clone().call(call).await,
            Pool::P2c(balance) => {
                let deadline = call.deadline;
                let pick = async {
                    let mut balance = balance.lock().await;
                    // Waits while no replica is in the set (all restarting).
                    let ready = balance
                        .ready()
                        .await
                        .map_err(|e| Status::unavailable(e.to_string()))?;
                    Ok::<_, Status>(ready.call(call))
                };
                let answer = tokio::time::timeout_at(deadline, pick)
                    .await
                    .map_err(|_| {
                        Status::deadline_exceeded("no replica was ready before the deadline")
                    })??;
                answer.await.map_err(|e| match e.downcast::<Status>() {
                    Ok(status) => *status,
                    Err(e) => Status::unknown(e.to_string()),
                })
            }
        }
    }
    // ANCHOR_END: pick
}

type ChangeSender =
    mpsc::UnboundedSender<Result<Change<SocketAddr, Caller>, std::convert::Infallible>>;

/// The health watchers of a [`Pool::watching`]; dropping them stops them,
/// and then no replica joins or leaves the pool again.
#[must_use = "dropping the watchers stops them at once: no replica would ever join the pool"]
pub struct Watchers(#[allow(dead_code)] tokio::task::JoinSet<()>);

/// How long a watcher waits before it tries a replica that went away again.
pub const REWATCH: Duration = Duration::from_millis(100);

// ANCHOR: watch
/// Keeps one replica's place in the balancer in step with its health: in
/// while its `Watch` stream says SERVING, out as soon as it says anything
/// else or the stream breaks (the replica was killed). A replica that went
/// away is tried again every [`REWATCH`], on a new connection each time, so
/// that the restarted replica is found.
async fn watch(addr: SocketAddr, endpoint: tonic::transport::Endpoint, changes: ChangeSender) {
    let mut inside = false;
    loop {
        // A draining replica still completes TCP handshakes in its backlog
        // but no longer answers TLS: give up on it quickly and try again.
        if let Ok(Ok(channel)) = tokio::time::timeout(5 * REWATCH, endpoint.connect()).await {
            let mut health = HealthClient::new(channel.clone());
            let request = HealthCheckRequest {
                service: SERVICE.into(),
            };
            if let Ok(response) = health.watch(request).await {
                let mut statuses = response.into_inner();
                while let Some(Ok(update)) = statuses.next().await {
                    let serving = update.status == ServingStatus::Serving as i32;
                    if serving && !inside {
                        let caller = Caller::new(channel.clone());
                        let _ = changes.send(Ok(Change::Insert(addr, caller)));
                    } else if !serving && inside {
                        let _ = changes.send(Ok(Change::Remove(addr)));
                    }
                    inside = serving;
                    // Leaving: drop the stream (and so the connection's last
                    // stream), or it would hold the replica's drain open.
                    if !serving {
                        break;
                    }
                }
            }
        }
        if inside {
            let _ = changes.send(Ok(Change::Remove(addr)));
            inside = false;
        }
        if changes.is_closed() {
            return;
        }
        tokio::time::sleep(REWATCH).await;
    }
}
// ANCHOR_END: watch

/// Each replica's share of `answers`, in the order of `names`.
pub fn shares(names: &[String], answers: &[String]) -> Vec<f64> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for answer in answers {
        *counts.entry(answer).or_default() += 1;
    }
    let total = answers.len().max(1) as f64;
    names
        .iter()
        .map(|n| *counts.get(n.as_str()).unwrap_or(&0) as f64 / total)
        .collect()
}
