//! `cargo run` at the root of the workspace starts the whole stack (chapter 9).
fn main() -> std::process::ExitCode {
    program::exit_code(stack::main())
}
