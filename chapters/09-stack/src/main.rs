//! `cargo run -p stack`: the same as `cargo run` at the workspace root.
fn main() -> std::process::ExitCode {
    program::exit_code(stack::main())
}
