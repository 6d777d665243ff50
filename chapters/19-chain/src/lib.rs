//! Chapter 19: retries across a chain.
//!
//! One hop that retries multiplies its backend's load by at most its
//! attempts per call; a chain of hops that each retry multiplies the
//! multipliers. The chapter runs such a chain, users -> frontend -> middle ->
//! leaf, each hop a process of its own, halves the leaf's capacity for a few
//! seconds, and watches whether the retries outlive the trigger:
//!
//! - [`throttle`]: the three throttles behind one interface: the SRE book's
//!   adaptive throttling, gRFC A6's retry throttling, tower's retry budget.
//! - [`a6`]: what A6's `maxTokens` and `tokenRatio` allow, in attempts per
//!   call, as formulas, a simulation and a table.
//! - [`hop`]: one layer's client: attempts, throttle, deadline, counts.
//! - [`servers`]: the frontend, the middle and the leaf (chapter 13's pool).
//! - [`run`]: the experiment; [`render`] its tables, report and plots.
pub mod a6;
pub mod hop;
pub mod render;
pub mod run;
pub mod servers;
pub mod throttle;
