//! One function per subcommand. Each prints what it received and returns the
//! first failure, already translated by [`Failure::from_status`].

use std::{collections::BTreeMap, time::Instant};

use proto::{
    greeter::v1::{HelloRequest, greeter_client::GreeterClient},
    status,
    streaming::v1::{Chunk, CountdownRequest, streamer_client::StreamerClient},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, transport::Channel};

use crate::{
    channel::request,
    cli::{BurstArgs, CountdownArgs, EchoArgs, HelloArgs, Seconds, UploadArgs},
    report::Failure,
};

/// What every call of a run shares: its deadline, and whether failures are
/// reported raw (`--raw-status`) or with the deadline rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions {
    pub deadline: Option<Seconds>,
    pub raw_status: bool,
}

/// Times a call from just before it starts, so that a failure can be judged
/// against the deadline (see [`Failure::from_status`]).
struct Clock {
    started: Instant,
    options: CallOptions,
}

impl Clock {
    fn start(options: CallOptions) -> Clock {
        Clock {
            started: Instant::now(),
            options,
        }
    }
    fn fail(&self, status: Status) -> Failure {
        // Without a deadline to judge by, the rule leaves every status as it is.
        let deadline = self.options.deadline.filter(|_| !self.options.raw_status);
        Failure::from_status(&status, deadline, self.started.elapsed())
    }
    fn ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1e3
    }

    // ANCHOR: within
    /// Awaits one step of a stream (the next message, the final summary)
    /// within the call's deadline. tonic applies `grpc-timeout` only until the
    /// response headers arrive, on both sides, so once a stream has started
    /// nothing else would end it when the deadline passes. Dropping the stream
    /// here resets it, and the server stops.
    async fn within<T>(&self, step: impl Future<Output = Result<T, Status>>) -> Result<T, Failure> {
        let Some(deadline) = self.options.deadline else {
            return step.await.map_err(|status| self.fail(status));
        };
        let at = tokio::time::Instant::from_std(self.started + deadline.duration);
        match tokio::time::timeout_at(at, step).await {
            Ok(result) => result.map_err(|status| self.fail(status)),
            Err(_) => Err(Failure::new(
                Code::DeadlineExceeded,
                format!(
                    "the {deadline} deadline passed with the stream still open \
                     (tonic stops timing a call once its response headers arrive, \
                     so this client ended the stream itself)"
                ),
            )),
        }
    }
    // ANCHOR_END: within
}

/// The name `hello` sends: `--name`, padded with 'x' to `--name-bytes`.
pub fn name_to_send(args: &HelloArgs) -> String {
    let mut name = args.name.clone();
    if let Some(bytes) = args.name_bytes {
        name.extend(std::iter::repeat_n('x', bytes.saturating_sub(name.len())));
    }
    name
}

// ANCHOR: hello
/// `hello`: SayHello, `--repeat` times, on `channel` (or, with
/// `--fresh-channel`, on a new channel each time, made by `new_channel`).
pub async fn hello(
    channel: &Channel,
    new_channel: impl Fn() -> Channel,
    options: CallOptions,
    args: &HelloArgs,
) -> Result<(), Failure> {
    let message = HelloRequest {
        name: name_to_send(args),
        delay_ms: args.delay_ms,
    };
    for n in 1..=args.repeat {
        // Cloning a channel is cheap: every clone shares one connection.
        let channel = if args.fresh_channel {
            new_channel()
        } else {
            channel.clone()
        };
        let mut client = GreeterClient::new(channel);
        let clock = Clock::start(options);
        let call = client.say_hello(request(message.clone(), options.deadline));
        let outcome = match args.cancel_after {
            None => call.await,
            // Dropping the call's future is how a tonic client cancels: the
            // stream is reset, and no status comes back, so we write our own.
            Some(after) => tokio::time::timeout(after.duration, call)
                .await
                .unwrap_or_else(|_| {
                    Err(Status::cancelled(format!(
                        "this client cancelled the call after {after}"
                    )))
                }),
        };
        let reply = outcome.map_err(|status| clock.fail(status))?;
        let text = reply.into_inner().message;
        if args.repeat == 1 {
            println!("{text}");
        } else {
            println!("call {n}: {text} ({:.2} ms)", clock.ms());
        }
    }
    Ok(())
}
// ANCHOR_END: hello

/// `countdown`: one request, a stream of ticks.
pub async fn countdown(
    channel: &Channel,
    options: CallOptions,
    args: &CountdownArgs,
) -> Result<(), Failure> {
    let mut client = StreamerClient::new(channel.clone());
    let message = CountdownRequest {
        count: args.count,
        interval_ms: args.interval_ms,
        payload_bytes: args.payload_bytes,
    };
    let clock = Clock::start(options);
    let mut ticks = client
        .countdown(request(message, options.deadline))
        .await
        .map_err(|status| clock.fail(status))?
        .into_inner();
    let mut received = 0;
    while let Some(tick) = clock.within(ticks.message()).await? {
        received += 1;
        println!(
            "tick remaining={} payload={} B at {:.1} ms",
            tick.remaining,
            tick.payload.len(),
            clock.ms()
        );
    }
    println!("countdown done: {received} ticks in {:.1} ms", clock.ms());
    Ok(())
}

/// `upload`: a stream of chunks, one summary.
pub async fn upload(
    channel: &Channel,
    options: CallOptions,
    args: &UploadArgs,
) -> Result<(), Failure> {
    let mut client = StreamerClient::new(channel.clone());
    let size = args.chunk_bytes;
    let chunks = (0..args.chunks).map(move |seq| Chunk {
        seq,
        data: vec![0; size],
    });
    let clock = Clock::start(options);
    let summary = clock
        .within(client.upload(request(tokio_stream::iter(chunks), options.deadline)))
        .await?
        .into_inner();
    println!(
        "sent {} chunks ({} bytes); the server counted {} chunks, {} bytes, in {:.1} ms",
        args.chunks,
        args.chunks * size as u64,
        summary.chunks,
        summary.bytes,
        clock.ms()
    );
    Ok(())
}

/// `echo`: sends a chunk, waits for it to come back, sends the next.
pub async fn echo(channel: &Channel, options: CallOptions, args: &EchoArgs) -> Result<(), Failure> {
    let mut client = StreamerClient::new(channel.clone());
    let (outbound, rx) = mpsc::channel(1);
    let clock = Clock::start(options);
    let mut echoes = client
        .echo(request(ReceiverStream::new(rx), options.deadline))
        .await
        .map_err(|status| clock.fail(status))?
        .into_inner();
    for seq in 0..args.chunks {
        let sent = Instant::now();
        let chunk = Chunk {
            seq,
            data: vec![0; args.chunk_bytes],
        };
        if outbound.send(chunk).await.is_err() {
            break; // the call is over; the next read says why
        }
        match clock.within(echoes.message()).await? {
            Some(echo) => println!(
                "echo seq={} {} bytes, round trip {:.2} ms",
                echo.seq,
                echo.data.len(),
                sent.elapsed().as_secs_f64() * 1e3
            ),
            None => {
                return Err(Failure::new(
                    Code::Internal,
                    format!("the server ended the stream before echoing chunk {seq}"),
                ));
            }
        }
    }
    // Closing our side ends the server's loop; its stream then ends cleanly.
    drop(outbound);
    while clock.within(echoes.message()).await?.is_some() {}
    println!("echo done: {} chunks in {:.1} ms", args.chunks, clock.ms());
    Ok(())
}

// ANCHOR: burst
/// `burst`: `--calls` SayHello calls started together on the one channel
/// (one HTTP/2 connection, one stream per call), and a tally of how they ended.
/// True if every call succeeded.
pub async fn burst(channel: &Channel, options: CallOptions, args: &BurstArgs) -> bool {
    let started = Instant::now();
    let calls: Vec<_> = (0..args.calls)
        .map(|_| {
            let mut client = GreeterClient::new(channel.clone());
            let message = HelloRequest {
                name: args.name.clone(),
                delay_ms: args.delay_ms,
            };
            tokio::spawn(async move {
                let clock = Clock::start(options);
                match client.say_hello(request(message, options.deadline)).await {
                    Ok(_) => Ok(()),
                    Err(status) => Err(clock.fail(status)),
                }
            })
        })
        .collect();

    // code number -> (how many, the first message seen)
    let mut tally: BTreeMap<i32, (u32, Option<String>)> = BTreeMap::new();
    for call in calls {
        let outcome = call.await.unwrap_or_else(|e| {
            Err(Failure::new(
                Code::Unknown,
                format!("the call's task failed: {e}"),
            ))
        });
        let (code, details) = match outcome {
            Ok(()) => (Code::Ok, None),
            Err(failure) => (failure.code, Some(failure.details)),
        };
        let entry = tally.entry(code as i32).or_default();
        entry.0 += 1;
        entry.1 = entry.1.take().or(details);
    }
    // ... then the tally is printed, one line per status code.
    // ANCHOR_END: burst

    println!(
        "{} concurrent SayHello calls (delay {} ms) on one channel, all ended after {:.1} ms:",
        args.calls,
        args.delay_ms,
        started.elapsed().as_secs_f64() * 1e3
    );
    for (&number, (count, details)) in &tally {
        let row = &status::TABLE[number as usize];
        match details {
            None => println!("  {:<19} {count:>4}", row.name),
            Some(details) => println!("  {:<19} {count:>4}  {details}", row.name),
        }
    }
    let failed: u32 = tally
        .iter()
        .filter(|(number, _)| **number != 0)
        .map(|(_, (count, _))| count)
        .sum();
    for &number in tally.keys().filter(|n| **n != 0) {
        let row = &status::TABLE[number as usize];
        println!(
            "{}: {} (REST: {}; retry: {})",
            row.name,
            row.meaning,
            row.http_label(),
            row.retry.verdict()
        );
    }
    failed == 0
}
