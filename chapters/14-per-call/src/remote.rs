//! The experiment across two machines, as the grpc-java report ran it: the
//! server alone in a pod (`per_call serve`, `deploy/k8s/`), the generator in
//! another pod on another node (`per_call --target HOST:PORT`). The generator
//! can read neither the server's /proc nor its cgroup from there, so the
//! server reads its own and serves them: `/snapshot` as JSON (what the
//! experiment asks before and after each step, as it asks its own child) and
//! `/metrics` as Prometheus text (what a cluster's Prometheus scrapes).

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::{
    arm::Arm,
    load::rest_client,
    rest::Http,
    server::{Echo, Listen, ServerInfo, Snapshot, bind, info, snapshot},
};

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The runtime and handler, FLAVOUR-HANDLER (see --arms)
    #[arg(long, default_value = "ct-inline")]
    pub arm: Arm,
    /// Where to answer gRPC calls and streams (plaintext HTTP/2)
    #[arg(long, default_value = "0.0.0.0:50051")]
    pub addr: SocketAddr,
    /// Where to answer REST over HTTP/1.1
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub h1_addr: SocketAddr,
    /// Where to answer REST over HTTP/2 (h2c)
    #[arg(long, default_value = "0.0.0.0:8081")]
    pub h2_addr: SocketAddr,
    /// Where to serve /snapshot (JSON, for the experiment's --target) and
    /// /metrics (Prometheus text)
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub metrics_addr: SocketAddr,
}

/// What `/snapshot` answers: the server's configuration and its totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub info: ServerInfo,
    pub snapshot: Snapshot,
}

/// `/metrics`: the counters a dashboard would draw, the cgroup's under the
/// names cAdvisor gives a container's.
fn metrics(report: &Report) -> String {
    let (i, s) = (&report.info, &report.snapshot);
    let mut page = format!(
        "# TYPE per_call_server_info gauge\n\
         per_call_server_info{{arm=\"{}\",workers=\"{}\",cpus_allowed=\"{}\"}} 1\n\
         # TYPE process_cpu_seconds_total counter\n\
         process_cpu_seconds_total {}\n\
         # TYPE per_call_units_total counter\n\
         per_call_units_total{{shape=\"unary\"}} {}\n\
         per_call_units_total{{shape=\"stream\"}} {}\n\
         per_call_units_total{{shape=\"rest\"}} {}\n\
         # TYPE per_call_listen_overflows_total counter\n\
         per_call_listen_overflows_total {}\n",
        i.arm,
        i.workers,
        i.cpus_allowed,
        s.cpu_ns as f64 / 1e9,
        s.unary_calls,
        s.messages,
        s.rest_requests,
        s.listen_overflows
    );
    if let Some(t) = &s.throttling {
        page.push_str(&t.prometheus());
    }
    page
}

/// `per_call serve`: one arm's server until Ctrl-C or SIGTERM.
pub fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let arm = args.arm;
    let runtime = arm.runtime().context("cannot build the runtime")?;
    let echo = Echo {
        handler: arm.handler,
        counts: Arc::default(),
    };
    let counts = echo.counts.clone();
    let on = Listen {
        grpc: args.addr,
        h1: args.h1_addr,
        h2: args.h2_addr,
    };
    let mut stop = {
        let _inside = runtime.enter();
        program::stop_signals()
    };
    let (addr, rest, grpc) = runtime.block_on(bind(echo, on, async move {
        stop.recv().await;
    }))?;
    let page = runtime
        .block_on(tokio::net::TcpListener::bind(args.metrics_addr))
        .with_context(|| format!("cannot listen on {} for metrics", args.metrics_addr))?;
    let me = info(arm, &runtime, addr, rest);
    eprintln!(
        "serving gRPC on {addr}, REST on {} (HTTP/1.1) and {} (HTTP/2), and the server's \
         counts on http://{}/snapshot: {arm} (runtime workers: {}; CPUs allowed {})",
        rest.h1,
        rest.h2,
        page.local_addr()?,
        me.workers,
        me.cpus_allowed
    );
    let handle = runtime.handle().clone();
    let report = move || Report {
        info: me.clone(),
        snapshot: snapshot(&counts, &handle),
    };
    let read = report.clone();
    let router = axum::Router::new()
        .route(
            "/snapshot",
            axum::routing::get(move || {
                let report = read.clone();
                async move { axum::Json(report()) }
            }),
        )
        .route(
            "/metrics",
            axum::routing::get(move || {
                let report = report.clone();
                async move { metrics(&report()) }
            }),
        );
    runtime.spawn(async move { axum::serve(page, router).await });
    runtime.block_on(grpc)?;
    Ok(())
}

/// How long the experiment waits for a `--target` that does not answer yet.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A server started elsewhere with `per_call serve`, as the experiment
/// reaches it.
#[derive(Debug, Clone)]
pub struct Remote {
    client: reqwest::Client,
    url: String,
}

impl Remote {
    /// Asks the server at `target` (its metrics address, `HOST:PORT`) what it
    /// is; its gRPC and REST ports are then reached at the same host. Waits
    /// up to [`PATIENCE`] for a server that is still starting.
    pub async fn connect(target: &str) -> anyhow::Result<(Remote, ServerInfo)> {
        let remote = Remote {
            // One idle connection, kept: a question every step.
            client: rest_client(Http::H1, 1)?,
            url: format!("http://{target}/snapshot"),
        };
        let given_up = tokio::time::Instant::now() + PATIENCE;
        let mut said = false;
        let (mut info, ip) = loop {
            match remote.ask().await {
                Ok((report, ip)) => break (report.info, ip),
                Err(e) if tokio::time::Instant::now() < given_up => {
                    if !std::mem::replace(&mut said, true) {
                        eprintln!("waiting for the server at {target}: {e:#}");
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e.context(format!("no server at --target {target}"))),
            }
        };
        // ANCHOR: connect
        // The server says where it listens as it bound (0.0.0.0 in a pod);
        // the ports are its, the address is the one that answered.
        for addr in [&mut info.addr, &mut info.rest.h1, &mut info.rest.h2] {
            addr.set_ip(ip);
        }
        // ANCHOR_END: connect
        Ok((remote, info))
    }

    /// The server's report, and the address that answered it.
    async fn ask(&self) -> anyhow::Result<(Report, IpAddr)> {
        let answer = self
            .client
            .get(&self.url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("cannot read the server's counts at {}", self.url))?;
        let ip = answer
            .remote_addr()
            .with_context(|| format!("{} answered from no address", self.url))?
            .ip();
        let body = answer.bytes().await?;
        let report = serde_json::from_slice(&body).with_context(|| {
            format!(
                "{} is not a `per_call serve` server's snapshot (got {} bytes)",
                self.url,
                body.len()
            )
        })?;
        Ok((report, ip))
    }

    /// The server's totals so far.
    pub async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        Ok(self.ask().await?.0.snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_page_names_every_counter_once() {
        let report = Report {
            info: ServerInfo {
                addr: "127.0.0.1:1".parse().unwrap(),
                rest: Default::default(),
                pid: 7,
                arm: "ct-inline".into(),
                workers: 1,
                named_worker_threads: 0,
                threads: 2,
                cpus_allowed: "0".into(),
                quota_cpus: Some(1.0),
            },
            snapshot: Snapshot {
                unary_calls: 3,
                cpu_ns: 1_500_000_000,
                throttling: Some(harness::pod::Throttling {
                    periods: 10,
                    throttled: 4,
                    throttled_us: 250_000,
                }),
                ..Snapshot::default()
            },
        };
        let page = metrics(&report);
        assert!(page.contains("process_cpu_seconds_total 1.5\n"), "{page}");
        assert!(
            page.contains("per_call_units_total{shape=\"unary\"} 3\n"),
            "{page}"
        );
        assert!(
            page.contains("container_cpu_cfs_throttled_periods_total 4\n"),
            "{page}"
        );
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), report);
    }
}
