//! The gRPC message frame: how one protobuf message travels in an HTTP/2
//! request or response body.
//!
//! A gRPC body is a sequence of frames: one byte saying whether the message is
//! compressed, four bytes of big-endian length, then the protobuf bytes. tonic
//! writes them for us; a program that speaks gRPC without tonic (`curl` fed by
//! `grpc_frame`, chapter 10's hand-driven hyper connections) writes them here.

use prost::Message;

// ANCHOR: frame
/// `message` as one gRPC frame: the 5-byte prefix, then the message itself.
pub fn grpc_frame(message: &impl Message) -> Vec<u8> {
    let len = message.encoded_len();
    let mut framed = Vec::with_capacity(5 + len);
    framed.push(0); // 0 = not compressed
    framed.extend_from_slice(&(len as u32).to_be_bytes());
    message
        .encode(&mut framed)
        .expect("a Vec grows to hold any message");
    framed
}
// ANCHOR_END: frame

#[cfg(test)]
mod tests {
    use super::*;
    use crate::greeter::v1::HelloRequest;

    #[test]
    fn frames_a_greeting_with_a_big_endian_length() {
        let message = HelloRequest {
            name: "Ada".into(),
            delay_ms: 0,
        };
        assert_eq!(
            grpc_frame(&message),
            [0, 0, 0, 0, 5, 0x0a, 3, b'A', b'd', b'a']
        );
    }

    #[test]
    fn an_empty_message_is_just_the_prefix() {
        assert_eq!(grpc_frame(&HelloRequest::default()), [0, 0, 0, 0, 0]);
    }
}
