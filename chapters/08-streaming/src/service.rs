//! The `streaming.v1.Streamer` service: one RPC of each streaming kind.

use std::{sync::Arc, time::Duration};

use grpc_server::{CallGuard, lifetime::grpc_timeout};
use proto::streaming::v1::{
    Chunk, CountdownRequest, Tick, UploadSummary,
    streamer_server::{self, StreamerServer},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::{
    budget::{Budgeted, Reply, ReplyBudget, Share},
    stats::{Metered, StreamStats, TaskGuard, wire_bytes},
};

/// Most ticks one Countdown may ask for.
pub const MAX_COUNT: u32 = 1_000_000;
/// Longest pause between two ticks.
pub const MAX_INTERVAL_MS: u32 = 60_000;
/// Largest filler a tick may carry.
pub const MAX_PAYLOAD_BYTES: u32 = 1024 * 1024;
/// Largest message the service decodes or encodes: a full payload and change.
pub const MAX_MESSAGE_BYTES: usize = MAX_PAYLOAD_BYTES as usize + 1024;
/// Replies a producer task may have made that tonic has not yet taken. One is
/// enough to keep tonic busy; more would only hide the point where the
/// producer has to wait.
pub const REPLY_QUEUE: usize = 1;

/// The service. Cloning it shares its counters and its reply budget.
#[derive(Clone, Debug, Default)]
pub struct Streamer {
    stats: Arc<StreamStats>,
    budget: Arc<ReplyBudget>,
    upload_read_pause: Duration,
}

impl Streamer {
    pub fn new() -> Self {
        Streamer::default()
    }

    /// Makes `Upload` a slow reader: it pauses this long before taking each
    /// message after the first. Chapter 8's flow-control demo uses it.
    pub fn with_upload_read_pause(mut self, pause: Duration) -> Self {
        self.upload_read_pause = pause;
        self
    }

    /// Replaces the reply budget; chapter 8's slow-reader demo runs without
    /// one ([`ReplyBudget::unlimited`]) to show what it prevents.
    pub fn with_reply_budget(mut self, budget: ReplyBudget) -> Self {
        self.budget = Arc::new(budget);
        self
    }

    pub fn stats(&self) -> Arc<StreamStats> {
        self.stats.clone()
    }

    /// What the producers hold in replies not yet sent (see [`crate::budget`]).
    pub fn budget(&self) -> Arc<ReplyBudget> {
        self.budget.clone()
    }

    /// The answer of a call whose replies a producer task sends through
    /// `rx`: paid for from the reply budget, counted, and ended at the
    /// call's deadline.
    fn reply_stream<T>(
        &self,
        rx: mpsc::Receiver<Reply<Result<T, Status>>>,
        call: CallGuard,
        timeout: Option<Duration>,
    ) -> Response<ReplyStream<T>> {
        let replies = Budgeted::new(ReceiverStream::new(rx));
        Response::new(Metered::new(replies, self.stats.clone(), call, timeout))
    }

    /// The tonic service, with this chapter's message size limits.
    pub fn into_server(self) -> StreamerServer<Streamer> {
        StreamerServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

/// The reply stream of `Countdown` and `Echo`: fed by a producer task through
/// a small channel, paid for from the reply budget, counted and guarded on its
/// way into tonic.
pub type ReplyStream<T> = Metered<Budgeted<ReceiverStream<Reply<Result<T, Status>>>>>;

#[tonic::async_trait]
impl streamer_server::Streamer for Streamer {
    type CountdownStream = ReplyStream<Tick>;
    type EchoStream = ReplyStream<Chunk>;

    // ANCHOR: countdown
    async fn countdown(
        &self,
        request: Request<CountdownRequest>,
    ) -> Result<Response<Self::CountdownStream>, Status> {
        check_countdown(request.get_ref())?;
        let timeout = grpc_timeout(request.metadata());
        let share = self.budget.share(request.remote_addr());
        let call = self.stats.calls.start("Countdown", timeout);
        let request = request.into_inner();

        // The handler returns at once, with a stream; a task of its own makes
        // the ticks. Cancelling the call drops the stream, not the task, so
        // the task must notice by itself (see `count_down`).
        let (tx, rx) = mpsc::channel(REPLY_QUEUE);
        let stats = self.stats.clone();
        tokio::spawn(count_down(request, tx, share, stats, self.stats.task()));
        Ok(self.reply_stream(rx, call, timeout))
    }
    // ANCHOR_END: countdown

    // ANCHOR: upload
    async fn upload(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<UploadSummary>, Status> {
        let call = self
            .stats
            .calls
            .start("Upload", grpc_timeout(request.metadata()));
        let mut inbound = request.into_inner();
        let mut summary = UploadSummary::default();
        loop {
            if summary.chunks > 0 && !self.upload_read_pause.is_zero() {
                tokio::time::sleep(self.upload_read_pause).await;
            }
            // `message()` waits for the next message. Until the handler asks,
            // the bytes stay in HTTP/2's receive window, unacknowledged.
            let Some(chunk) = inbound.message().await? else {
                break; // the client closed its side: the upload is complete
            };
            self.stats.received.record(wire_bytes(&chunk));
            summary.chunks += 1;
            summary.bytes += chunk.data.len() as u64;
        }
        call.finish();
        Ok(Response::new(summary))
    }
    // ANCHOR_END: upload

    async fn echo(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<Self::EchoStream>, Status> {
        let timeout = grpc_timeout(request.metadata());
        let share = self.budget.share(request.remote_addr());
        let call = self.stats.calls.start("Echo", timeout);
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(REPLY_QUEUE);
        let stats = self.stats.clone();
        tokio::spawn(echo(inbound, tx, share, stats, self.stats.task()));
        Ok(self.reply_stream(rx, call, timeout))
    }
}

/// Refuses a Countdown that could not finish in reasonable time or memory.
pub fn check_countdown(request: &CountdownRequest) -> Result<(), Status> {
    if request.count == 0 || request.count > MAX_COUNT {
        return Err(Status::invalid_argument(format!(
            "count must be between 1 and {MAX_COUNT}, got {}",
            request.count
        )));
    }
    if request.interval_ms > MAX_INTERVAL_MS {
        return Err(Status::invalid_argument(format!(
            "interval_ms must be at most {MAX_INTERVAL_MS}, got {}",
            request.interval_ms
        )));
    }
    if request.payload_bytes > MAX_PAYLOAD_BYTES {
        return Err(Status::invalid_argument(format!(
            "payload_bytes must be at most {MAX_PAYLOAD_BYTES}, got {}",
            request.payload_bytes
        )));
    }
    Ok(())
}

// ANCHOR: count_down
/// Sends `count` ticks, `interval_ms` apart. Returns as soon as the call is
/// over: `tx.closed()` resolves when tonic has dropped the reply stream, and a
/// send into a closed channel fails. Without those checks a cancelled
/// Countdown would keep ticking into the void until `count` ran out.
///
/// A tick is made only once the reply budget has room for it, so a client
/// that stops reading stops the making.
async fn count_down(
    request: CountdownRequest,
    tx: mpsc::Sender<Reply<Result<Tick, Status>>>,
    share: Share,
    stats: Arc<StreamStats>,
    _alive: TaskGuard,
) {
    let interval = Duration::from_millis(request.interval_ms.into());
    let bytes = TICK_OVERHEAD_BYTES + request.payload_bytes as usize;
    for remaining in (0..request.count).rev() {
        if remaining + 1 < request.count && !interval.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = tx.closed() => return,
            }
        }
        let permit = tokio::select! {
            permit = share.reserve(bytes) => permit,
            _ = tx.closed() => return,
        };
        let tick = Tick {
            remaining,
            payload: vec![0u8; request.payload_bytes as usize],
        };
        // Waits while the channel is full, that is while tonic is not taking
        // replies because HTTP/2 flow control will not let it send more.
        if stats
            .sent
            .send(&tx, (Ok(tick), Some(permit)))
            .await
            .is_err()
        {
            return;
        }
    }
}
// ANCHOR_END: count_down

/// What a tick costs beyond its payload, generously: gRPC's 5-byte prefix,
/// two field keys, a varint and a length.
const TICK_OVERHEAD_BYTES: usize = 32;

/// Sends every chunk back as it arrives, until the client closes its side or
/// the call ends.
async fn echo(
    mut inbound: Streaming<Chunk>,
    tx: mpsc::Sender<Reply<Result<Chunk, Status>>>,
    share: Share,
    stats: Arc<StreamStats>,
    _alive: TaskGuard,
) {
    loop {
        let next = tokio::select! {
            // `biased`: a call that is already over is not worth another read.
            biased;
            _ = tx.closed() => return,
            next = inbound.message() => next,
        };
        match next {
            Ok(Some(chunk)) => {
                stats.received.record(wire_bytes(&chunk));
                // Until the echo is paid for, no further chunk is read, and
                // the client's sends wait on HTTP/2's window.
                let permit = tokio::select! {
                    permit = share.reserve(wire_bytes(&chunk) as usize) => permit,
                    _ = tx.closed() => return,
                };
                if stats
                    .sent
                    .send(&tx, (Ok(chunk), Some(permit)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // The client closed its side; dropping `tx` ends the replies.
            Ok(None) => return,
            // A bad message (too large, say): pass tonic's status on as ours.
            Err(status) => {
                let _ = tx.send((Err(status), None)).await;
                return;
            }
        }
    }
}
