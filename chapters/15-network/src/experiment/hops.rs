//! Deadlines across hops: client -> frontend -> backend, with the round trip
//! on both hops.
//!
//! `grpc-timeout` carries what is *left*, as a duration: each hop's clock
//! starts when the request arrives, so the time the request spent in transit
//! is not subtracted by anyone. Chapter 10's frontend keeps a margin for its
//! own work; here the backend notes the budget it was given and when the
//! request arrived, and the client knows when it sent it, so the two can be
//! compared: how long the backend may still work after its caller has given up.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use certs::TlsListener;
use grpc_server::lifetime::grpc_timeout;
use harness::Folder;
use perf::propagation::{Frontend, serve};
use proto::greeter::v1::{
    HelloReply, HelloRequest, greeter_client::GreeterClient, greeter_server::Greeter,
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::{Config, Target, ms, url};
use crate::proxy::Path;

/// When a call arrived, and the `grpc-timeout` it carried.
type Arrival = (Instant, Option<std::time::Duration>);

/// A backend that answers at once and notes what each call arrived with.
#[derive(Clone, Default)]
struct Probe {
    seen: Arc<Mutex<Vec<Arrival>>>,
}

#[tonic::async_trait]
impl Greeter for Probe {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let arrived = Instant::now();
        let budget = grpc_timeout(request.metadata());
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((arrived, budget));
        Ok(Response::new(HelloReply {
            message: format!("Hello, {}!", request.into_inner().name),
        }))
    }
}

/// One call through both hops.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hop {
    pub rtt_ms: f64,
    pub i: u32,
    pub deadline_ms: f64,
    /// The `grpc-timeout` the backend received.
    pub backend_budget_ms: f64,
    /// What was really left of the client's deadline when the request
    /// reached the backend.
    pub left_at_backend_ms: f64,
    /// How long after the client gave up the backend's deadline ends
    /// (negative: before).
    pub overshoot_ms: f64,
}

async fn listener(certs_dir: &std::path::Path) -> anyhow::Result<(TlsListener, SocketAddr)> {
    let tls = certs::server_config(&certs::TlsArgs::in_dir(certs_dir), false, &[b"h2"])?;
    let listener = TlsListener::bind("127.0.0.1:0".parse()?, tls).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

pub(super) async fn run(config: &Config, target: &Target, folder: &Folder) -> anyhow::Result<()> {
    let mut hops = Vec::new();
    for &rtt in &config.rtts {
        let probe = Probe::default();
        let (backend_listener, backend_addr) = listener(&config.certs_dir).await?;
        let backend = tokio::spawn(serve(
            backend_listener,
            probe.clone(),
            false,
            std::future::pending(),
        ));
        let to_backend = Target::proxy(backend_addr, Path::rtt(rtt)).await?;
        let endpoint = |url| {
            grpc_client::endpoint(&grpc_client::Target {
                url,
                ca: target.ca.clone(),
                identity: None,
            })
        };
        let frontend = Frontend::new(
            endpoint(super::url(&to_backend))?.connect_lazy(),
            config.margin,
        );
        let (frontend_listener, frontend_addr) = listener(&config.certs_dir).await?;
        let frontend = tokio::spawn(serve(
            frontend_listener,
            frontend,
            false,
            std::future::pending(),
        ));
        let to_frontend = Target::proxy(frontend_addr, Path::rtt(rtt)).await?;
        let mut client = GreeterClient::new(endpoint(url(&to_frontend))?.connect().await?);

        for i in 0..config.warmup + config.calls {
            let mut request = Request::new(HelloRequest {
                name: "Ada".into(),
                delay_ms: 0,
            });
            // Warm-up calls set up both connections (three round trips
            // each), which a deadline of the size measured here may not cover.
            if i >= config.warmup {
                request.set_timeout(config.deadline);
            }
            let sent = Instant::now();
            client.say_hello(request).await?;
            let seen = probe.seen.lock().unwrap_or_else(|e| e.into_inner()).pop();
            if i < config.warmup {
                continue;
            }
            let Some((arrived, Some(budget))) = seen else {
                anyhow::bail!("the backend saw no deadline: the frontend did not pass one on");
            };
            let left = config.deadline.as_secs_f64() - (arrived - sent).as_secs_f64();
            hops.push(Hop {
                rtt_ms: ms(rtt),
                i: i - config.warmup,
                deadline_ms: ms(config.deadline),
                backend_budget_ms: ms(budget),
                left_at_backend_ms: left * 1e3,
                overshoot_ms: ms(budget) - left * 1e3,
            });
        }
        let last = hops.last().expect("at least one call");
        println!(
            "  RTT {:>3} ms per hop: the backend got {:.1} ms, {:.1} ms were left",
            ms(rtt),
            last.backend_budget_ms,
            last.left_at_backend_ms
        );
        backend.abort();
        frontend.abort();
    }
    folder.write_csv("hops.csv", &hops)
}
