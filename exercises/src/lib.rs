//! Exercises that change the workshop's mechanisms: each module is a small
//! piece of a chapter's code with one rule left out. Edit the module, then run
//! its tests; they fail with a message that says what is still missing. What
//! an exercise uses but leaves alone is in `given/`, once for both versions.
//!
//! ```text
//! cargo test --manifest-path exercises/Cargo.toml --test ch11
//! ```
//!
//! The solutions are in `solutions/`, built in place of the starters with
//! `--features solutions`; CI runs the same tests against both and checks
//! that every starter fails and every solution passes.

#[cfg(not(feature = "solutions"))]
pub mod ch04;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch04.rs"]
pub mod ch04;

#[cfg(not(feature = "solutions"))]
pub mod ch05;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch05.rs"]
pub mod ch05;

#[cfg(not(feature = "solutions"))]
pub mod ch06;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch06.rs"]
pub mod ch06;

#[cfg(not(feature = "solutions"))]
pub mod ch07;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch07.rs"]
pub mod ch07;

#[cfg(not(feature = "solutions"))]
pub mod ch08;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch08.rs"]
pub mod ch08;

#[cfg(not(feature = "solutions"))]
pub mod ch10;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch10.rs"]
pub mod ch10;

#[cfg(not(feature = "solutions"))]
pub mod ch11;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch11.rs"]
pub mod ch11;

#[cfg(not(feature = "solutions"))]
pub mod ch12;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch12.rs"]
pub mod ch12;

#[cfg(not(feature = "solutions"))]
pub mod ch13;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch13.rs"]
pub mod ch13;

#[cfg(not(feature = "solutions"))]
pub mod ch14;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch14.rs"]
pub mod ch14;

#[cfg(not(feature = "solutions"))]
pub mod ch15;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch15.rs"]
pub mod ch15;

#[cfg(not(feature = "solutions"))]
pub mod ch16;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch16.rs"]
pub mod ch16;

#[cfg(not(feature = "solutions"))]
pub mod ch17;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch17.rs"]
pub mod ch17;

#[cfg(not(feature = "solutions"))]
pub mod ch18;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch18.rs"]
pub mod ch18;

#[cfg(not(feature = "solutions"))]
pub mod ch19;
#[cfg(feature = "solutions")]
#[path = "../solutions/ch19.rs"]
pub mod ch19;

/// What an exercise uses but does not ask the reader to change, written once
/// for its starter and its solution.
pub mod given {
    pub mod ch04;
    pub mod ch05;
    pub mod ch07;
    pub mod ch18;
    pub mod ch19;
}
