// Cargo unifies a crate's build-dependencies only when it has a build script;
// this one does nothing, and lets the [build-dependencies] section count.
fn main() {}
