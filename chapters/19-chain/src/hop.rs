//! One layer's client: the attempts it makes for one call, the throttle that
//! may hold them back, and what it counts.
//!
//! Every layer of the chain that calls another (the users, the frontend, the
//! middle) holds one [`Retrier`] towards the next, shared by all its calls,
//! as a gRPC channel and its retry throttle are. The rules differ between the
//! chapter's variants in one thing at a time: how many attempts a call may
//! make, which throttle gates them ([`Gate`]), and whether the call's
//! deadline goes along (`grpc-timeout`) or each hop only keeps its own timer.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use perf::retry::full_jitter;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep, timeout};
use tonic::{Code, Status, metadata::MetadataMap, transport::Channel};

use crate::throttle::{A6, DepositOn, Sre, Throttle, TowerBudget};

/// Which throttle, if any, gates a layer's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Every attempt the policy allows is sent.
    None,
    /// tower's `TpsBudget` with its defaults (10 s, 10 per second, 20 %).
    Tower,
    /// The SRE book's adaptive throttling with this K over `window`.
    Sre { k: f64, window: Duration },
    /// gRFC A6 retry throttling.
    A6 { max_tokens: f64, token_ratio: f64 },
}

impl Gate {
    fn build(self) -> Option<Box<dyn Throttle + Send>> {
        Some(match self {
            Gate::None => return None,
            Gate::Tower => Box::new(TowerBudget::tower_default(DepositOn::FirstAttempt)),
            Gate::Sre { k, window } => Box::new(Sre::new(k, window)),
            Gate::A6 {
                max_tokens,
                token_ratio,
            } => Box::new(A6::new(max_tokens, token_ratio)),
        })
    }
}

// ANCHOR: policy
/// How one layer calls the next.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Attempts per call, the first included (1: no retries).
    pub attempts: u32,
    pub gate: Gate,
    /// How long one attempt may take. With `propagate`, also no longer than
    /// what is left of the deadline the call arrived with.
    pub attempt_timeout: Duration,
    /// Before retry n: a pause drawn from [0, min(cap, base x 2^(n-1))].
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Send what is left of the deadline to the next hop (`grpc-timeout`),
    /// and give up on the call when it has passed.
    pub propagate: bool,
}
// ANCHOR_END: policy

/// The header that carries, to every hop, when the user behind a call gives
/// up (microseconds since the Unix epoch). It is the instrument, not a rule:
/// no hop decides anything by it; each only counts the work it did for a
/// user who had already gone.
pub const USER_GIVES_UP: &str = "x-user-gives-up-us";

/// Microseconds since the Unix epoch: one clock that every process of the
/// chain reads, so that their counts fall into the same seconds.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// When the user behind a request gives up, if it says.
pub fn user_gives_up(metadata: &MetadataMap) -> Option<u64> {
    metadata.get(USER_GIVES_UP)?.to_str().ok()?.parse().ok()
}

/// What one process counted in one second of the run. Each layer fills the
/// fields of its roles: a server counts what it received and answered, a
/// client its attempts, the leaf its work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Calls received (as a server).
    pub received: u64,
    /// Calls answered with success (as a server).
    pub answered_ok: u64,
    /// Calls finished after the caller had gone: an answer nobody waited
    /// for (as a server; the leaf counts only calls it worked on).
    pub orphaned: u64,
    /// Attempts sent to the next hop (as a client).
    pub attempts: u64,
    /// ... of which retries.
    pub retries: u64,
    /// Attempts the throttle held back.
    pub throttled: u64,
    /// The leaf: calls worked on to the end.
    pub worked: u64,
    /// ... of which ended after their user had given up: wasted work.
    pub worked_late: u64,
    /// The leaf: calls refused at the door (queue full).
    pub shed: u64,
    /// The leaf: calls thrown away unworked, their deadline past.
    pub dropped: u64,
}

/// A process's counts, second by second from the run's start `t0_us`.
#[derive(Debug)]
pub struct Tally {
    t0_us: u64,
    seconds: Mutex<Vec<Second>>,
}

impl Tally {
    pub fn new(t0_us: u64) -> Tally {
        Tally {
            t0_us,
            seconds: Mutex::new(Vec::new()),
        }
    }

    /// Adds to this second's counts.
    pub fn count(&self, add: impl FnOnce(&mut Second)) {
        let second = (now_us().saturating_sub(self.t0_us) / 1_000_000) as usize;
        let mut seconds = self.seconds.lock().unwrap();
        if seconds.len() <= second {
            seconds.resize(second + 1, Second::default());
        }
        add(&mut seconds[second]);
    }

    pub fn seconds(&self) -> Vec<Second> {
        self.seconds.lock().unwrap().clone()
    }
}

/// Whether a user who gives up at `gives_up` had gone by now.
pub fn gone(gives_up: Option<u64>) -> bool {
    gives_up.is_some_and(|t| now_us() > t)
}

/// One layer's client towards the next hop.
pub struct Retrier {
    client: GreeterClient<Channel>,
    policy: Policy,
    throttle: Option<Mutex<Box<dyn Throttle + Send>>>,
    rng: Mutex<StdRng>,
    tally: Arc<Tally>,
}

/// The codes a layer retries: the next hop could not serve the call now
/// (UNAVAILABLE), refused it (RESOURCE_EXHAUSTED) or ran out of time
/// (DEADLINE_EXCEEDED, the attempt's own timer included). What a client
/// that retries on timeouts does, and what makes a chain's retries multiply.
fn retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded
    )
}

impl Retrier {
    pub fn new(channel: Channel, policy: Policy, seed: u64, tally: Arc<Tally>) -> Retrier {
        Retrier {
            client: GreeterClient::new(channel),
            policy,
            throttle: policy.gate.build().map(Mutex::new),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            tally,
        }
    }

    fn draw(&self) -> f64 {
        self.rng.lock().unwrap().random::<f64>()
    }

    // ANCHOR: call
    /// One call through this layer: attempts until one succeeds, the policy
    /// or the throttle says stop, or (with `propagate`) the call's `deadline`
    /// passes. `gives_up` travels along for the counts.
    pub async fn call(
        &self,
        gives_up: Option<u64>,
        deadline: Option<Instant>,
    ) -> Result<(), Status> {
        let mut last = Status::unavailable("no attempt was made");
        for attempt in 1..=self.policy.attempts {
            let retry = attempt > 1;
            if retry {
                let pause = full_jitter(
                    self.policy.backoff_base,
                    self.policy.backoff_cap,
                    attempt - 1,
                    self.draw(),
                );
                sleep(pause).await;
            }
            let mut limit = self.policy.attempt_timeout;
            if let Some(deadline) = deadline.filter(|_| self.policy.propagate) {
                match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => limit = limit.min(left),
                    _ => return Err(Status::deadline_exceeded("the call's deadline has passed")),
                }
            }
            if let Some(throttle) = &self.throttle {
                let draw = self.draw();
                if !throttle.lock().unwrap().admit(Instant::now(), retry, draw) {
                    self.tally.count(|s| s.throttled += 1);
                    // A first attempt held back fails the call at once; a
                    // retry held back leaves the last failure standing.
                    return Err(match retry {
                        false => Status::unavailable("held back by the client's throttle"),
                        true => last,
                    });
                }
            }
            self.tally.count(|s| {
                s.attempts += 1;
                s.retries += u64::from(retry);
            });
            let ended = self.attempt(gives_up, limit).await;
            let accepted = ended.is_ok();
            if let Some(throttle) = &self.throttle {
                throttle.lock().unwrap().record(Instant::now(), accepted);
            }
            match ended {
                Ok(()) => return Ok(()),
                Err(status) if retryable(status.code()) => last = status,
                Err(status) => return Err(status),
            }
        }
        Err(last)
    }
    // ANCHOR_END: call

    /// One attempt, abandoned after `limit`: dropping the call resets its
    /// HTTP/2 stream, and the next hop's server drops the call's handler
    /// (tests/hop.rs).
    async fn attempt(&self, gives_up: Option<u64>, limit: Duration) -> Result<(), Status> {
        let mut request = tonic::Request::new(HelloRequest {
            name: "chain".into(),
            ..Default::default()
        });
        if let Some(t) = gives_up {
            request
                .metadata_mut()
                .insert(USER_GIVES_UP, t.to_string().parse().expect("digits"));
        }
        if self.policy.propagate {
            request.set_timeout(limit);
        }
        let mut client = self.client.clone();
        match timeout(limit, client.say_hello(request)).await {
            Ok(reply) => reply.map(|_| ()),
            Err(_) => Err(Status::deadline_exceeded("the attempt's timer fired")),
        }
    }
}
