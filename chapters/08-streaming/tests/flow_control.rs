//! The flow-control demo's core, driven directly: real TLS on 127.0.0.1:0,
//! small windows to keep it quick.
//!
//! The assertions are about bytes and counts, with wide margins; none is about
//! how long anything took.

use std::time::Duration;

use streaming::flow::{self, Config, Direction, Ending, Report, SPEC_WINDOW};

fn config(direction: Direction, window: u32) -> Config {
    Config {
        direction,
        stream_window: window,
        connection_window: window,
        message_bytes: 4 * 1024,
        read_every: Duration::from_millis(5),
        duration: Duration::from_millis(600),
        report_every: Duration::from_millis(100),
        drain_limit: Duration::from_secs(20),
    }
}

async fn run(config: &Config) -> Report {
    let report = tokio::time::timeout(Duration::from_secs(60), flow::run(config, |_| {}))
        .await
        .expect("the demo must finish")
        .expect("the demo must run");
    println!("{}\n", report.summary());
    report
}

/// The most bytes a test accepts in flight: the window plus *twice* the
/// libraries' buffers that `flow::library_margin` derives from their sources.
/// The demo prints the derived bound; the tests leave room for a buffer that
/// derivation missed, rather than fail on it, and still catch anything
/// unbounded.
fn allowed(c: &Config) -> u64 {
    c.effective_window() + 2 * flow::library_margin(c.message_wire())
}

/// What every run must show: the sender had to wait, the bytes in flight
/// stayed within the window plus a margin, and the server kept nothing once
/// the call was over.
fn assert_flow_controlled(report: &Report) {
    let c = &report.config;
    let sent = report.last().sent;
    assert!(
        sent.blocked_sends > 0,
        "the sender never found its queue full: {sent:?}"
    );
    assert!(
        report.peak_in_flight <= allowed(c),
        "{} bytes in flight, more than window {} + twice the margin {}",
        report.peak_in_flight,
        c.effective_window(),
        flow::library_margin(c.message_wire())
    );
    // The window did fill: a reader this slow cannot keep it emptier.
    assert!(
        report.peak_in_flight >= c.effective_window() / 2,
        "only {} bytes in flight; the sender never filled the window",
        report.peak_in_flight
    );
    for sample in &report.samples {
        assert!(sample.in_flight() <= allowed(c), "{sample:?}");
    }
    assert_eq!(report.server_open_streams, 0);
    assert_eq!(report.server_live_tasks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_holds_an_upload_to_its_window() {
    let config = config(Direction::Upload, SPEC_WINDOW + 1);
    let report = run(&config).await;
    assert_flow_controlled(&report);

    // Closing the stream delivered everything: nothing lost, nothing left.
    let Ending::Drained { server_chunks, .. } = report.ending else {
        panic!("the upload did not drain: {:?}", report.ending);
    };
    let last = report.last();
    assert_eq!(server_chunks, last.sent.messages);
    assert_eq!(last.consumed, last.sent.bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_holds_a_download_to_its_window_and_a_cancel_frees_the_producer() {
    let config = config(Direction::Download, SPEC_WINDOW + 1);
    let report = run(&config).await;
    assert_flow_controlled(&report);
    let Ending::Cancelled { cleaned_up_after } = report.ending else {
        panic!("a download ends with a cancel: {:?}", report.ending);
    };
    assert!(
        cleaned_up_after.is_some(),
        "the server kept its stream or task"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_larger_window_lets_more_bytes_wait_in_flight() {
    let small = config(Direction::Upload, 64 * 1024);
    let large = config(Direction::Upload, 512 * 1024);
    let (small_report, large_report) = (run(&small).await, run(&large).await);
    assert_flow_controlled(&small_report);
    assert_flow_controlled(&large_report);
    // More in flight than the small window allows at all: the plateau follows
    // the window, not some fixed buffer.
    assert!(
        large_report.peak_in_flight > allowed(&small),
        "{} bytes in flight with a 512 KiB window, {} allowed with 64 KiB",
        large_report.peak_in_flight,
        allowed(&small)
    );
}
