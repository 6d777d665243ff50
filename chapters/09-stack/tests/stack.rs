//! The whole stack in one process, end to end: it creates its PKI, serves both
//! greeters over real TLS on 127.0.0.1:0, and shuts down cleanly; setup errors
//! (a busy port, a half-made PKI) say what is wrong.

use std::{fs, net::SocketAddr, path::Path, time::Duration};

use certs::{Pki, TlsArgs};
use grpc_server::testing::KillOnDrop;
use program::StopSignal;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use reqwest::{StatusCode, Version};
use serde_json::{Value, json};
use stack::{Args, Stack};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

/// The bound on every wait in this file: it turns a hang into a failure and is
/// far longer than anything here should take, even on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);

const PKI_FILES: [&str; 5] = [
    "ca.pem",
    "server.pem",
    "server.key",
    "client.pem",
    "client.key",
];

/// Stack arguments for both servers on free ports, certificates in `certs_dir`.
fn args(certs_dir: &Path) -> Args {
    Args {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        rest_addr: "127.0.0.1:0".parse().unwrap(),
        tls: TlsArgs::in_dir(certs_dir),
        mtls: false,
        ready_file: None,
        metrics_addr: None,
    }
}

/// One greeting over REST, HTTP/2 chosen by ALPN, trusting only the stack's CA.
async fn rest_greeting(pki: &Pki, addr: SocketAddr) -> reqwest::Response {
    let mut tls = certs::client_config(&pki.ca_cert(), None).unwrap();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .timeout(PATIENCE)
        .build()
        .unwrap();
    client
        .post(format!("https://{addr}/v1/greetings"))
        .json(&json!({"name": "Ada", "delay_ms": 10}))
        .send()
        .await
        .unwrap()
}

/// One SayHello over gRPC, with tonic's own TLS client trusting the stack's CA.
async fn grpc_greeting(pki: &Pki, addr: SocketAddr) -> String {
    let ca = Certificate::from_pem(fs::read(pki.ca_cert()).unwrap());
    let channel = Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(ca))
        .unwrap()
        .timeout(PATIENCE)
        .connect_timeout(PATIENCE)
        .connect()
        .await
        .unwrap();
    let reply = GreeterClient::new(channel)
        .say_hello(HelloRequest {
            name: "Ada".into(),
            delay_ms: 10,
        })
        .await
        .unwrap();
    reply.into_inner().message
}

#[tokio::test]
async fn starts_with_a_new_pki_serves_both_protocols_and_stops_cleanly() {
    let temp = tempfile::tempdir().unwrap();
    // A folder that does not exist yet: the stack must create it, like a first run.
    let certs_dir = temp.path().join("certs");
    let stack = tokio::time::timeout(PATIENCE, Stack::start(&args(&certs_dir)))
        .await
        .unwrap()
        .unwrap();

    for file in PKI_FILES {
        assert!(certs_dir.join(file).is_file(), "{file} was not created");
    }
    let pki = Pki::new(&certs_dir);

    let response = rest_greeting(&pki, stack.rest_addr).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_2);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body, json!({"message": "Hello, Ada!"}));

    assert_eq!(grpc_greeting(&pki, stack.grpc_addr).await, "Hello, Ada!");

    let (grpc_stats, rest_stats) = (stack.grpc_stats.clone(), stack.rest_stats.clone());
    let (signal, signals) = mpsc::unbounded_channel();
    let running = tokio::spawn(stack.run_until(signals));
    signal.send(StopSignal::Terminate).unwrap();
    let result = tokio::time::timeout(PATIENCE, running)
        .await
        .expect("run_until returned after the signal")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert_eq!((grpc_stats.completed(), rest_stats.completed()), (1, 1));
}

#[tokio::test]
async fn a_busy_grpc_port_fails_start_naming_the_address() {
    let temp = tempfile::tempdir().unwrap();
    // Held open for the whole test, so the port is certainly taken.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = squatter.local_addr().unwrap();

    let mut args = args(temp.path());
    args.grpc_addr = busy;
    let error = match Stack::start(&args).await {
        Ok(_) => panic!("the stack started on a port that is already taken"),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.contains(&busy.to_string()), "{error}");
    assert!(error.contains("gRPC"), "{error}");
    assert!(
        error.contains("move this server with --grpc-addr or GRPC_ADDR"),
        "{error}"
    );
}

#[tokio::test]
async fn a_busy_rest_port_names_the_rest_flag() {
    let temp = tempfile::tempdir().unwrap();
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = squatter.local_addr().unwrap();

    let mut args = args(temp.path());
    args.rest_addr = busy;
    let error = match Stack::start(&args).await {
        Ok(_) => panic!("the stack started on a port that is already taken"),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.contains(&busy.to_string()), "{error}");
    assert!(
        error.contains("move this server with --rest-addr or REST_ADDR"),
        "{error}"
    );
}

#[tokio::test]
async fn a_partial_pki_fails_start_pointing_at_force() {
    // A real ca.pem, alone: as if the other four files had been deleted.
    let complete = tempfile::tempdir().unwrap();
    Pki::new(complete.path()).generate(false).unwrap();
    let partial = tempfile::tempdir().unwrap();
    let ca = fs::read(complete.path().join("ca.pem")).unwrap();
    fs::write(partial.path().join("ca.pem"), &ca).unwrap();

    let error = match Stack::start(&args(partial.path())).await {
        Ok(_) => panic!("the stack started with only ca.pem"),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.contains("--force"), "{error}");

    // Refusing must not have touched anything: still just the same ca.pem.
    let left: Vec<_> = fs::read_dir(partial.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(left, ["ca.pem"]);
    assert_eq!(fs::read(partial.path().join("ca.pem")).unwrap(), ca);
}

/// A TLS slowloris against both ports at once: 300 TCP connections to each
/// that never send a ClientHello. Both servers must still serve a new client
/// at once, not after one of the silent handshakes has timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_on_both_ports_do_not_lock_out_new_clients() {
    // Under the 10 s a silent connection may hold its handshake, generous
    // for a loaded machine.
    const SERVED_WITHIN: Duration = Duration::from_secs(5);
    let temp = tempfile::tempdir().unwrap();
    let stack = Stack::start(&args(temp.path())).await.unwrap();
    let pki = Pki::new(temp.path());

    let mut silent = Vec::new();
    for addr in [stack.grpc_addr, stack.rest_addr] {
        for _ in 0..300 {
            silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let grpc = tokio::time::timeout(SERVED_WITHIN, grpc_greeting(&pki, stack.grpc_addr))
        .await
        .expect("a SayHello waited behind the silent connections");
    assert_eq!(grpc, "Hello, Ada!");
    let rest = tokio::time::timeout(SERVED_WITHIN, rest_greeting(&pki, stack.rest_addr))
        .await
        .expect("a REST greeting waited behind the silent connections");
    assert_eq!(rest.status(), StatusCode::OK);
    drop(silent);
}

/// `stack --ready-file PATH`, as `cargo xtask observe` starts it: once both
/// servers listen, the file names their addresses, gRPC first, and each
/// answers at its address.
#[tokio::test]
async fn the_ready_file_names_both_servers_once_they_listen() {
    let temp = tempfile::tempdir().unwrap();
    let certs_dir = temp.path().join("certs");
    let ready = temp.path().join("ready");
    let mut stack = KillOnDrop::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_stack"))
            .args(["--grpc-addr", "127.0.0.1:0", "--rest-addr", "127.0.0.1:0"])
            .arg("--certs-dir")
            .arg(&certs_dir)
            .arg("--ready-file")
            .arg(&ready),
    )
    .unwrap();
    let text = stack.wait_for_ready_file(&ready, PATIENCE).unwrap();
    let addrs: Vec<SocketAddr> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(addrs.len(), 2, "{text}");
    let pki = Pki::new(&certs_dir);
    assert_eq!(grpc_greeting(&pki, addrs[0]).await, "Hello, Ada!");
    assert_eq!(rest_greeting(&pki, addrs[1]).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn one_metrics_port_counts_both_servers() {
    let temp = tempfile::tempdir().unwrap();
    let mut args = args(temp.path());
    args.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    let stack = Stack::start(&args).await.unwrap();
    let pki = Pki::new(temp.path());
    let metrics = stack.metrics_addr.expect("metrics are on");
    assert_eq!(
        rest_greeting(&pki, stack.rest_addr).await.status(),
        StatusCode::OK
    );
    assert_eq!(grpc_greeting(&pki, stack.grpc_addr).await, "Hello, Ada!");
    let grpc_ok = "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"greeter.v1.Greeter\",grpc_method=\"SayHello\",grpc_code=\"OK\"}";
    let rest_ok = "http_requests_total{method=\"POST\",route=\"/v1/greetings\",status=\"200\"}";
    let scrape = grpc_server::testing::scrape::scrape_until(metrics, |s| {
        s.value(grpc_ok) == 1.0 && s.value(rest_ok) == 1.0
    })
    .await;
    assert_eq!(scrape.value("http_requests_in_flight"), 0.0);
}

#[tokio::test]
async fn a_busy_metrics_port_fails_start_naming_the_address() {
    let temp = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut args = args(temp.path());
    args.metrics_addr = Some(taken.local_addr().unwrap());
    let error = match Stack::start(&args).await {
        Ok(_) => panic!("the stack started on a taken metrics port"),
        Err(e) => format!("{e:#}"),
    };
    let addr = taken.local_addr().unwrap().to_string();
    assert!(
        error.contains("metrics") && error.contains(&addr),
        "{error}"
    );
}
