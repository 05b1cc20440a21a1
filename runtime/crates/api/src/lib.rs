//! The runtime's side of the Kubernetes API.
//!
//! - [`api_client`]: the Kubernetes client, with `TCP_NODELAY` on its connections.
//! - [`api_error`]: the classes of API errors the runtime acts on.
//! - [`api_answer`]: writes whose answer is read for identity and conditions only.
//! - [`object_reference`]: the object an Event or a condition is about.
//! - [`events`]: Kubernetes Events with deduplication.

pub mod api_answer;
pub mod api_client;
pub mod api_error;
pub mod events;
pub mod object_reference;

use operator_clock as clock;

/// Renders an error with its chain of causes, `outer: inner: ...`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // Many errors already print their source in their own message.
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
