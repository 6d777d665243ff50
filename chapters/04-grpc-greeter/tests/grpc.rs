//! End-to-end tests of the gRPC greeter: a real server on 127.0.0.1:0, real TLS
//! with a fresh PKI per test, and tonic clients talking to it.
//!
//! Waits are bounded by generous timeouts so a hang fails the test instead of
//! stalling the suite; nothing asserts how fast anything is, only what happened.

use std::{net::SocketAddr, time::Duration};

use grpc_server::{
    BoundServer, ERROR_DOMAIN, MAX_DELAY_MS, MAX_NAME_CHARS, check_request,
    testing::{
        KillOnDrop, TempPki, TestServer, WAIT, spawn_until_dropped, tls_channel, wait_until, within,
    },
};
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::time::Instant;
use tonic::{
    Code, Request,
    transport::{Channel, Identity},
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_types::StatusExt;

/// The "slow server" delay for calls that are meant to end early: long enough
/// that finishing it would show up clearly in the elapsed time.
const SLOW_MS: u32 = 5_000;

/// A TLS channel that trusts the server's CA and, for mTLS, presents `identity`.
async fn connect(
    server: &TestServer,
    identity: Option<Identity>,
) -> Result<Channel, tonic::transport::Error> {
    tls_channel(server.addr, &server.pki.ca_cert(), identity).await
}

async fn greeter(server: &TestServer) -> GreeterClient<Channel> {
    GreeterClient::new(connect(server, None).await.expect("connect"))
}

fn hello(name: &str, delay_ms: u32) -> HelloRequest {
    HelloRequest {
        name: name.into(),
        delay_ms,
    }
}

/// One ordinary call, to show the server still serves after whatever came before.
async fn assert_still_greets(client: &mut GreeterClient<Channel>) {
    let reply = within("greeting", client.say_hello(hello("Grace", 0)))
        .await
        .expect("the server must keep serving");
    assert_eq!(reply.into_inner().message, "Hello, Grace!");
}

/// Waits until the server has counted the one call as ended early, and checks
/// it never completed: the handler was dropped, not left to run out its delay.
async fn assert_ended_early(server: &TestServer) {
    wait_until("call counted as ended early", &server.stats, |s| {
        s.ended_early() == 1 && s.in_flight() == 0
    })
    .await;
    assert_eq!(server.stats.completed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greets_over_tls() {
    let server = TestServer::grpc(false).await;
    let mut client = greeter(&server).await;

    let reply = within("greeting", client.say_hello(hello("Ada", 0)))
        .await
        .expect("SayHello");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
    assert_eq!(server.stats.completed(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_serving_for_the_server_and_the_greeter() {
    let server = TestServer::grpc(false).await;
    let mut health = HealthClient::new(connect(&server, None).await.expect("connect"));

    // "" asks about the server as a whole; the other asks about one service.
    for service in ["", "greeter.v1.Greeter"] {
        let request = HealthCheckRequest {
            service: service.into(),
        };
        let reply = within("health check", health.check(request))
            .await
            .unwrap_or_else(|e| panic!("Check({service:?}): {e}"));
        assert_eq!(
            reply.into_inner().status(),
            ServingStatus::Serving,
            "{service:?}"
        );
    }
}

/// Reflection answers a ListServices question with the served services, in
/// either protocol version: `$v` is `v1` or `v1alpha`, which are different
/// services (`grpc.reflection.v1.ServerReflection`,
/// `grpc.reflection.v1alpha.ServerReflection`) with the same messages.
macro_rules! reflection_lists_the_greeter {
    ($test:ident, $v:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            use tonic_reflection::pb::$v::{
                ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
                server_reflection_request::MessageRequest,
                server_reflection_response::MessageResponse,
            };
            let server = TestServer::grpc(false).await;
            let mut reflection =
                ServerReflectionClient::new(connect(&server, None).await.expect("connect"));

            // Reflection is a bidirectional stream; one ListServices question is enough.
            let question = ServerReflectionRequest {
                host: String::new(),
                message_request: Some(MessageRequest::ListServices(String::new())),
            };
            let mut answers = within(
                "reflection call",
                reflection.server_reflection_info(tokio_stream::once(question)),
            )
            .await
            .expect("ServerReflectionInfo")
            .into_inner();
            let answer = within("reflection answer", answers.message())
                .await
                .expect("reflection stream")
                .expect("one answer");

            let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
                panic!("not a service list: {:?}", answer.message_response);
            };
            let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
            println!("reflection {} lists: {names:?}", stringify!($v));
            assert!(names.contains(&"greeter.v1.Greeter"), "{names:?}");
        }
    };
}

reflection_lists_the_greeter!(reflection_v1_lists_the_greeter, v1);
// grpcio's reflection client, older grpcurl and several GUI tools ask v1alpha.
reflection_lists_the_greeter!(reflection_v1alpha_lists_the_greeter, v1alpha);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_get_invalid_argument_with_a_bad_request_naming_the_field() {
    let server = TestServer::grpc(false).await;
    let mut client = greeter(&server).await;

    for (request, field, reason) in [
        (hello("", 0), "name", "NAME_EMPTY"),
        (hello(" ", 0), "name", "NAME_EMPTY"),
        (
            hello(&"x".repeat(MAX_NAME_CHARS + 1), 0),
            "name",
            "NAME_TOO_LONG",
        ),
        (hello("Ada", MAX_DELAY_MS + 1), "delay_ms", "DELAY_TOO_LONG"),
    ] {
        let expected = check_request(&request.name, request.delay_ms).unwrap_err();
        let status = within("invalid call", client.say_hello(request))
            .await
            .expect_err("an invalid request must be refused");
        println!("{field}: {:?} {:?}", status.code(), status.message());
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert_eq!(status.message(), expected.to_string(), "{status:?}");
        // The details came over the wire, in grpc-status-details-bin.
        let details = status.check_error_details().expect("details that decode");
        let violations = &details
            .bad_request()
            .expect("a BadRequest")
            .field_violations;
        assert_eq!(violations.len(), 1, "{details:?}");
        assert_eq!(violations[0].field, field);
        assert_eq!(violations[0].description, expected.description);
        assert_eq!(violations[0].reason, reason);
        let info = details.error_info().expect("an ErrorInfo");
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            (reason, ERROR_DOMAIN)
        );
    }
    // Refused before any work started.
    assert_eq!(server.handlers_started(), 0);

    assert_still_greets(&mut client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_slow_call_is_counted_as_ended_early() {
    let server = TestServer::grpc(false).await;
    let client = greeter(&server).await;

    let mut caller = client.clone();
    let call = tokio::spawn(async move { caller.say_hello(hello("Ada", SLOW_MS)).await });
    wait_until("call in flight", &server.stats, |s| s.in_flight() == 1).await;

    // Aborting the task drops the call's future: the client resets the HTTP/2
    // stream, and the server drops the handler mid-wait.
    call.abort();
    assert_ended_early(&server).await;

    assert_still_greets(&mut client.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_deadline_ends_the_call_early_on_both_sides() {
    let server = TestServer::grpc(false).await;
    let mut client = greeter(&server).await;

    let mut request = Request::new(hello("Ada", SLOW_MS));
    request.set_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let status = within("call with a deadline", client.say_hello(request))
        .await
        .expect_err("the deadline must end the call");
    let elapsed = started.elapsed();
    println!(
        "deadline: {:?} {:?} after {elapsed:?}",
        status.code(),
        status.message()
    );

    // Two timers race here: the server's answers DEADLINE_EXCEEDED
    // (`grpc_server::spec_codes`), the tonic client's own reports CANCELLED
    // "Timeout expired". tests/spec_codes.rs checks the server's answer alone.
    assert!(
        matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{status:?}"
    );
    assert!(
        elapsed < Duration::from_millis(SLOW_MS.into()) - Duration::from_secs(1),
        "the call ran its full delay: {elapsed:?}"
    );
    assert_ended_early(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_rejects_a_client_without_a_certificate_and_accepts_one_with() {
    let server = TestServer::grpc(true).await;

    // With TLS 1.3 the client may finish its side of the handshake before the
    // server checks for a certificate, so the refusal can surface at connect or
    // at the first call; either way no greeting comes back.
    let anonymous = async {
        let channel = connect(&server, None).await.map_err(|e| format!("{e:?}"))?;
        let reply = GreeterClient::new(channel)
            .say_hello(hello("Ada", 0))
            .await
            .map_err(|e| format!("{e:?}"))?;
        Ok::<_, String>(reply)
    };
    let refused = within("call without a client certificate", anonymous).await;
    println!("without a client certificate: {refused:?}");
    assert!(refused.is_err(), "{refused:?}");

    let channel = connect(&server, Some(server.pki.client_identity()))
        .await
        .expect("connect with a client certificate");
    let reply = within(
        "call with a client certificate",
        GreeterClient::new(channel).say_hello(hello("Ada", 0)),
    )
    .await
    .expect("SayHello with a client certificate");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_a_call_in_flight_finish() {
    let mut server = TestServer::grpc(false).await;
    let mut caller = greeter(&server).await;

    let call = tokio::spawn(async move { caller.say_hello(hello("Ada", 1_000)).await });
    wait_until("call in flight", &server.stats, |s| s.in_flight() == 1).await;

    server.serving.stop();
    let reply = within("call in flight during shutdown", call)
        .await
        .expect("call task")
        .expect("a call in flight must finish during a graceful shutdown");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");

    within("serve() to return", server.serving.join())
        .await
        .expect("server task")
        .expect("serve() must return Ok after a graceful shutdown");
    assert_eq!(server.stats.completed(), 1);
    assert_eq!(server.stats.ended_early(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_is_refused_and_the_server_keeps_serving() {
    let server = TestServer::grpc(false).await;
    let mut client = greeter(&server).await;

    // 100 KiB is over MAX_MESSAGE_BYTES (64 KiB), so the limit refuses it before
    // the name-length check ever sees it.
    let status = within(
        "oversized call",
        client.say_hello(hello(&"x".repeat(100 * 1024), 0)),
    )
    .await
    .expect_err("an oversized request must be refused");
    println!(
        "oversized request: {:?} {:?}",
        status.code(),
        status.message()
    );
    assert_ne!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(server.handlers_started(), 0);

    assert_still_greets(&mut client).await;
}

/// A stream that never ends by itself (a health Watch) must not hold shutdown
/// forever: it sees NOT_SERVING, and serve() returns once the drain limit passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_not_held_forever_by_a_stream_that_never_ends() {
    let pki = TempPki::new();
    let server = BoundServer::bind(&pki.server_args(false))
        .await
        .expect("bind")
        .with_drain_timeout(Duration::from_millis(300));
    let addr = server.local_addr();
    let mut serving = spawn_until_dropped(|shutdown| server.serve(shutdown));

    let channel = tls_channel(addr, &pki.ca_cert(), None)
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let mut watch = within("watch", health.watch(request))
        .await
        .expect("watch")
        .into_inner();
    let first = within("first status", watch.message())
        .await
        .expect("status")
        .expect("a status");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    serving.stop();
    // The whole server's entry ("") turns NOT_SERVING when the drain starts.
    let next = within("status after shutdown", watch.message())
        .await
        .expect("the watch is still open while draining")
        .expect("a status");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    within("serve() to return despite the open Watch", serving.join())
        .await
        .expect("server task")
        .expect("serve() returns Ok when the drain limit passes");
}

/// `grpc-server --ready-file PATH`, as `cargo xtask observe` starts it: the
/// file appears once the server listens, it names the address, and a call to
/// that address is answered.
#[tokio::test]
async fn the_program_writes_its_ready_file_once_it_listens() {
    let pki = TempPki::new();
    let ready = pki.dir.join("ready");
    let mut server = KillOnDrop::spawn(
        std::process::Command::new(env!("CARGO_BIN_EXE_grpc-server"))
            .args(["--addr", "127.0.0.1:0", "--certs-dir"])
            .arg(&pki.dir)
            .arg("--ready-file")
            .arg(&ready),
    )
    .expect("start grpc-server");
    let text = server
        .wait_for_ready_file(&ready, WAIT)
        .expect("the ready file");
    let addr: SocketAddr = text.trim().parse().expect("an address in the ready file");
    let channel = tls_channel(addr, &pki.ca_cert(), None)
        .await
        .expect("connect");
    let reply = within(
        "SayHello",
        GreeterClient::new(channel).say_hello(HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        }),
    )
    .await
    .expect("a reply");
    assert_eq!(reply.into_inner().message, "Hello, Ada!");
}

#[test]
fn a_busy_port_names_the_flag_that_moves_the_server() {
    let pki = TempPki::new();
    // Held open for the whole test, so the port is certainly taken.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = squatter.local_addr().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_grpc-server"))
        .args(["--addr", &busy.to_string(), "--certs-dir"])
        .arg(&pki.dir)
        .output()
        .expect("run grpc-server");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&busy.to_string()), "{stderr}");
    assert!(
        stderr.contains("move this server with --addr or GRPC_ADDR"),
        "{stderr}"
    );
}
