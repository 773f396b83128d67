//! The process backend of the sandbox interface (`icebox-sandbox-api`): crun + cgroups, CRIU
//! snapshots, a uid per instance. The interface is re-exported here, so a user of this
//! backend needs one crate.

pub mod cgroup;
pub mod process;

pub use icebox_sandbox_api::*;
pub use icebox_sandbox_api::{client, logs, manifest, output_budget};
