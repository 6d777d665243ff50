//! Chapter 5's exercise, `exercises::ch05::deadline`, as middleware on the
//! chapter's real router, driven with `tower::ServiceExt::oneshot` on a paused
//! clock. The handler's `CallGuard` (chapter 4) counts, in `CallStats`, the
//! greetings whose work finished and those whose future was dropped first.

use std::{sync::Arc, time::Duration};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    http::{HeaderValue, Request, StatusCode, header},
    middleware,
};
use exercises::ch05::{DEADLINE_HEADER, MAX_DEADLINE, deadline};
use grpc_server::CallStats;
use proto::status::Code;
use rest_server::{
    Problem,
    api::{AppState, router},
};
use tokio::time::{Instant, sleep, timeout};
use tower::ServiceExt;

/// The chapter's router behind the deadline middleware, and its counters.
fn app() -> (Router, Arc<CallStats>) {
    let state = AppState::default();
    let stats = state.stats.clone();
    (router(state).layer(middleware::from_fn(deadline)), stats)
}

/// `POST /v1/greetings` for a greeting that takes `delay_ms`, with each of
/// `deadlines` as an `x-deadline-ms` header.
fn greeting(delay_ms: u32, deadlines: &[HeaderValue]) -> Request<Body> {
    let mut request = Request::post("/v1/greetings")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(format!(
            r#"{{"name":"Ada","delay_ms":{delay_ms}}}"#
        )))
        .unwrap();
    for value in deadlines {
        request.headers_mut().append(DEADLINE_HEADER, value.clone());
    }
    request
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap()
}

struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl Answer {
    fn problem(&self) -> Problem {
        assert_eq!(
            self.content_type.as_deref(),
            Some(rest_server::problem::CONTENT_TYPE),
            "an error is problem details"
        );
        let Json(problem) = Json::<Problem>::from_bytes(&self.body).expect("a problem body");
        problem
    }
}

async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap();
    Answer {
        status,
        content_type,
        body,
    }
}

/// Lets whatever the runtime still has to do (a task told to stop, say) run.
async fn settle() {
    sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_deadline_gets_a_504_problem_in_time() {
    let (app, _stats) = app();
    let started = Instant::now();
    let answer = send(&app, greeting(1000, &[value("50")])).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the answer should come when the 50 ms of x-deadline-ms have passed, \
         not after the handler's whole second"
    );
    assert_eq!(
        answer.status,
        StatusCode::GATEWAY_TIMEOUT,
        "a call whose deadline passed is a 504"
    );
    let problem = answer.problem();
    assert_eq!(problem.code(), Some(Code::DeadlineExceeded), "{problem:?}");
    assert_eq!(problem.status, 504);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_stops_the_handlers_work() {
    let (app, stats) = app();
    let answer = send(&app, greeting(1000, &[value("50")])).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    settle().await;
    assert_eq!(
        (stats.in_flight(), stats.ended_early()),
        (0, 1),
        "still to do (ch05): (calls in flight, calls ended early) should be \
         (0, 1). The 504 has gone out, but the handler is still \
         waiting out its 1 s greeting. When the deadline passes, drop the \
         handler's future (await it inside the timeout) instead of leaving it \
         to run on its own task."
    );
    sleep(Duration::from_secs(2)).await;
    assert_eq!(
        stats.completed(),
        0,
        "still to do (ch05): the handler of a call answered 504 went on to \
         finish its greeting, work whose answer nobody reads"
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_before_its_deadline_still_stops_the_work() {
    let (app, stats) = app();
    // The client allows 5 s but gives up after 100 ms: the server learns of
    // it only by the request's future being dropped, as hyper does.
    let call = app.clone().oneshot(greeting(1000, &[value("5000")]));
    assert!(
        timeout(Duration::from_millis(100), call).await.is_err(),
        "the greeting takes 1 s"
    );
    settle().await;
    assert_eq!(
        (stats.in_flight(), stats.ended_early()),
        (0, 1),
        "still to do (ch05): (calls in flight, calls ended early) should be \
         (0, 1). The client went away, but the handler works on. \
         On a task of its own it is no longer part of the request's future, \
         so dropping that future (all a server learns of a client leaving) \
         does not stop it."
    );
    sleep(Duration::from_secs(2)).await;
    assert_eq!(
        stats.completed(),
        0,
        "still to do (ch05): the handler finished a greeting for a client \
         that had gone"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_within_their_deadline_and_calls_without_one_are_served() {
    let (app, stats) = app();
    let max = MAX_DEADLINE.as_millis().to_string();
    for (delay_ms, deadlines) in [
        (0, vec![value("50")]),
        (1000, vec![value("2000")]),
        (1000, vec![value(&max)]),
        // No header, no deadline: a slow greeting is not cut short.
        (1000, vec![]),
    ] {
        let answer = send(&app, greeting(delay_ms, &deadlines)).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "delay {delay_ms} ms, x-deadline-ms {deadlines:?}: {:?}",
            answer.body
        );
        assert_eq!(&answer.body[..], br#"{"message":"Hello, Ada!"}"#);
    }
    settle().await;
    assert_eq!(
        (stats.completed(), stats.ended_early(), stats.in_flight()),
        (4, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_malformed_deadline_is_a_400_that_names_the_header() {
    let (app, stats) = app();
    let too_long = (MAX_DEADLINE.as_millis() + 1).to_string();
    let cases = [
        vec![value("soon")],
        vec![value("")],
        vec![value("0")],
        vec![value("-50")],
        vec![value("+50")],
        vec![value("1.5")],
        vec![value("50ms")],
        vec![value(&too_long)],
        vec![value("99999999999999999999999999999999999999999999")],
        vec![HeaderValue::from_bytes(b"5\xff0").unwrap()],
        vec![value("50"), value("60")],
    ];
    for deadlines in cases {
        let answer = send(&app, greeting(1000, &deadlines)).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "x-deadline-ms {deadlines:?} should be refused: {:?}",
            answer.body
        );
        let problem = answer.problem();
        assert_eq!(
            problem.field.as_deref(),
            Some(DEADLINE_HEADER),
            "the problem names the header at fault: {problem:?}"
        );
        assert_eq!(problem.code(), Some(Code::InvalidArgument));
        assert!(
            problem.detail.contains(DEADLINE_HEADER),
            "{}",
            problem.detail
        );
    }
    assert_eq!(
        stats.started.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "a request refused for its header never reaches the handler's work"
    );
}
