//! iceboxd: the icebox node daemon. The binary (main.rs) wires these modules together; the
//! library form lets integration tests and benches reach the pieces.

pub mod api;
pub mod auth;
pub mod config;
pub mod detach;
pub mod events;
pub mod invoker;
pub mod metrics;
pub mod pool;
pub mod recorder;
pub mod registry;
pub mod serve;
pub mod server;
pub mod state;

/// Wall-clock milliseconds since the Unix epoch (activation records, events).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
