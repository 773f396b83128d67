//! iceboxd: the icebox node daemon. The binary (main.rs) wires these modules together; the
//! library form lets integration tests reach what they need (`server::state_tag`); the rest
//! is crate-private so unused items surface as warnings.

pub(crate) mod api;
pub(crate) mod auth;
pub(crate) mod cluster;
pub(crate) mod code_store;
pub mod config;
pub(crate) mod detach;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod invoker;
pub(crate) mod metrics;
pub(crate) mod open_files;
pub(crate) mod pool;
pub(crate) mod recorder;
pub(crate) mod registry;
pub(crate) mod serve;
pub mod server;
pub(crate) mod shares;
pub(crate) mod state;
pub(crate) mod tenants;

pub(crate) use icebox_core::now_ms;
