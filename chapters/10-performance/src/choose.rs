//! `choose_deadline`: measure a method's p99 under a given concurrency and
//! suggest a deadline from it.
//!
//! The load is closed-loop: N workers share one channel (or one HTTP client),
//! and each sends its next call only when the previous one has answered. That is
//! fine for this question, "how long does a call take when N are in flight?",
//! but it is not a load test: when the server slows down, a closed loop slows
//! down with it and sends less, so it understates the tail an open-loop load
//! (chapter 14) would see.

use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

use clap::{Parser, ValueEnum};

use crate::{
    latency::{Caller, Servers},
    stats::Summary,
};

/// Measures p99 of a method under CONCURRENCY calls in flight (closed loop)
/// and suggests a deadline of p99 x HEADROOM, rounded up.
#[derive(Parser, Debug, Clone)]
#[command(name = "choose_deadline", version)]
pub struct Args {
    /// The methods to measure, one after the other
    #[arg(long, value_enum, num_args = 1.., default_values_t = [Method::SayHello, Method::Rest])]
    pub method: Vec<Method>,
    /// Calls in flight at once (workers sharing one channel or client)
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrency: u32,
    /// Measured calls per method
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub calls: u32,
    /// Warm-up calls per method, not counted
    #[arg(long, default_value_t = 50)]
    pub warmup: u32,
    /// The deadline is p99 times this
    #[arg(long, default_value_t = 3.0)]
    pub headroom: f64,
    /// Start both servers in this process on free ports instead of calling a running stack
    #[arg(long)]
    pub spawn: bool,
    /// The gRPC server (ignored with --spawn)
    #[arg(long, default_value = grpc_client::cli::DEFAULT_TARGET)]
    pub grpc: String,
    /// The REST server (ignored with --spawn)
    #[arg(long, default_value = "https://localhost:8443")]
    pub rest: String,
    /// The CA that signed the servers' certificates [default: certs/ca.pem]
    #[arg(long)]
    pub ca: Option<std::path::PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// gRPC greeter.v1.Greeter/SayHello, one channel
    #[value(name = "SayHello")]
    SayHello,
    /// REST POST /v1/greetings, one client (HTTP/2)
    #[value(name = "REST")]
    Rest,
}

impl Method {
    fn label(self) -> &'static str {
        match self {
            Method::SayHello => "gRPC SayHello",
            Method::Rest => "REST POST /v1/greetings",
        }
    }
}

// ANCHOR: suggest
/// `p99 × headroom`, rounded up to the next 1, 2 or 5 times a power of ten
/// milliseconds (never below 1 ms): a number a person can remember and put in
/// a config file, and that is clearly a choice rather than a measurement.
pub fn suggest_deadline_ms(p99_micros: u64, headroom: f64) -> f64 {
    let wanted = (p99_micros as f64 / 1000.0 * headroom).max(1.0);
    let mut decade = 1.0;
    while decade * 10.0 < wanted {
        decade *= 10.0;
    }
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|step| step * decade)
        .find(|value| *value >= wanted)
        .expect("10 x decade is at least wanted")
}
// ANCHOR_END: suggest

/// Runs `warmup + calls` calls with `concurrency` workers on clones of `caller`;
/// returns the measured latencies in microseconds.
pub async fn closed_loop(
    caller: &Caller,
    concurrency: u32,
    warmup: u32,
    calls: u32,
) -> anyhow::Result<Vec<u64>> {
    let next = Arc::new(AtomicU32::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (caller, next) = (caller.clone(), next.clone());
        workers.spawn(async move {
            let mut mine = Vec::new();
            // Each worker takes the next call number until none are left.
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= warmup + calls {
                    break;
                }
                let took = caller.call().await?;
                if k >= warmup {
                    mine.push(took.as_micros() as u64);
                }
            }
            anyhow::Ok(mine)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = workers.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

/// The program: measure each method in turn and suggest its deadline.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.headroom >= 1.0,
        "--headroom must be at least 1 (got {}): a deadline below p99 fails more than 1% of calls on purpose",
        args.headroom
    );
    let ca = args.ca.clone().unwrap_or_else(program::default_ca);
    let (_stack, servers) = if args.spawn {
        let (stack, servers) = Servers::spawn_stack(&program::certs_dir(), ca).await?;
        println!("servers started in this process (--spawn), on loopback");
        (Some(stack), servers)
    } else {
        let servers = Servers::new(args.grpc.clone(), args.rest.clone(), ca)?;
        println!("servers: {} and {}", servers.grpc_url, servers.rest_url);
        (None, servers)
    };
    println!(
        "closed loop: {} workers, each sends its next call when the last one answered; {} calls per method after {} warm-up\n",
        args.concurrency, args.calls, args.warmup
    );
    for method in &args.method {
        let caller = match method {
            Method::SayHello => Caller::grpc(&servers.grpc_url, &servers.ca).await?,
            Method::Rest => Caller::rest(&servers.rest_url, &servers.ca, false)?,
        };
        let samples = closed_loop(&caller, args.concurrency, args.warmup, args.calls).await?;
        let s = Summary::of(&samples).ok_or_else(|| anyhow::anyhow!("no calls were measured"))?;
        let deadline = suggest_deadline_ms(s.p99, args.headroom);
        println!(
            "{:<24} n={} p50={:.3}ms p95={:.3}ms p99={:.3}ms max={:.3}ms",
            method.label(),
            s.n,
            s.p50 as f64 / 1000.0,
            s.p95 as f64 / 1000.0,
            s.p99 as f64 / 1000.0,
            s.max as f64 / 1000.0
        );
        println!(
            "  suggested deadline: {deadline} ms = p99 {:.3} ms x headroom {} = {:.3} ms, rounded up to 1-2-5 steps",
            s.p99 as f64 / 1000.0,
            args.headroom,
            s.p99 as f64 / 1000.0 * args.headroom
        );
        let over = samples
            .iter()
            .filter(|m| **m as f64 > deadline * 1000.0)
            .count();
        println!("  {over} of {} measured calls took longer than that", s.n);
    }
    println!(
        "\nThese are loopback figures for a call that does no work. Measure where the callers are, under their real load, and set one deadline per method."
    );
    Ok(())
}
