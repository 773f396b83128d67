//! Why the pool could not give an activation an instance. Typed all the way to the API, where
//! `From<InvokeError> for ApiError` (invoker.rs) maps each to its one HTTP answer.

use icebox_core::ErrorKind;
use icebox_sandbox::{RuntimeError, SandboxError};
use std::time::Duration;

/// Refused at admission, before the invocation gets an id: nothing is stored.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    #[error("too many invocations are waiting for capacity")]
    QueueFull,
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// An admitted invocation did not get an instance.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    #[error("no capacity became available within {0:?}")]
    QueueTimeout(Duration),
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The runtime could not be started (a node problem, not the action's).
    #[error(transparent)]
    Start(#[from] StartError),
    /// /init failed: the action's code does not load (the action's problem).
    #[error("{error}")]
    Init { error: InitError, init_ms: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("runtime kind {0} is not installed on this node")]
    NotInstalled(String),
    /// The action's isolation has no backend here (e.g. `vm` without the guest image).
    #[error("{0}")]
    Isolation(String),
    #[error("cannot start the {kind} runtime: {source}")]
    Sandbox {
        kind: String,
        #[source]
        source: SandboxError,
    },
    #[error("cannot thaw instance {id}: {source}")]
    Thaw {
        id: String,
        #[source]
        source: std::io::Error,
    },
}

impl StartError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            StartError::NotInstalled(_) => ErrorKind::NotInstalled,
            StartError::Isolation(_) => ErrorKind::IsolationUnavailable,
            StartError::Sandbox { source, .. } => source.kind(),
            StartError::Thaw { .. } => ErrorKind::Thaw,
        }
    }
}

/// The messages are OpenWhisk's: they become the activation record's `error`.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("The action exceeded its time limit of {0} milliseconds during initialization.")]
    Timeout(u64),
    /// The runtime's output up to its exit.
    #[error("The action failed to initialize: the runtime exited.{}", with_space(.0))]
    Exited(String),
    #[error("The runtime's /init response is too large.")]
    TooLarge,
    #[error("The action failed to initialize: {0}")]
    Runtime(RuntimeError),
    /// The runtime answered /init with an error: its message.
    #[error("Initialization has failed due to: {0}")]
    Refused(String),
}

impl InitError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            InitError::Timeout(_) => ErrorKind::InitTimeout,
            InitError::Exited(_) => ErrorKind::InitExited,
            InitError::TooLarge => ErrorKind::InitTooLarge,
            InitError::Runtime(_) => ErrorKind::InitConnection,
            InitError::Refused(_) => ErrorKind::InitRefused,
        }
    }
}

fn with_space(output: &str) -> String {
    let output = output.trim();
    if output.is_empty() {
        String::new()
    } else {
        format!(" {output}")
    }
}

impl From<RuntimeError> for InitError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::TooLarge => InitError::TooLarge,
            other => InitError::Runtime(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_messages_are_openwhisk_s() {
        assert_eq!(
            InitError::Exited(String::new()).to_string(),
            "The action failed to initialize: the runtime exited."
        );
        assert_eq!(
            InitError::Exited(" boom\n".into()).to_string(),
            "The action failed to initialize: the runtime exited. boom"
        );
        assert_eq!(
            InitError::from(RuntimeError::TooLarge).to_string(),
            "The runtime's /init response is too large."
        );
        assert_eq!(
            InitError::Refused("x".into()).to_string(),
            "Initialization has failed due to: x"
        );
    }
}
