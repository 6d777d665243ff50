//! The client side of chapter 11: one long client-streaming `Ingest` call fed
//! on a schedule, one message per slot.

use std::time::Duration;

use harness::records::Growing;
use proto::ingest::v1::{Payload, Summary as Reply, ingest_client::IngestClient};
use rand::{RngCore, SeedableRng, rngs::StdRng};
use tokio::{sync::mpsc, time::Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use serde::{Deserialize, Serialize};

use crate::{
    open_loop::{Counters, SendError, SlotRecord, run_skipping},
    pacing::Timer,
    schedule::Slots,
    summary::Summary,
};

/// The file of every slot's record, one `SlotRecord` a row.
pub const SENDS: &str = "sends.csv";

/// What one `Ingest` call did: every slot's record, and how the call ended.
#[derive(Debug)]
pub struct IngestRun {
    pub records: Vec<SlotRecord>,
    pub reply: Result<Reply, tonic::Status>,
    /// From opening the call to its reply (or failure).
    pub call_duration: Duration,
}

/// How one call went, as `client.json` keeps it beside the call's `sends.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call ended OK, with the server's summary.
    pub ok: bool,
    /// `OK: received 1919, processed 1919`, or the status it failed with.
    pub call: String,
    pub call_s: f64,
    pub summary: Summary,
}

impl IngestRun {
    pub fn record(&self) -> CallRecord {
        let (ok, call) = match &self.reply {
            Ok(r) => (
                true,
                format!("OK: received {}, processed {}", r.received, r.processed),
            ),
            Err(s) => (false, format!("{:?}: {}", s.code(), s.message())),
        };
        CallRecord {
            ok,
            call,
            call_s: self.call_duration.as_secs_f64(),
            summary: Summary::of(&self.records),
        }
    }
}

// ANCHOR: ingest
/// Streams one `message_bytes` message per slot. The stream is fed through a
/// channel with room for one message, so a send completes only once tonic has
/// taken the previous one: when HTTP/2 flow control stops tonic, the send
/// blocks, and slots that come due meanwhile are skipped. With `growing`,
/// every slot's record is also written there as it ends.
pub async fn ingest<'a>(
    channel: Channel,
    slots: impl Into<Slots<'a>>,
    timer: Timer,
    message_bytes: usize,
    seed: u64,
    counters: &Counters,
    growing: Option<&Growing<SlotRecord>>,
) -> IngestRun {
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<Payload>(1);
    let mut client = IngestClient::new(channel).max_decoding_message_size(usize::MAX);
    let call = tokio::spawn(async move { client.ingest(ReceiverStream::new(rx)).await });
    let mut rng = StdRng::seed_from_u64(seed);
    let records = run_skipping(slots, timer, counters, growing, |slot| {
        let mut data = vec![0; message_bytes];
        rng.fill_bytes(&mut data);
        let tx = &tx;
        async move {
            let payload = Payload {
                seq: slot.index,
                data,
            };
            tx.send(payload).await.map_err(|_| SendError {
                code: "stream closed".into(),
                fatal: true,
            })
        }
    })
    .await;
    drop(tx); // the end of the stream: the server answers with its Summary
    let reply = match call.await {
        Ok(result) => result.map(tonic::Response::into_inner),
        Err(e) => Err(tonic::Status::internal(format!(
            "the call's task failed: {e}"
        ))),
    };
    IngestRun {
        records,
        reply,
        call_duration: started.elapsed(),
    }
}
// ANCHOR_END: ingest
