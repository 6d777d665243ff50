//! The ingest server's own metrics, beside the gRPC ones every server has:
//! the gate's `Q`, `Q + R`, `B` and `K`, the work done and the waiting, read
//! from the [`Ingestor`] at each scrape. Reading at scrape time means no
//! bookkeeping on the message path, and a scrape sees what the experiment's
//! sampler would see at that instant. Cancelled calls are the gRPC layer's
//! `grpc_server_handled_total{grpc_service="ingest.v1.Ingest",grpc_code="Canceled"}`.

use std::{fmt, sync::Arc, time::Duration};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::service::{Ingestor, Policy};

/// Registers the ingest collector for `ingestor`, run with `policy`.
pub fn register(registry: &mut Registry, ingestor: Arc<Ingestor>, policy: Policy) {
    let capacity = match policy {
        Policy::Reserve { capacity, .. } => Some(capacity),
        Policy::Unbounded => None,
    };
    registry.register_collector(Box::new(IngestCollector { ingestor, capacity }));
}

struct IngestCollector {
    ingestor: Arc<Ingestor>,
    /// `K`, for the reserve policy; the unbounded queue has none, nor a budget.
    capacity: Option<usize>,
}

impl fmt::Debug for IngestCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IngestCollector")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let metric = ConstGauge::new(value as i64);
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn seconds(e: &mut DescriptorEncoder, name: &str, help: &str, value: Duration) -> fmt::Result {
    let metric = ConstCounter::new(value.as_secs_f64());
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for IngestCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let i = &self.ingestor;
        let sample = i.sample_now();
        let recorder = i.recorder();
        let (wait, busy) = recorder.wait_and_service_totals();
        gauge(
            &mut e,
            "ingest_queued",
            "Messages in the queue (Q)",
            sample.queued as u64,
        )?;
        gauge(
            &mut e,
            "ingest_pending",
            "Messages queued or reserved (Q + R)",
            sample.pending as u64,
        )?;
        if let Some(capacity) = self.capacity {
            gauge(
                &mut e,
                "ingest_budget",
                "The logical budget on pending messages (B)",
                sample.budget as u64,
            )?;
            gauge(
                &mut e,
                "ingest_capacity",
                "The queue's physical capacity (K)",
                capacity as u64,
            )?;
        }
        counter(
            &mut e,
            "ingest_messages_received",
            "Messages taken from their streams",
            sample.received,
        )?;
        counter(
            &mut e,
            "ingest_messages_processed",
            "Messages the workers have served",
            sample.processed,
        )?;
        counter(
            &mut e,
            "ingest_calls_ended",
            "Ingest calls that have ended, however they ended",
            *i.calls_done.borrow(),
        )?;
        seconds(
            &mut e,
            "ingest_admission_wait_seconds",
            "Time handlers waited for a place under the budget, summed over served messages",
            wait,
        )?;
        seconds(
            &mut e,
            "ingest_worker_busy_seconds",
            "Time the workers spent serving messages",
            busy,
        )?;
        seconds(
            &mut e,
            "ingest_worker_idle_with_backlog_seconds",
            "Time a worker sat idle although a message was waiting",
            recorder.idle_with_backlog_total(),
        )?;
        gauge(
            &mut e,
            "process_resident_memory_bytes",
            "Resident memory of the server process",
            sample.rss_kib * 1024,
        )
    }
}
