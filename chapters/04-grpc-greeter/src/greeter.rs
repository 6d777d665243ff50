//! The `greeter.v1.Greeter` service.

use std::{collections::HashMap, sync::Arc, time::Duration};

use proto::greeter::v1::{HelloReply, HelloRequest, greeter_server};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};

use crate::lifetime::{CallStats, grpc_timeout};

/// The longest `delay_ms` either server accepts. Larger values are refused, so
/// that a typo cannot park a call (and its memory) for hours.
pub const MAX_DELAY_MS: u32 = 60_000;

/// The longest name either server accepts, in characters.
pub const MAX_NAME_CHARS: usize = 256;

/// The domain of the greeter's error reasons (google.rpc.ErrorInfo): a reason
/// such as `NAME_EMPTY` means something only together with who defined it.
pub const ERROR_DOMAIN: &str = "greeter.workshop.example";

/// Why a request was refused: which field, what was wrong with it in words,
/// and the same as a stable identifier a program can match on. Both servers
/// use these rules, so gRPC and REST refuse exactly the same inputs and say
/// the same about each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest {
    pub field: &'static str,
    pub description: String,
    /// SCREAMING_SNAKE_CASE, as google.rpc.ErrorInfo wants its reasons.
    pub reason: &'static str,
}

impl std::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.description)
    }
}

// ANCHOR: check_request
pub fn check_request(name: &str, delay_ms: u32) -> Result<(), InvalidRequest> {
    if name.trim().is_empty() {
        return Err(InvalidRequest {
            field: "name",
            description: "must not be empty".into(),
            reason: "NAME_EMPTY",
        });
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(InvalidRequest {
            field: "name",
            description: format!("is {chars} characters long; the maximum is {MAX_NAME_CHARS}"),
            reason: "NAME_TOO_LONG",
        });
    }
    if delay_ms > MAX_DELAY_MS {
        return Err(InvalidRequest {
            field: "delay_ms",
            description: format!("is {delay_ms}; the maximum is {MAX_DELAY_MS}"),
            reason: "DELAY_TOO_LONG",
        });
    }
    Ok(())
}
// ANCHOR_END: check_request

// ANCHOR: to_status
impl InvalidRequest {
    /// INVALID_ARGUMENT, with the refusal said twice: in the message, for
    /// people and for clients that read nothing else, and as details for
    /// programs: a BadRequest naming the field (so a form can mark it) and an
    /// ErrorInfo whose reason can be matched without parsing English.
    pub fn to_status(&self) -> Status {
        let violation = FieldViolation {
            reason: self.reason.into(),
            ..FieldViolation::new(self.field, &self.description)
        };
        let mut details = ErrorDetails::with_bad_request(vec![violation]);
        details.set_error_info(self.reason, ERROR_DOMAIN, HashMap::new());
        Status::with_error_details(Code::InvalidArgument, self.to_string(), details)
    }
}
// ANCHOR_END: to_status

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
        check_request(&name, delay_ms).map_err(|e| e.to_status())?;

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
        assert!(
            err.description.contains(&MAX_NAME_CHARS.to_string()),
            "{err}"
        );
    }

    #[test]
    fn refuses_delays_over_the_maximum_and_names_the_maximum() {
        let err = check_request("Ada", MAX_DELAY_MS + 1).unwrap_err();
        assert_eq!(err.field, "delay_ms");
        assert!(err.to_string().contains("60000"), "{err}");
    }

    #[test]
    fn each_refusal_has_its_own_reason() {
        let reasons = [
            check_request("", 0),
            check_request(&"x".repeat(MAX_NAME_CHARS + 1), 0),
            check_request("Ada", MAX_DELAY_MS + 1),
        ]
        .map(|r| r.unwrap_err().reason);
        assert_eq!(reasons, ["NAME_EMPTY", "NAME_TOO_LONG", "DELAY_TOO_LONG"]);
    }

    #[test]
    fn the_status_carries_the_check_as_details() {
        let err = check_request("Ada", MAX_DELAY_MS + 1).unwrap_err();
        let status = err.to_status();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "delay_ms: is 60001; the maximum is 60000");
        // Decoded from the status's bytes, as a client decodes them.
        let details = status.get_error_details();
        let violations = &details.bad_request().unwrap().field_violations;
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].field, "delay_ms");
        assert_eq!(violations[0].description, err.description);
        assert_eq!(violations[0].reason, "DELAY_TOO_LONG");
        let info = details.error_info().unwrap();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("DELAY_TOO_LONG", ERROR_DOMAIN)
        );
    }
}
