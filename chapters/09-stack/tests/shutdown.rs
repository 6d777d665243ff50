//! The stack as a process, stopped the way an operator stops it: the first
//! Ctrl-C drains, and a second one, during the drain, stops at once and says
//! how many calls it cut off. Real signals, so the stack runs as a child
//! process (a signal sent to the test process would hit the test harness).

use std::{
    io::{BufRead, BufReader, Read},
    net::SocketAddr,
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use certs::Pki;
use grpc_server::testing::{WAIT, scrape::scrape_until, tls_channel, within};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

/// Longer than any call may wait (MAX_DELAY_MS), so a call still works when
/// the drain starts, and would outlive the drain limit too.
const SLOW_MS: u32 = grpc_server::greeter::MAX_DELAY_MS;

/// Lines a child process has written so far, collected by a thread.
type Lines = Arc<Mutex<Vec<String>>>;

fn collect(pipe: impl Read + Send + 'static) -> Lines {
    let lines = Lines::default();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

/// The first line of `lines` that contains `text`, once it is written.
async fn line_with(lines: &Lines, text: &str) -> String {
    let found = || {
        let lines = lines.lock().unwrap();
        lines.iter().find(|l| l.contains(text)).cloned()
    };
    within(&format!("a line with {text:?}"), async {
        loop {
            if let Some(line) = found() {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// `stack` with its stdout and stderr collected, killed if the test ends first.
struct Stack {
    child: Child,
    stdout: Lines,
    stderr: Lines,
}

impl Stack {
    fn spawn(certs_dir: &Path, ready: &Path) -> Stack {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stack"))
            .args(["--grpc-addr", "127.0.0.1:0", "--rest-addr", "127.0.0.1:0"])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .arg("--certs-dir")
            .arg(certs_dir)
            .arg("--ready-file")
            .arg(ready)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the stack");
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Stack {
            child,
            stdout,
            stderr,
        }
    }

    fn interrupt(&self) {
        kill_process(Pid::from_child(&self.child), Signal::INT).expect("send SIGINT");
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("ask whether the stack exited")
    }

    /// Its exit status, within WAIT: well under the 30 s drain limit, after
    /// which the old stack would have exited on its own (with 0).
    async fn exit_status(&mut self) -> ExitStatus {
        within("the stack's exit", async {
            loop {
                if let Some(status) = self.exited() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_stops_a_draining_stack_at_once_counting_the_calls_cut_off() {
    let temp = tempfile::tempdir().unwrap();
    let (certs_dir, ready) = (temp.path().join("certs"), temp.path().join("ready"));
    let mut stack = Stack::spawn(&certs_dir, &ready);
    let text = program::ready_file::wait(&ready, WAIT, || Ok(stack.exited().is_none())).unwrap();
    let addrs: Vec<SocketAddr> = text.lines().map(|l| l.parse().unwrap()).collect();
    let (grpc_addr, rest_addr) = (addrs[0], addrs[1]);
    let metrics: SocketAddr = line_with(&stack.stdout, "METRICS http://")
        .await
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse().ok())
        .expect("the banner names the metrics address");
    let pki = Pki::new(&certs_dir);

    // One slow call on each port.
    let channel = tls_channel(grpc_addr, &pki.ca_cert(), None).await.unwrap();
    let grpc_call = tokio::spawn(async move {
        GreeterClient::new(channel)
            .say_hello(HelloRequest {
                name: "Ada".into(),
                delay_ms: SLOW_MS,
            })
            .await
    });
    let mut tls = certs::client_config(&pki.ca_cert(), None).unwrap();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .build()
        .unwrap();
    let rest_call = tokio::spawn(
        client
            .post(format!("https://{rest_addr}/v1/greetings"))
            .json(&json!({"name": "Ada", "delay_ms": SLOW_MS}))
            .send(),
    );
    let grpc_in_flight = "grpc_server_in_flight{grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",grpc_method=\"SayHello\"}";
    scrape_until(metrics, |s| {
        s.value(grpc_in_flight) == 1.0 && s.value("http_requests_in_flight") == 1.0
    })
    .await;

    // The first Ctrl-C drains: the stack stays up for the calls in flight.
    stack.interrupt();
    line_with(&stack.stderr, "REST server draining").await;
    line_with(&stack.stderr, "gRPC server draining").await;
    assert!(
        stack.exited().is_none(),
        "the stack exited at the first Ctrl-C"
    );

    // The second one stops it at once, and says what it cut off.
    stack.interrupt();
    let status = stack.exit_status().await;
    let report = line_with(&stack.stderr, "cut off").await;
    println!("{status}; {report}");
    assert_eq!(status.code(), Some(130), "{report}");
    assert!(
        report.contains("2 calls still in flight were cut off (gRPC 1, REST 1, streams 0)"),
        "{report}"
    );

    // Both calls end with an error at their clients, not with an answer.
    let grpc = within("the gRPC call's end", grpc_call).await.unwrap();
    assert!(grpc.is_err(), "{grpc:?}");
    let rest = within("the REST call's end", rest_call).await.unwrap();
    assert!(rest.is_err(), "{rest:?}");
}
