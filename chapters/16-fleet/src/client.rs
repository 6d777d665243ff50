//! One call to the greeter as a tower `Service`: what the balancers and the
//! hedge of this chapter pick, wrap and cancel.
//!
//! A [`Call`] carries an absolute deadline, not a timeout: a call that waits
//! for a replica, or a hedge sent later, sends only the time that is left,
//! so no copy of the call can outlive the caller's deadline.

use std::{
    future::Future,
    net::SocketAddr,
    path::Path,
    pin::Pin,
    task::{Context, Poll},
};

use anyhow::Context as _;
use grpc_client::channel::CONNECT_TIMEOUT;
use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tokio::time::Instant;
use tonic::{
    Status,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint},
};

use crate::replica::REPLICA_HEADER;

/// One call: who to greet, how long the server should take, and when the
/// caller stops waiting.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    pub delay_ms: u32,
    pub deadline: Instant,
}

/// What came back: the replica that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub replica: String,
}

/// An endpoint for a replica at `addr`. The development certificate names
/// `localhost` and 127.0.0.1, not 127.0.0.2-4: the client checks the
/// certificate against `localhost`, whatever address it dials.
pub fn endpoint(addr: SocketAddr, ca: &Path) -> anyhow::Result<Endpoint> {
    let pem = std::fs::read(ca).with_context(|| {
        format!(
            "cannot read the CA certificate {} (the replicas make it when they start)",
            ca.display()
        )
    })?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem))
        .domain_name("localhost")
        .timeout(CONNECT_TIMEOUT);
    Ok(Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(CONNECT_TIMEOUT))
}

/// Calls the greeter over one channel (to one replica, or tonic's own
/// balanced channel).
#[derive(Debug, Clone)]
pub struct Caller {
    client: GreeterClient<Channel>,
}

impl Caller {
    pub fn new(channel: Channel) -> Caller {
        Caller {
            client: GreeterClient::new(channel),
        }
    }
}

pub type CallFuture = Pin<Box<dyn Future<Output = Result<Answer, Status>> + Send>>;

// ANCHOR: caller
impl tower::Service<Call> for Caller {
    type Response = Answer;
    type Error = Status;
    type Future = CallFuture;

    /// Always ready: a channel queues calls while it connects, and the
    /// balancer learns of a replica's health from the discovery stream.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> CallFuture {
        let mut client = self.client.clone();
        Box::pin(async move {
            let left = call.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Status::deadline_exceeded("no time left to send the call"));
            }
            let mut request = tonic::Request::new(HelloRequest {
                name: call.name,
                delay_ms: call.delay_ms,
            });
            // tonic sends the time left as grpc-timeout and ends the call
            // itself when it runs out.
            request.set_timeout(left);
            let response = client.say_hello(request).await?;
            let replica = response
                .metadata()
                .get(REPLICA_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("?")
                .to_string();
            Ok(Answer { replica })
        })
    }
}
// ANCHOR_END: caller
