//! Metrics while the experiment runs (`--metrics-addr`): for the cell
//! running now, calls by fate (served, wasted, dropped at dequeue, shed at
//! the door) and the pool's busy workers and waiting calls. Each cell is a
//! fresh server, so its series carry the cell's `transport`, `policy` and
//! `load` labels and start from zero; a finished cell's series leave the
//! scrape.

use std::{
    fmt,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::{
    config::{Policy, Transport},
    server::{Fate, Pool},
};

/// The cell whose server the scrape reads.
#[derive(Clone, Default)]
pub struct Watch(Arc<Mutex<Option<Cell>>>);

struct Cell {
    transport: String,
    policy: String,
    load: String,
    pool: Arc<Pool>,
}

impl Watch {
    /// From now on, scrapes read `pool`, the server of this cell.
    pub fn show(&self, transport: Transport, policy: Policy, load: f64, pool: Arc<Pool>) {
        *self.0.lock().unwrap() = Some(Cell {
            transport: transport.to_string(),
            policy: policy.to_string(),
            load: load.to_string(),
            pool,
        });
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Watch")
    }
}

/// Serves the metrics of whichever cell [`Watch::show`] was last given.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<(Watch, SocketAddr)> {
    let watch = Watch::default();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(watch.clone()));
    let addr = grpc_server::metrics::serve(addr, registry).await?;
    Ok((watch, addr))
}

fn fate_name(fate: Fate) -> &'static str {
    match fate {
        Fate::Served => "served",
        Fate::Wasted => "wasted",
        Fate::Dropped => "dropped",
        Fate::Shed => "shed",
    }
}

impl Collector for Watch {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let cell = self.0.lock().unwrap();
        let Some(cell) = cell.as_ref() else {
            return Ok(());
        };
        let transport = ("transport", cell.transport.as_str());
        let policy = ("policy", cell.policy.as_str());
        let load = ("load", cell.load.as_str());
        let mut calls = e.encode_descriptor(
            "overload_calls",
            "Calls that have ended inside the server, by fate",
            None,
            MetricType::Counter,
        )?;
        for (fate, n) in cell.pool.fates() {
            let labels = [transport, policy, load, ("fate", fate_name(fate))];
            ConstCounter::new(n as u64).encode(calls.encode_family(&labels)?)?;
        }
        let (busy, waiting) = cell.pool.load();
        for (name, help, value) in [
            ("overload_busy_workers", "Workers on a call now", busy),
            ("overload_waiting_calls", "Calls in the queue now", waiting),
        ] {
            let mut gauge = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(value as i64)
                .encode(gauge.encode_family(&[transport, policy, load])?)?;
        }
        Ok(())
    }
}
