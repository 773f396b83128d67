//! The guest agent of icebox's microVMs and the host side of its protocol: one virtio-serial
//! port carries multiplexed streams (control, connections to an instance's proxy socket, its
//! output, lifecycle events). See docs/vm.md.
//!
//! - [`protocol`]: the wire types.
//! - [`mux`]: a yamux session driven by a task, used by both ends.
//! - [`client::AgentClient`]: the host's typed client.
//! - [`forward::Forwarder`]: a host UNIX socket whose connections reach an instance's proxy.

pub mod client;
pub mod forward;
pub mod lines;
pub mod mux;
pub mod protocol;

pub use client::{AgentClient, AgentError, EventStream};
pub use forward::Forwarder;
