//! What can go wrong in a command, and the exit code each kind of failure maps to.

use std::fmt;
use std::process::ExitCode;

#[derive(Debug, PartialEq, Eq)]
pub enum CliError {
    /// The command line or a file it names is wrong; nothing was sent. Exit code 2, like
    /// clap's own usage errors.
    Usage(String),
    /// The request failed (daemon unreachable, refused, or answered with an error). Exit 1.
    Failed(String),
    /// The activation ran and failed; its record or result has already been printed. Exit 1.
    ActivationFailed,
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::Usage(msg.into())
    }

    pub fn failed(msg: impl Into<String>) -> Self {
        CliError::Failed(msg.into())
    }

    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::Failed(_) | CliError::ActivationFailed => ExitCode::from(1),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
            CliError::ActivationFailed => f.write_str("the activation failed"),
        }
    }
}

pub type Result<T> = std::result::Result<T, CliError>;
