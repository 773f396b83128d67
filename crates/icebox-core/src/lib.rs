//! Plain data types shared by every icebox crate. No I/O lives here.

// This crate makes no syscall of its own: forbidding unsafe keeps all unsafe code in the
// crates that talk to the kernel, where each block is reviewed with its SAFETY comment.
#![forbid(unsafe_code)]

pub mod action;
pub mod activation;
pub mod api;
pub mod error_kind;
pub mod event;
pub mod ids;
pub mod instance;
pub mod memory;
pub mod offload;
pub mod proc_text;
pub mod snapshot;
pub mod time;
pub mod units;

pub use action::{ActionLimits, ActionSpec, Exec, KeyValue, LimitError};
pub use activation::{ActivationRecord, ActivationResponse, ActivationStatus};
pub use error_kind::ErrorKind;
pub use event::{EventKind, LifecycleEvent};
pub use instance::{InstanceId, InstanceState};
pub use memory::{ChargeMode, MemoryStats};
pub use offload::{OffloadView, PoolView, SegmentView};
pub use snapshot::{LoadingSetInfo, RestoreMode, SnapshotInfo};
pub use time::now_ms;
