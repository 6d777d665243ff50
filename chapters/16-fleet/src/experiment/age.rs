//! Connection age: two replicas behind a layer-4 balancer, `clients` clients
//! with one connection each, and a third replica added to the balancer a
//! third of the way in. Without a maximum connection age the clients keep
//! the connections they have, and the new replica gets nothing; with one,
//! each connection is sent GOAWAY when it is `max_age` old, the client
//! connects again, and the balancer hands some of the new connections to
//! the new replica. A third arm adds tonic's `max_connection_age_grace`,
//! which in tonic 0.14.9 closes each connection at age + grace without a
//! GOAWAY first (see `replica.rs`).

use harness::Folder;
use tokio::time::{Instant, sleep_until};

use super::{CallRow, Config, EventRow, load, ms, start_all};
use crate::{
    client::{Caller, endpoint},
    lb::Balancer,
    replica::Replica,
};

pub const CALLS: &str = "age-calls.csv";
pub const EVENTS: &str = "age-events.csv";
pub const COUNTS: &str = "age-counts.csv";

/// Calls the replicas started in one arm: beside the client's count, it
/// tells whether a failed call ever reached a server.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub arm: String,
    pub repeat: u32,
    pub server_started: u64,
}

/// The arms: no maximum age, `max_age`, and `max_age` with tonic's grace.
pub const ARMS: [&str; 3] = ["no_age", "max_age", "max_age_grace"];

pub async fn run(config: &Config, folder: &Folder) -> anyhow::Result<()> {
    let (mut calls, mut events, mut counts) = (Vec::new(), Vec::new(), Vec::new());
    for repeat in 0..config.repeats {
        for arm in config.order(&ARMS, repeat) {
            println!("age: {arm} (repeat {} of {})", repeat + 1, config.repeats);
            let (c, e, started) = one(config, arm, repeat).await?;
            calls.extend(c);
            events.extend(e);
            counts.push(Counts {
                arm: arm.into(),
                repeat,
                server_started: started,
            });
        }
    }
    folder.write_csv(CALLS, &calls)?;
    folder.write_csv(EVENTS, &events)?;
    folder.write_csv(COUNTS, &counts)?;
    Ok(())
}

async fn one(
    config: &Config,
    arm: &str,
    repeat: u32,
) -> anyhow::Result<(Vec<CallRow>, Vec<EventRow>, u64)> {
    let with_age = |mut spec: crate::replica::Spec| {
        if arm != "no_age" {
            spec.max_age = Some(config.max_age);
        }
        if arm == "max_age_grace" {
            spec.age_grace = Some(config.age_grace);
        }
        spec
    };
    let replicas = start_all(vec![with_age(config.spec(0)), with_age(config.spec(1))]).await?;
    let upstreams: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let balancer = Balancer::start("127.0.0.1:0".parse()?, &upstreams).await?;
    // Each client its own channel, so its own connection.
    let endpoint = endpoint(balancer.addr(), &config.ca())?;
    let clients: Vec<Caller> = (0..config.clients)
        .map(|_| Caller::new(endpoint.connect_lazy()))
        .collect();

    let calls = tokio::spawn({
        let config = config.clone();
        let arm = arm.to_string();
        async move {
            load(
                &config,
                (&arm, repeat),
                config.work_ms,
                move |index, call| {
                    let mut client = clients[index as usize % clients.len()].clone();
                    async move { tower::Service::call(&mut client, call).await }
                },
            )
            .await
        }
    });
    let start = Instant::now();
    sleep_until(start + added_at(config)).await;
    let added = Replica::start(with_age(config.spec(2))).await?;
    balancer.add(added.addr);
    let event = EventRow {
        arm: arm.into(),
        repeat,
        replica: added.spec.name.clone(),
        event: "added".into(),
        at_ms: ms(start.elapsed()),
    };
    let calls = calls.await?;
    let started = replicas
        .iter()
        .chain([&added])
        .map(|r| r.stats().started.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    Ok((calls, vec![event], started))
}

/// When the third replica joins: a third of the way in.
pub fn added_at(config: &Config) -> std::time::Duration {
    config.duration / 3
}
