//! Empty on purpose: this crate exists for its `Cargo.toml`, which makes every
//! member of the workspace build its dependencies with the same features.
