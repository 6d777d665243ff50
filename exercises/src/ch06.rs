//! Chapter 6: one channel for many calls.
//!
//! `greet_all` greets a list of names, every call started at once, as the
//! chapter's `burst` does. A tonic `Channel` owns at most one HTTP/2
//! connection, and each call is one stream on it, so a single channel can
//! carry all of them. This version builds a new channel for every call: each
//! opens a connection of its own (a TCP handshake, and in production a TLS one
//! too), and the server accepts as many connections as there are names. Make
//! the calls share one connection.
//!
//! Run `cargo test --manifest-path exercises/Cargo.toml --test ch06`.

use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{Status, transport::Endpoint};

// ANCHOR: greet_all
/// Says hello to each of `names` over `endpoint`, all the calls started
/// together, and returns the replies in the order of `names`; the first
/// failed call (in that order) is the error.
pub async fn greet_all(endpoint: &Endpoint, names: &[&str]) -> Result<Vec<String>, Status> {
    let calls: Vec<_> = names
        .iter()
        .map(|name| {
            // Lazy: the channel connects when its call is made.
            let channel = endpoint.connect_lazy();
            let mut client = GreeterClient::new(channel);
            let request = HelloRequest {
                name: name.to_string(),
                delay_ms: 0,
            };
            tokio::spawn(async move {
                let reply = client.say_hello(request).await?;
                Ok::<_, Status>(reply.into_inner().message)
            })
        })
        .collect();
    let mut replies = Vec::with_capacity(calls.len());
    for call in calls {
        let reply = call
            .await
            .map_err(|e| Status::unknown(format!("the call's task failed: {e}")))??;
        replies.push(reply);
    }
    Ok(replies)
}
// ANCHOR_END: greet_all
