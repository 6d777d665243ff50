//! The policies on a real tonic server (loopback, port 0), with calls sent
//! all at once: counts and fates, not timings, are asserted.

use std::time::Duration;

use overload::{
    Policy, Transport,
    server::{Fate, Order, Rules, Running},
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{Code, transport::Channel};

fn rules(queue: usize, drop_expired: bool, service_ms: u64) -> Rules {
    Rules {
        workers: 1,
        queue,
        order: Order::Fifo,
        drop_expired,
        service: Duration::from_millis(service_ms),
        margin: Duration::ZERO,
    }
}

/// `n` calls at once, each with `deadline`; their status codes.
async fn burst(server: &Running, n: usize, deadline: Duration) -> Vec<Code> {
    let channel = Channel::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let calls = (0..n).map(|i| {
        let mut client = GreeterClient::new(channel.clone());
        let mut request = tonic::Request::new(HelloRequest {
            name: format!("call {i}"),
            delay_ms: 0,
        });
        request.set_timeout(deadline);
        async move {
            match client.say_hello(request).await {
                Ok(_) => Code::Ok,
                Err(status) => status.code(),
            }
        }
    });
    futures_join_all(calls).await
}

async fn futures_join_all<F: std::future::Future<Output = Code> + Send + 'static>(
    calls: impl Iterator<Item = F>,
) -> Vec<Code> {
    let handles: Vec<_> = calls.map(tokio::spawn).collect();
    let mut codes = Vec::new();
    for h in handles {
        codes.push(h.await.unwrap());
    }
    codes
}

fn count(codes: &[Code], code: Code) -> usize {
    codes.iter().filter(|c| **c == code).count()
}

#[tokio::test]
async fn reject_answers_resource_exhausted_beyond_workers_and_queue() {
    // One worker, one queue place, 2 s of work per call: of 6 calls sent at
    // once, 2 are held and 4 are refused at once.
    let server = Running::start(rules(1, false, 2000)).await.unwrap();
    let codes = burst(&server, 6, Duration::from_secs(30)).await;
    assert_eq!(count(&codes, Code::ResourceExhausted), 4, "{codes:?}");
    assert_eq!(count(&codes, Code::Ok), 2, "{codes:?}");
    assert_eq!(server.pool.fates()[3], (Fate::Shed, 4));
}

#[tokio::test]
async fn wait_works_on_calls_whose_caller_has_gone_and_drop_does_not() {
    // One worker, 300 ms per call, 5 calls with a 500 ms deadline: the first
    // ends in time; under wait, the rest are worked on anyway, late.
    for drop_expired in [false, true] {
        let server = Running::start(rules(100, drop_expired, 300)).await.unwrap();
        let codes = burst(&server, 5, Duration::from_millis(500)).await;
        assert!(count(&codes, Code::Ok) >= 1, "{codes:?}");
        assert!(count(&codes, Code::Ok) <= 2, "{codes:?}");
        // Let the worker get through the queue (at most 5 x 300 ms).
        tokio::time::sleep(Duration::from_millis(1700)).await;
        let work = server.pool.records();
        let fate = |f: Fate| work.iter().filter(|w| w.fate == f).count();
        assert_eq!(work.len(), 5, "{work:?}");
        if drop_expired {
            assert_eq!(fate(Fate::Wasted), 0, "{work:?}");
            assert!(fate(Fate::Dropped) >= 3, "{work:?}");
        } else {
            assert_eq!(fate(Fate::Dropped), 0, "{work:?}");
            assert!(fate(Fate::Wasted) >= 3, "{work:?}");
        }
    }
}

#[tokio::test]
async fn the_metrics_count_each_fate_of_the_cell_being_watched() {
    let (watch, metrics) = overload::metrics::serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // Nothing shown yet: a valid, empty scrape.
    let empty = grpc_server::testing::scrape::scrape(metrics).await;
    assert!(empty.samples.is_empty(), "{:#?}", empty.samples);
    // One worker, one queue place, 1 s per call: of 6 sent at once, 4 are shed.
    let server = Running::start(rules(1, false, 1000)).await.unwrap();
    watch.show(Transport::Grpc, Policy::Reject, 2.0, server.pool.clone());
    let codes = burst(&server, 6, Duration::from_secs(30)).await;
    assert_eq!(count(&codes, Code::ResourceExhausted), 4, "{codes:?}");
    let s = grpc_server::testing::scrape::scrape(metrics).await;
    let calls = |fate: &str| {
        s.value(&format!(
            "overload_calls_total{{transport=\"grpc\",policy=\"reject\",load=\"2\",fate=\"{fate}\"}}"
        ))
    };
    assert_eq!(
        (calls("shed"), calls("served")),
        (4.0, 2.0),
        "{:#?}",
        s.samples
    );
    assert_eq!((calls("wasted"), calls("dropped")), (0.0, 0.0));
    let cell = "{transport=\"grpc\",policy=\"reject\",load=\"2\"}";
    assert_eq!(s.value(&format!("overload_busy_workers{cell}")), 0.0);
    assert_eq!(s.value(&format!("overload_waiting_calls{cell}")), 0.0);
    assert_eq!(s.types["overload_calls_total"], "counter");
}
