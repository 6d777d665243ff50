//! `cargo run -p grpc-server`: the Greeter over gRPC on 127.0.0.1:50051.

use std::process::ExitCode;

use grpc_server::{BoundServer, Cli};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;

#[tokio::main]
async fn main() -> ExitCode {
    program::init_tracing();
    let cli = program::args::<Cli>();
    let result = async {
        let (listening, ready) = oneshot::channel();
        let mut server = BoundServer::bind(&cli.server)
            .await
            .map_err(|e| certs::ListenError::name_setting(e, "--addr or GRPC_ADDR"))?
            .notify_when_listening(listening);
        if cli.trace {
            server = server.with_tracing();
        }
        if let Some(addr) = cli.metrics_addr {
            let mut registry = Registry::default();
            server = server.with_metrics(&mut registry);
            grpc_server::metrics::serve(addr, registry).await?;
        }
        tokio::try_join!(
            server.serve(program::shutdown_signal()),
            program::ready_file::publish_when_listening(cli.ready_file.as_deref(), [ready]),
        )?;
        Ok(())
    };
    program::exit_code(result.await)
}
