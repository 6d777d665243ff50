//! Chapter 18's exercise, the part it gives: the server's ping policy, what
//! it answers a PING with, and the interval A8 asks of pings while no call
//! is open.

use std::time::Duration;

/// How often a server lets its clients ping (gRFC A8's enforcement policy;
/// grpc-go's `keepalive.EnforcementPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingPolicy {
    /// The shortest interval between pings that is not a strike while calls
    /// are open (grpc-go's `MinTime`, 5 min by default).
    pub min_time: Duration,
    /// Whether pings with no call open are held to `min_time` too; if not,
    /// they are held to [`NO_CALLS_MIN_TIME`] (grpc-go's
    /// `PermitWithoutStream`, false by default).
    pub permit_without_calls: bool,
    /// The strikes the server bears: one more is answered with GOAWAY
    /// (`ENHANCE_YOUR_CALM`, "too_many_pings"); grpc-go's bears 2.
    pub max_strikes: u32,
}

/// What the server answers a PING with.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Verdict {
    /// A PING ACK: the ping is within the policy, or within the strikes it
    /// bears.
    Pong,
    /// A GOAWAY that closes the connection: too many pings.
    GoAway,
}

/// The interval between pings with no call open, for a server that does not
/// permit them (`permit_without_calls` false): closer pings are strikes.
/// grpc-go's `defaultPingTimeout`.
pub const NO_CALLS_MIN_TIME: Duration = Duration::from_secs(2 * 60 * 60);
