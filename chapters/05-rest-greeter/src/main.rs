//! `cargo run -p rest-server`: the Greeter over REST on https://127.0.0.1:8443.

use std::process::ExitCode;

use prometheus_client::registry::Registry;
use rest_server::{BoundServer, Cli};
use tokio::sync::oneshot;

#[tokio::main]
async fn main() -> ExitCode {
    program::init_tracing();
    let cli = program::args::<Cli>();
    let result = async {
        let (listening, ready) = oneshot::channel();
        let mut server = BoundServer::bind(&cli.server)
            .await
            .map_err(|e| certs::ListenError::name_setting(e, "--addr or REST_ADDR"))?
            .notify_when_listening(listening);
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
