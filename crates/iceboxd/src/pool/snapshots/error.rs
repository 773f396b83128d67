//! Why a snapshot could not be built or restored, one variant per step. The books keep the
//! message for `/icebox/v1/snapshots` and the event; code branches on the variant.

use crate::pool::{InitError, StartError};
use icebox_sandbox::{RuntimeError, SandboxError};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The action's isolation has no backend here.
    #[error("{0}")]
    Isolation(String),
    #[error("the {0} backend cannot take snapshots")]
    Unsupported(&'static str),
    #[error("{0}")]
    Spec(#[source] StartError),
    #[error("the template did not start: {0}")]
    Start(#[source] SandboxError),
    #[error("the template's /init failed: {0}")]
    Init(#[source] InitError),
    #[error("the warm-up run {0}")]
    WarmUp(#[source] RunFailure),
    #[error("cannot create the snapshot directory: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("the snapshot failed: {0}")]
    Snapshot(#[source] SandboxError),
    #[error("cannot store the snapshot: {0}")]
    Store(#[source] std::io::Error),
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}")]
    Restore(#[source] SandboxError),
    #[error("the restored runtime did not answer /icebox/restored")]
    ReseedTimeout,
    #[error("the restored runtime cannot be reached: {0}")]
    ReseedUnreachable(#[source] RuntimeError),
    #[error("the restored runtime refused /icebox/restored ({status}): {body}")]
    ReseedRefused { status: u16, body: String },
}

/// How a request to the template's runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    #[error("timed out")]
    Timeout,
    #[error("failed: {0}")]
    Transport(#[source] RuntimeError),
    #[error("answered {status}: {body}")]
    Status { status: u16, body: String },
}
