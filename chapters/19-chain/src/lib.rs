//! Chapter 19: retries across a chain.
//!
//! One hop that retries multiplies its backend's load by at most its
//! attempts per call; a chain of hops that each retry multiplies the
//! multipliers. The chapter will run such a chain and put the standard
//! client-side retry throttles on it. For now the crate holds the throttles
//! and the arithmetic, each checked on its own:
//!
//! - [`throttle`]: the three throttles behind one interface: the SRE book's
//!   adaptive throttling, gRFC A6's retry throttling, tower's retry budget.
//! - [`a6`]: what A6's `maxTokens` and `tokenRatio` allow, in attempts per
//!   call, as formulas, a simulation and a table.
//!
//! Still to come: the chain itself (the servers, the client that retries
//! through a throttle), the experiment and its report.
pub mod a6;
pub mod throttle;
