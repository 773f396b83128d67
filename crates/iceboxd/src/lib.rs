//! iceboxd: the icebox node daemon. The binary (main.rs) wires these modules together; the
//! library form lets integration tests and benches reach the pieces.

pub mod api;
pub mod auth;
pub mod config;
pub mod events;
pub mod invoker;
pub mod metrics;
pub mod pool;
pub mod recorder;
pub mod registry;
pub mod server;
pub mod state;

pub use icebox_core::now_ms;
