//! The caller's side: one overall deadline per call, and what to do when an
//! attempt is refused with RESOURCE_EXHAUSTED.
//!
//! [`Retry::Naive`] tries again at once, up to `max_attempts`. [`Retry::Budgeted`]
//! is chapter 10's fix: back off exponentially with full jitter, and retry only
//! while gRPC's retry throttle ([`perf::retry::RetryThrottle`], shared by every
//! call to the server) has tokens to spare. [`Retry::WhenTold`] waits as long
//! as the refusal said (gRPC's `RetryInfo`, HTTP's `Retry-After`), and no
//! less. All stop when the call's deadline has no room left for another attempt.
//!
//! [`Caller`] makes one attempt over gRPC or REST and reads the answer the
//! same way for both: a code, and when to come back if the server said.

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use perf::retry::{RetryThrottle, full_jitter};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use rand::{Rng, SeedableRng, rngs::StdRng};
use reqwest::header::RETRY_AFTER;
use rest_server::{Problem, api::GreetingRequest};
use serde::Serialize;
use tokio::{
    sync::Semaphore,
    time::{Instant, sleep, timeout_at},
};
use tonic::{
    Code,
    transport::{Channel, Endpoint},
};
use tonic_types::StatusExt;

use crate::{config::Transport, rest::TIMEOUT_HEADER, server::Running};

/// How a caller treats a refused attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// One attempt per call.
    Off,
    /// Again at once, up to `max_attempts`.
    Naive,
    /// Backoff with full jitter, under the retry throttle's budget.
    Budgeted,
    /// After the delay the refusal names, up to `max_attempts`; a refusal
    /// that names none is not retried.
    WhenTold,
}

/// The retry settings of every call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RetryRules {
    pub retry: Retry,
    /// Attempts per call, the first included.
    pub max_attempts: u32,
    /// Backoff before retry n is random in [0, min(cap, base * 2^(n-1))].
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
}

/// Why a failed call was not tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The policy does not retry.
    Off,
    /// A failure that retrying cannot fix here (the deadline passed, or a bug).
    NotRetryable,
    /// `max_attempts` reached.
    Attempts,
    /// The retry throttle's bucket is at or below half.
    Budget,
    /// The backoff would end after the call's deadline.
    Deadline,
    /// The refusal did not say when to come back.
    NotTold,
}

/// A failed attempt, as the caller read it: the code, and when the server
/// said to come back, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub code: Code,
    pub retry_after: Option<Duration>,
}

impl From<Code> for Failure {
    fn from(code: Code) -> Failure {
        Failure {
            code,
            retry_after: None,
        }
    }
}

/// After a failed attempt: try again after a pause, or stop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    RetryAfter(Duration),
    Stop(Stop),
}

impl RetryRules {
    // ANCHOR: decide
    /// Attempt number `attempt` (from 1) failed with `failure`, `remaining`
    /// is left of the call's deadline, and the throttle says whether it
    /// `allows` a retry. `random` is uniform in [0, 1), for the jitter.
    pub fn after_failure(
        &self,
        attempt: u32,
        failure: Failure,
        remaining: Duration,
        allows: bool,
        random: f64,
    ) -> Next {
        if self.retry == Retry::Off {
            return Next::Stop(Stop::Off);
        }
        // Only a refusal is retried: the server did no work on it, so trying
        // again is safe; DEADLINE_EXCEEDED means the caller's time is up.
        if failure.code != Code::ResourceExhausted {
            return Next::Stop(Stop::NotRetryable);
        }
        if attempt >= self.max_attempts {
            return Next::Stop(Stop::Attempts);
        }
        let pause = match self.retry {
            Retry::Naive => return Next::RetryAfter(Duration::ZERO),
            Retry::Budgeted if !allows => return Next::Stop(Stop::Budget),
            Retry::Budgeted => full_jitter(self.backoff_base, self.backoff_cap, attempt, random),
            // At least what the server said, and up to twice that: calls
            // refused in the same instant are told the same delay, and
            // should not all come back in the same instant.
            Retry::WhenTold => match failure.retry_after {
                Some(told) => told.mul_f64(1.0 + random),
                None => return Next::Stop(Stop::NotTold),
            },
            Retry::Off => return Next::Stop(Stop::Off),
        };
        if pause >= remaining {
            return Next::Stop(Stop::Deadline);
        }
        Next::RetryAfter(pause)
    }
    // ANCHOR_END: decide
}

/// What the callers share: the retry throttle and the jitter's random numbers.
pub struct Shared {
    pub throttle: Mutex<RetryThrottle>,
    rng: Mutex<StdRng>,
}

impl Shared {
    pub fn new(throttle: RetryThrottle, seed: u64) -> Shared {
        Shared {
            throttle: Mutex::new(throttle),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    fn random(&self) -> f64 {
        self.rng.lock().unwrap().random::<f64>()
    }

    // ANCHOR: budget
    /// Every attempt's result goes into the bucket: a success deposits
    /// `ratio` of a token, a failure withdraws one. The answer: may a failed
    /// call retry now?
    pub fn attempt_ended(&self, ok: bool) -> bool {
        self.throttle.lock().unwrap().record(ok)
    }
    // ANCHOR_END: budget
}

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallResult {
    pub result: Result<(), Failure>,
    /// Attempts made, the first included: the call's amplification.
    pub attempts: u32,
    /// Why a failed call stopped.
    pub stop: Option<Stop>,
}

/// One call: attempts until one succeeds or the rules say stop. `attempt`
/// makes one attempt with the time it is given (what is left of the deadline).
pub async fn call<F, Fut>(
    rules: &RetryRules,
    shared: &Shared,
    deadline: Instant,
    mut attempt: F,
) -> CallResult
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let mut attempts = 0;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return CallResult {
                result: Err(Code::DeadlineExceeded.into()),
                attempts,
                stop: (attempts > 0).then_some(Stop::Deadline),
            };
        }
        attempts += 1;
        let result = attempt(remaining).await;
        let allows = shared.attempt_ended(result.is_ok());
        let Err(failure) = result else {
            return CallResult {
                result,
                attempts,
                stop: None,
            };
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match rules.after_failure(attempts, failure, left, allows, shared.random()) {
            Next::RetryAfter(pause) => sleep(pause).await,
            Next::Stop(stop) => {
                return CallResult {
                    result,
                    attempts,
                    stop: Some(stop),
                };
            }
        }
    }
}

/// Attempts per offered call: 1.0 means no call was retried.
pub fn amplification(attempts: impl IntoIterator<Item = u32>) -> f64 {
    let (calls, total) = attempts
        .into_iter()
        .fold((0u64, 0u64), |(c, t), a| (c + 1, t + a as u64));
    if calls == 0 {
        0.0
    } else {
        total as f64 / calls as f64
    }
}

/// Makes one attempt over one transport; cheap to clone, shared by every call.
#[derive(Clone)]
pub enum Caller {
    Grpc(GreeterClient<Channel>),
    Rest {
        http: reqwest::Client,
        url: String,
        /// HTTP/1.1 only: one permit per connection the pool may open. A call
        /// that finds none free waits for one, inside its deadline, as it
        /// would in any pool with a connection limit.
        connections: Option<Arc<Semaphore>>,
    },
}

impl Caller {
    /// A caller of `server` over `transport`; over HTTP/1.1, with at most
    /// `h1_connections` connections open.
    pub async fn connect(
        transport: Transport,
        server: &Running,
        h1_connections: usize,
    ) -> anyhow::Result<Caller> {
        if transport == Transport::Grpc {
            let channel = Endpoint::from_shared(server.url())?
                .tcp_nodelay(true)
                .connect()
                .await
                .with_context(|| format!("cannot connect to our own server at {}", server.url()))?;
            return Ok(Caller::Grpc(GreeterClient::new(channel)));
        }
        // reqwest builds a TLS configuration even for http:// URLs; it must
        // find the workspace's one crypto provider installed.
        let _ = Arc::unwrap_or_clone(certs::config::provider()).install_default();
        let builder = reqwest::Client::builder().no_proxy().tcp_nodelay(true);
        let (builder, connections) = match transport {
            Transport::RestH1 => (
                builder.http1_only().pool_max_idle_per_host(h1_connections),
                Some(Arc::new(Semaphore::new(h1_connections))),
            ),
            _ => (builder.http2_prior_knowledge(), None),
        };
        Ok(Caller::Rest {
            http: builder.build().context("building the HTTP client")?,
            url: server.greetings_url(),
            connections,
        })
    }

    // ANCHOR: attempt
    /// One attempt, given `remaining` of the call's deadline, which the
    /// server is told: as `grpc-timeout`, or in our REST header.
    pub async fn attempt(&self, name: String, remaining: Duration) -> Result<(), Failure> {
        match self {
            Caller::Grpc(greeter) => {
                let mut request = tonic::Request::new(HelloRequest { name, delay_ms: 0 });
                request.set_timeout(remaining);
                match greeter.clone().say_hello(request).await {
                    Ok(_) => Ok(()),
                    Err(status) => Err(Failure {
                        // tonic reports its own client-side timeout as CANCELLED.
                        code: match status.code() {
                            Code::Cancelled => Code::DeadlineExceeded,
                            code => code,
                        },
                        retry_after: status.get_details_retry_info().and_then(|r| r.retry_delay),
                    }),
                }
            }
            Caller::Rest {
                http,
                url,
                connections,
            } => {
                let deadline = Instant::now() + remaining;
                let _connection = match connections {
                    Some(pool) => match timeout_at(deadline, pool.acquire()).await {
                        Ok(permit) => Some(permit.expect("the semaphore is never closed")),
                        Err(_) => return Err(Code::DeadlineExceeded.into()),
                    },
                    None => None,
                };
                let left = deadline.saturating_duration_since(Instant::now());
                let sent = http
                    .post(url)
                    .header(TIMEOUT_HEADER, left.as_millis().to_string())
                    .json(&GreetingRequest { name, delay_ms: 0 })
                    .timeout(left)
                    .send()
                    .await;
                rest_answer(sent).await
            }
        }
    }
    // ANCHOR_END: attempt
}

/// A REST answer read as a gRPC caller would: the code from the problem's
/// `type` (chapter 7's table), when to come back from `Retry-After`.
async fn rest_answer(sent: Result<reqwest::Response, reqwest::Error>) -> Result<(), Failure> {
    let failed = |e: reqwest::Error| {
        Failure::from(if e.is_timeout() {
            Code::DeadlineExceeded
        } else if e.is_connect() {
            Code::Unavailable
        } else {
            Code::Unknown
        })
    };
    let response = sent.map_err(failed)?;
    if response.status().is_success() {
        // The body is part of the answer, and of the attempt's time.
        return response.bytes().await.map(drop).map_err(failed);
    }
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .map(Duration::from_secs);
    let code = match response.json::<Problem>().await {
        Ok(problem) => problem.code().unwrap_or(Code::Unknown),
        Err(e) if e.is_timeout() => Code::DeadlineExceeded,
        Err(_) => Code::Unknown,
    };
    Err(Failure { code, retry_after })
}
