//! The measurement: for each arm a fresh server process, configured by a
//! typed [`ServeConfig`], and one open-loop `Ingest` call from this process.
//! Each arm's folder ends up with the server's records and the client's.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use certs::{Pki, TlsArgs};
use grpc_client::channel::{Target, endpoint};
use harness::{
    Folder,
    child::{Child, Spawn},
    live::Live,
    records::Growing,
};
use loadgen::{
    Counters, Schedule, Timer,
    ingest::{SENDS, ingest},
};
use program::duration::Show;

use super::{ARMS, Config};
use crate::{
    server::{PolicyName, ServeConfig},
    service::Policy,
};

/// How the client's call went, beside its `sends.csv`.
pub const CLIENT: &str = "client.json";

pub async fn run(config: &Config, folder: &Folder, live: Option<&Live>) -> anyhow::Result<()> {
    let pki = Pki::new(&config.certs_dir);
    pki.generate(false)?;
    let schedule = Schedule::constant(config.rate, config.duration);
    println!(
        "{} sends of {} bytes ({}/s for {}), worker plan {}, K = {}",
        schedule.slots().len(),
        config.message_bytes,
        config.rate,
        Show(config.duration),
        config.plan,
        config.capacity
    );
    for policy in ARMS {
        run_arm(config, folder, policy, &schedule, &pki, live).await?;
    }
    Ok(())
}

pub fn arm_name(policy: PolicyName) -> &'static str {
    match policy {
        PolicyName::Unbounded => "unbounded",
        PolicyName::Reserve => "reserve",
    }
}

// ANCHOR: arm
/// One arm: a fresh server process (its memory is its own to measure) that
/// serves one call and stops, and the open-loop call against it.
async fn run_arm(
    config: &Config,
    folder: &Folder,
    policy: PolicyName,
    schedule: &Schedule,
    pki: &Pki,
    live: Option<&Live>,
) -> anyhow::Result<()> {
    let name = arm_name(policy);
    let arm = folder.sub(name)?;
    if let Some(live) = live {
        live.watch(name, arm.path());
    }
    let serve = ServeConfig {
        addr: "127.0.0.1:0".parse()?,
        tls: TlsArgs::in_dir(&config.certs_dir),
        policy: match policy {
            PolicyName::Unbounded => Policy::Unbounded,
            PolicyName::Reserve => Policy::Reserve {
                capacity: config.capacity,
                budget: config.capacity,
            },
        },
        plan: config.plan.clone(),
        workers: 1,
        sample_every: Duration::from_millis(50),
        record: arm.path().to_path_buf(),
        calls: Some(1),
        metrics_addr: None,
    };
    let exe = std::env::current_exe()?;
    let log = Some(arm.join("server.log"));
    let server = Child::start(
        &exe,
        &serve,
        &Spawn {
            log,
            ..Spawn::default()
        },
    )
    .await?;
    let addr = server.ready.addr;
    println!("\n{name}: server on {addr}");
    let target = Target {
        url: format!("https://localhost:{}", addr.port()),
        ca: pki.ca_cert(),
        identity: None,
    };
    let channel = endpoint(&target)?.connect().await?;
    let counters = Arc::new(Counters::default());
    let progress = tokio::spawn(loadgen::cli::progress(counters.clone()));
    // Every slot's record goes to sends.csv as it ends, not only at the end.
    let sends = Growing::create(&arm.join(SENDS))?;
    let call = ingest(
        channel,
        &schedule.slots(),
        Timer::Precise,
        config.message_bytes,
        1,
        &counters,
        Some(&sends),
    )
    .await;
    progress.abort();
    sends.finish()?;
    server
        .finish(Duration::from_secs(60))
        .await
        .with_context(|| format!("the {name} server, after its call"))?;
    arm.write_json(CLIENT, &call.record())
}
// ANCHOR_END: arm
