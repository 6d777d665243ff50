//! The ingest server's metrics: the gate's gauges follow a budget change as
//! a scrape sees it, and after a real call over TLS the counters say what
//! the call did. Every scrape is parsed strictly as exposition text.

use std::{sync::Arc, time::Duration};

use grpc_client::channel::{Target, endpoint};
use grpc_server::testing::scrape::{parse, scrape};
use ingest::{
    plan::ServicePlan,
    service::{Ingestor, Policy},
};
use loadgen::{Counters, Schedule, Timer, ingest::ingest};
use prometheus_client::{encoding::prometheus_text::encode, registry::Registry};

fn read(registry: &Registry) -> grpc_server::testing::scrape::Scrape {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[tokio::test]
async fn the_gate_gauges_follow_a_budget_change() {
    let policy = Policy::Reserve {
        capacity: 8,
        budget: 4,
    };
    let plan: ServicePlan = "10ms@0s".parse().unwrap();
    let ingestor = Ingestor::start(policy, plan.clone(), 1, Duration::from_secs(1));
    let mut registry = Registry::default();
    ingest::metrics::register(&mut registry, ingestor.clone(), policy);
    let before = read(&registry);
    assert_eq!(before.value("ingest_budget"), 4.0);
    assert_eq!(before.value("ingest_capacity"), 8.0);
    assert_eq!(before.value("ingest_queued"), 0.0);
    assert_eq!(before.value("ingest_messages_processed_total"), 0.0);
    assert_eq!(before.types["ingest_pending"], "gauge");
    assert_eq!(
        before.types["ingest_worker_idle_with_backlog_seconds_total"],
        "counter"
    );
    assert!(before.value("process_resident_memory_bytes") > 0.0);

    ingestor.gate().unwrap().set_budget(2, "test");
    assert_eq!(read(&registry).value("ingest_budget"), 2.0);
    // Asked for more than K, the gate keeps K, and so does the gauge.
    ingestor.gate().unwrap().set_budget(100, "test");
    assert_eq!(read(&registry).value("ingest_budget"), 8.0);
    ingestor.stop().await;

    // An unbounded queue has neither a budget nor a capacity to report.
    let unbounded = Ingestor::start(Policy::Unbounded, plan, 1, Duration::from_secs(1));
    let mut registry = Registry::default();
    ingest::metrics::register(&mut registry, unbounded.clone(), Policy::Unbounded);
    let s = read(&registry);
    assert!(!s.types.contains_key("ingest_budget") && !s.types.contains_key("ingest_capacity"));
    assert!(s.types.contains_key("ingest_queued"));
    unbounded.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_call_the_counters_say_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let pki = certs::Pki::new(dir.path().join("certs"));
    pki.generate(false).unwrap();
    // A port that was free a moment ago, for the metrics (the server reports
    // only its gRPC address in the ready file).
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (certs, record, ready) = (
        pki.path(""),
        dir.path().join("record"),
        dir.path().join("ready"),
    );
    let args = ingest::server::ServeArgs {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: certs::TlsArgs::in_dir(&certs),
        policy: ingest::server::PolicyName::Reserve,
        capacity: 8,
        budget: Some(4),
        plan: "2ms@0s".parse().unwrap(),
        workers: 1,
        sample_every: Duration::from_millis(50),
        record,
        calls: Some(1),
        ready_file: Some(ready.clone()),
        metrics_addr: Some(metrics),
    };
    let server = tokio::spawn(ingest::server::run(args));
    let addr = grpc_server::testing::within("the ready file", async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                return text.trim().parse::<std::net::SocketAddr>().unwrap();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let target = Target {
        url: format!("https://localhost:{}", addr.port()),
        ca: pki.ca_cert(),
        identity: None,
    };
    let channel = endpoint(&target).unwrap().connect().await.unwrap();
    let slots = Schedule::constant(50.0, Duration::from_millis(400)).slots();
    let run = ingest(
        channel,
        &slots,
        Timer::Precise,
        256,
        1,
        &Arc::new(Counters::default()),
        None,
    )
    .await;
    let reply = run.reply.expect("the call succeeds");
    server.await.unwrap().expect("the server ran cleanly");

    // The metrics port outlives the gRPC server in this test's runtime.
    let s = scrape(metrics).await;
    let n = reply.processed as f64;
    assert!(n > 0.0);
    assert_eq!(s.value("ingest_messages_received_total"), n);
    assert_eq!(s.value("ingest_messages_processed_total"), n);
    assert_eq!(s.value("ingest_calls_ended_total"), 1.0);
    assert_eq!(
        (s.value("ingest_queued"), s.value("ingest_pending")),
        (0.0, 0.0)
    );
    assert!(s.value("ingest_worker_busy_seconds_total") > 0.0);
    assert_eq!(
        s.value("grpc_server_handled_total{grpc_type=\"client_stream\",grpc_service=\"ingest.v1.Ingest\",grpc_method=\"Ingest\",grpc_code=\"OK\"}"),
        1.0,
        "{:#?}",
        s.samples
    );
}
