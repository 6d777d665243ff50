//! The generator against real servers on loopback, in real time with the
//! precise timer: every slot of a ramp, made as the run asks for it, ends in
//! exactly one record, sent or counted as not sent.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use loadgen::{
    Counters, Outcome, Schedule, SendError, SlotRecord, Summary, Timer, WhenFull, ingest::ingest,
    run_bounded,
};
use proto::{
    greeter::v1::{
        HelloReply, HelloRequest,
        greeter_client::GreeterClient,
        greeter_server::{Greeter, GreeterServer},
    },
    ingest::v1::{
        Payload, Summary as Reply,
        ingest_server::{Ingest, IngestServer},
    },
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{
    Request, Response, Status, Streaming,
    service::Routes,
    transport::{Channel, Endpoint, Server},
};

struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}

/// Takes every message of the stream, and says how many it took.
struct Sink;

#[tonic::async_trait]
impl Ingest for Sink {
    async fn ingest(
        &self,
        request: Request<Streaming<Payload>>,
    ) -> Result<Response<Reply>, Status> {
        let mut stream = request.into_inner();
        let mut reply = Reply::default();
        while let Some(payload) = stream.message().await? {
            reply.received += 1;
            reply.processed += 1;
            reply.bytes_received += payload.data.len() as u64;
        }
        Ok(Response::new(reply))
    }
}

/// Serves `routes` on a free loopback port, in plain HTTP/2; a channel to it.
async fn serve(routes: Routes) -> Channel {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_routes(routes)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn ramp() -> Schedule {
    Schedule {
        steps: ["200/s:300ms", "500/s:200ms"]
            .map(|s| s.parse().unwrap())
            .to_vec(),
    }
}

/// One record per slot, in the schedule's order, each in its step.
fn assert_one_record_per_slot(schedule: &Schedule, records: &[SlotRecord]) {
    assert_eq!(records.len() as u64, schedule.count());
    for (record, slot) in records.iter().zip(schedule.iter()) {
        assert_eq!(
            (record.index, record.step, record.due),
            (slot.index, slot.step, slot.due)
        );
    }
    let s = Summary::of(records);
    let accounted = s.ok + s.failed + s.skipped + s.shed + s.aborted + s.unfinished;
    assert_eq!(
        (s.scheduled, accounted),
        (schedule.count(), schedule.count())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unary_slot_is_one_record() {
    let channel = serve(Routes::new(GreeterServer::new(Hello))).await;
    let client = GreeterClient::new(channel);
    let schedule = ramp();
    assert_eq!(schedule.count(), 60 + 100);
    let counters = Arc::new(Counters::default());
    let records = run_bounded(
        &schedule,
        Timer::Precise,
        8,
        WhenFull::Defer,
        Duration::from_secs(60),
        counters.clone(),
        |slot| {
            let mut client = client.clone();
            async move {
                let request = HelloRequest {
                    name: format!("slot {}", slot.index),
                    delay_ms: 0,
                };
                client
                    .say_hello(request)
                    .await
                    .map(drop)
                    .map_err(|status| SendError {
                        code: format!("{:?}", status.code()),
                        fatal: false,
                    })
            }
        },
    )
    .await;
    assert_one_record_per_slot(&schedule, &records);
    // Deferred, never shed: every slot was sent, and answered.
    assert!(
        records.iter().all(|r| r.outcome == Outcome::Ok),
        "{records:?}"
    );
    assert_eq!(counters.due.load(Ordering::Relaxed), schedule.count());
    assert_eq!(counters.ok.load(Ordering::Relaxed), schedule.count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_streamed_slot_is_one_record_and_the_server_got_the_sent_ones() {
    let channel = serve(Routes::new(IngestServer::new(Sink))).await;
    let schedule = ramp();
    let counters = Counters::default();
    let run = ingest(channel, &schedule, Timer::Precise, 1024, 1, &counters, None).await;
    assert_one_record_per_slot(&schedule, &run.records);
    // Sent (and taken) or skipped, nothing else; the server got each sent one.
    let s = Summary::of(&run.records);
    assert_eq!(s.ok + s.skipped, schedule.count(), "{s}");
    let reply = run.reply.expect("the call ends OK");
    assert_eq!(reply.received, s.ok);
    assert_eq!(reply.bytes_received, s.ok * 1024);
    assert_eq!(counters.due.load(Ordering::Relaxed), schedule.count());
}
