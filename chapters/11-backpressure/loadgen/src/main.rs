use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    program::exit_code(loadgen::cli::run(program::args::<loadgen::cli::Args>()).await)
}
