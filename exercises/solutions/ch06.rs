//! Chapter 6: one channel for many calls (the solution).
//!
//! One channel is made before the calls, and each call gets a clone of it.
//! The clones are handles to the same background task, which owns the one
//! connection: every call becomes a stream on it, and calls made while it is
//! still connecting wait in the channel's queue for that connection instead
//! of starting another.

use proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
use tonic::{Status, transport::Endpoint};

// ANCHOR: greet_all
/// Says hello to each of `names` over `endpoint`, all the calls started
/// together, and returns the replies in the order of `names`; the first
/// failed call (in that order) is the error.
pub async fn greet_all(endpoint: &Endpoint, names: &[&str]) -> Result<Vec<String>, Status> {
    // One channel, one connection, for every call below. Lazy: a batch with
    // no names connects to nothing.
    let channel = endpoint.connect_lazy();
    let calls: Vec<_> = names
        .iter()
        .map(|name| {
            // A clone is a handle to the same connection, not a new one.
            let mut client = GreeterClient::new(channel.clone());
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
