//! The `greeter.v1.Greeter` service.

use std::{sync::Arc, time::Duration};

use proto::greeter::v1::{HelloReply, HelloRequest, greeter_server};
use tonic::{Request, Response, Status};

use crate::lifetime::{CallStats, grpc_timeout};

/// The longest `delay_ms` either server accepts. Larger values are refused, so
/// that a typo cannot park a call (and its memory) for hours.
pub const MAX_DELAY_MS: u32 = 60_000;

/// The longest name either server accepts, in characters.
pub const MAX_NAME_CHARS: usize = 256;

/// Why a request was refused: which field, and what was wrong with it. Both
/// servers use these rules, so gRPC and REST refuse exactly the same inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

// ANCHOR: check_request
pub fn check_request(name: &str, delay_ms: u32) -> Result<(), InvalidRequest> {
    if name.trim().is_empty() {
        return Err(InvalidRequest {
            field: "name",
            reason: "must not be empty".into(),
        });
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(InvalidRequest {
            field: "name",
            reason: format!("is {chars} characters long; the maximum is {MAX_NAME_CHARS}"),
        });
    }
    if delay_ms > MAX_DELAY_MS {
        return Err(InvalidRequest {
            field: "delay_ms",
            reason: format!("is {delay_ms}; the maximum is {MAX_DELAY_MS}"),
        });
    }
    Ok(())
}
// ANCHOR_END: check_request

pub fn greeting(name: &str) -> String {
    format!("Hello, {name}!")
}

#[derive(Clone, Default)]
pub struct Greeter {
    pub stats: Arc<CallStats>,
}

// ANCHOR: say_hello
#[tonic::async_trait]
impl greeter_server::Greeter for Greeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let deadline = grpc_timeout(request.metadata());
        let HelloRequest { name, delay_ms } = request.into_inner();
        check_request(&name, delay_ms).map_err(|e| Status::invalid_argument(e.to_string()))?;

        // If the client cancels or its deadline passes, tonic drops this future
        // at the `.await` below: the wait stops there, and `call`'s Drop logs it.
        let call = self.stats.start("gRPC SayHello", deadline);
        // A zero delay skips the timer: Tokio rounds every sleep up to its 1 ms
        // tick, which would add a millisecond to every "instant" call (chapter 10).
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms.into())).await;
        }
        call.finish();

        Ok(Response::new(HelloReply {
            message: greeting(&name),
        }))
    }
}
// ANCHOR_END: say_hello

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_normal_request() {
        assert_eq!(check_request("Ada", 800), Ok(()));
        assert_eq!(check_request("Ada", MAX_DELAY_MS), Ok(()));
        assert_eq!(greeting("Ada"), "Hello, Ada!");
    }

    #[test]
    fn refuses_empty_and_blank_names() {
        for name in ["", "   ", "\t\n"] {
            let err = check_request(name, 0).unwrap_err();
            assert_eq!(err.field, "name");
        }
    }

    #[test]
    fn refuses_overlong_names_counting_characters_not_bytes() {
        let ok = "é".repeat(MAX_NAME_CHARS); // 2 bytes each, still within the limit
        assert_eq!(check_request(&ok, 0), Ok(()));
        let err = check_request(&"x".repeat(MAX_NAME_CHARS + 1), 0).unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.reason.contains(&MAX_NAME_CHARS.to_string()), "{err}");
    }

    #[test]
    fn refuses_delays_over_the_maximum_and_names_the_maximum() {
        let err = check_request("Ada", MAX_DELAY_MS + 1).unwrap_err();
        assert_eq!(err.field, "delay_ms");
        assert!(err.to_string().contains("60000"), "{err}");
    }
}
