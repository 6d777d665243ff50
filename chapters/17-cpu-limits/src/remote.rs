//! The experiment across two machines, as the grpc-java report ran it: the
//! server alone in a pod (`cpu_limits serve`, `deploy/k8s/`), the generator
//! in another pod on another node (`cpu_limits --target ... --target-metrics
//! ...`). The generator cannot read the server's cgroup from there, so the
//! server reads its own, from the inside, and serves it with its CPU time as
//! Prometheus text; the generator scrapes it before and after each cell.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, bail};
use program::proc::{self, Pid};
use proto::greeter::v1::greeter_server;

use crate::{config::Arm, server::Work};

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Where to answer gRPC calls (plaintext HTTP/2)
    #[arg(long, default_value = "0.0.0.0:50051")]
    pub addr: SocketAddr,
    /// Where to serve Prometheus text metrics at /metrics: the process's CPU
    /// time, its cgroup's quota and throttling counts, what it sees
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub metrics_addr: SocketAddr,
    /// The runtime: ct, auto or mtN (CFS burst is the platform's to set,
    /// not the server's)
    #[arg(long, default_value = "auto")]
    pub arm: Arm,
    /// The CPU time each call's handler spends
    #[arg(long, default_value = "1ms", value_parser = program::duration::parse)]
    pub work: Duration,
}

/// What the server is, for its metrics.
#[derive(Debug, Clone)]
struct Identity {
    arm: Arm,
    workers: usize,
    parallelism: usize,
    cpus_allowed: String,
}

// ANCHOR: metrics
/// The metrics page: the runtime, the CPU time, and the throttling counts
/// under the names cAdvisor gives a container's, so that the same queries
/// work on a cluster's own Prometheus.
fn metrics(me: &Identity) -> String {
    let cpu = proc::cpu_ns(Pid::This) as f64 / 1e9;
    let mut page = format!(
        "# TYPE cpu_limits_server_info gauge\n\
         cpu_limits_server_info{{arm=\"{}\",workers=\"{}\",available_parallelism=\"{}\",cpus_allowed=\"{}\"}} 1\n\
         # TYPE process_cpu_seconds_total counter\n\
         process_cpu_seconds_total {cpu}\n",
        me.arm, me.workers, me.parallelism, me.cpus_allowed
    );
    // Outside a cgroup with the cpu controller there is nothing more to say.
    if let Ok((stat, quota)) = harness::pod::own_limits() {
        page.push_str(&stat.prometheus());
        if let Some((quota, period)) = quota {
            page.push_str(&format!(
                "# TYPE cpu_limits_quota_cpus gauge\ncpu_limits_quota_cpus {}\n",
                quota as f64 / period as f64
            ));
        }
    }
    page
}
// ANCHOR_END: metrics

/// `cpu_limits serve`: the server until Ctrl-C or SIGTERM.
pub fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    if args.arm.burst {
        bail!(
            "--arm {} is refused: a pod's CFS burst is set by the platform, not by the server; \
             give the runtime alone (ct, auto or mtN)",
            args.arm
        );
    }
    let runtime = args.arm.runtime().context("cannot build the runtime")?;
    let me = Identity {
        arm: args.arm,
        workers: runtime.metrics().num_workers(),
        parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpus_allowed: proc::cpus_allowed(),
    };
    runtime.block_on(async {
        let calls = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {} for calls", args.addr))?;
        let page = tokio::net::TcpListener::bind(args.metrics_addr)
            .await
            .with_context(|| format!("cannot listen on {} for metrics", args.metrics_addr))?;
        eprintln!(
            "serving calls on {} and metrics on http://{}/metrics: {} ({} workers; \
             available_parallelism {}; CPUs allowed {})",
            calls.local_addr()?,
            page.local_addr()?,
            me.arm,
            me.workers,
            me.parallelism,
            me.cpus_allowed
        );
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let me = me.clone();
                async move { metrics(&me) }
            }),
        );
        tokio::spawn(async move { axum::serve(page, router).await });
        let mut stop = program::stop_signals();
        tonic::transport::Server::builder()
            .add_service(greeter_server::GreeterServer::new(Work(args.work)))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(calls),
                async move {
                    stop.recv().await;
                },
            )
            .await?;
        anyhow::Ok(())
    })
}

/// What one scrape of a server's metrics said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub arm: String,
    pub workers: usize,
    pub parallelism: usize,
    pub cpus_allowed: String,
    pub cpu_ns: u64,
    /// Empty when the server found no cpu cgroup of its own.
    pub throttling: Option<harness::pod::Throttling>,
    pub quota_cpus: Option<f64>,
}

impl Scrape {
    /// Reads the metrics page at `addr` (`HOST:PORT`).
    pub async fn of(client: &reqwest::Client, addr: &str) -> anyhow::Result<Scrape> {
        let url = format!("http://{addr}/metrics");
        let page = client
            .get(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("cannot read the server's metrics at {url}"))?
            .text()
            .await?;
        Scrape::parse(&page).with_context(|| format!("{url} is not a cpu_limits server's page"))
    }

    pub fn parse(page: &str) -> anyhow::Result<Scrape> {
        let mut scrape = Scrape::default();
        let mut throttling = harness::pod::Throttling::default();
        let mut cgroup = false;
        let mut info = false;
        for line in page.lines().filter(|l| !l.starts_with('#')) {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let number: f64 = value
                .parse()
                .with_context(|| format!("bad value in {line:?}"))?;
            match name.split_once('{') {
                Some(("cpu_limits_server_info", labels)) => {
                    info = true;
                    for pair in labels.trim_end_matches('}').split(',') {
                        let Some((key, value)) = pair.split_once('=') else {
                            continue;
                        };
                        let value = value.trim_matches('"');
                        match key {
                            "arm" => scrape.arm = value.to_string(),
                            "workers" => scrape.workers = value.parse()?,
                            "available_parallelism" => scrape.parallelism = value.parse()?,
                            "cpus_allowed" => scrape.cpus_allowed = value.to_string(),
                            _ => {}
                        }
                    }
                }
                Some(_) => {}
                None => match name {
                    "process_cpu_seconds_total" => scrape.cpu_ns = (number * 1e9).round() as u64,
                    "container_cpu_cfs_periods_total" => {
                        cgroup = true;
                        throttling.periods = number as u64;
                    }
                    "container_cpu_cfs_throttled_periods_total" => {
                        throttling.throttled = number as u64
                    }
                    "container_cpu_cfs_throttled_seconds_total" => {
                        throttling.throttled_us = (number * 1e6).round() as u64
                    }
                    "cpu_limits_quota_cpus" => scrape.quota_cpus = Some(number),
                    _ => {}
                },
            }
        }
        if !info {
            bail!("no cpu_limits_server_info line");
        }
        scrape.throttling = cgroup.then_some(throttling);
        Ok(scrape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_reads_back_as_it_was_written() {
        let me = Identity {
            arm: "mt4".parse().unwrap(),
            workers: 4,
            parallelism: 1,
            cpus_allowed: "0-7".into(),
        };
        let scrape = Scrape::parse(&metrics(&me)).unwrap();
        assert_eq!(scrape.arm, "mt4");
        assert_eq!((scrape.workers, scrape.parallelism), (4, 1));
        assert_eq!(scrape.cpus_allowed, "0-7");
        assert!(scrape.cpu_ns > 0);
    }

    #[test]
    fn a_cluster_pods_counters_are_read() {
        let page = "cpu_limits_server_info{arm=\"auto\",workers=\"1\",available_parallelism=\"1\",cpus_allowed=\"0-15\"} 1\n\
                    process_cpu_seconds_total 12.5\n\
                    container_cpu_cfs_periods_total 900\n\
                    container_cpu_cfs_throttled_periods_total 45\n\
                    container_cpu_cfs_throttled_seconds_total 1.25\n\
                    cpu_limits_quota_cpus 1\n";
        let scrape = Scrape::parse(page).unwrap();
        assert_eq!(scrape.cpu_ns, 12_500_000_000);
        assert_eq!(
            scrape.throttling,
            Some(harness::pod::Throttling {
                periods: 900,
                throttled: 45,
                throttled_us: 1_250_000
            })
        );
        assert_eq!(scrape.quota_cpus, Some(1.0));
    }

    #[test]
    fn another_servers_page_is_refused() {
        let e = Scrape::parse("up 1\n").unwrap_err().to_string();
        assert!(e.contains("cpu_limits_server_info"), "{e}");
        assert!(Scrape::parse("cpu_limits_server_info{arm=\"ct\"} x\n").is_err());
    }
}
