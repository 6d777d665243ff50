//! `cargo run -p middlebox -- --help`: chapter 18's middlebox and experiment.

fn main() -> std::process::ExitCode {
    program::exit_code(Ok(()))
}
