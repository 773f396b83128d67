//! Why a backend could not start, restore or snapshot an instance: one variant per step that
//! can fail, each with its machine-readable `ErrorKind` (the activation record's
//! `icebox.error`). Messages name the step and the cause for the person reading the record.

use icebox_core::ErrorKind;
use std::path::PathBuf;

/// A cause from another layer (the guest agent, QEMU's monitor) kept as a typed source.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The runtime did not accept connections within the start timeout.
    #[error("runtime did not become ready within {0} ms")]
    StartTimeout(u64),
    /// The runtime exited before it was ready: what it printed.
    #[error("the runtime exited before it was ready. Output:\n{0}")]
    RuntimeExited(String),
    /// The container runtime failed a step (`crun run`, its pid file, the socket directory).
    #[error("{step}: {detail}")]
    Container { step: &'static str, detail: String },
    /// The runtime's program could not be executed.
    #[error("cannot exec {program}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The backend cannot give what the spec asks.
    #[error("{0}")]
    Unsupported(String),
    /// No room for the instance (VM partitions, the host's memory budget).
    #[error("{0}")]
    NoCapacity(String),
    /// A VM did not boot.
    #[error("the VM did not boot: {0}")]
    VmBoot(#[source] Cause),
    /// The VM that was to hold the instance ended.
    #[error("VM {vm} ended: {why}")]
    VmEnded { vm: String, why: String },
    /// The guest agent failed a step of the start.
    #[error("{step}: {source}")]
    Agent {
        step: &'static str,
        #[source]
        source: Cause,
    },
    /// Plugging partition `partition` of VM `vm` for the instance failed.
    #[error("plugging partition {partition} of VM {vm}: {source}")]
    Partition {
        vm: String,
        partition: u32,
        #[source]
        source: Cause,
    },
    /// A snapshot in `dir` could not be restored: refused before anything ran (damaged,
    /// foreign, incomplete) or failed while restoring.
    #[error("cannot restore the {backend} snapshot in {}: {why}", dir.display())]
    Restore {
        backend: &'static str,
        dir: PathBuf,
        why: String,
    },
    /// Taking a snapshot or recording its loading set failed.
    #[error("{0}")]
    Snapshot(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(#[from] anyhow::Error),
}

impl SandboxError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            SandboxError::StartTimeout(_) => ErrorKind::StartTimeout,
            SandboxError::RuntimeExited(_) => ErrorKind::RuntimeExited,
            SandboxError::Container { .. } => ErrorKind::Container,
            SandboxError::Exec { .. } => ErrorKind::Exec,
            SandboxError::Unsupported(_) => ErrorKind::Unsupported,
            SandboxError::NoCapacity(_) => ErrorKind::NoCapacity,
            SandboxError::VmBoot(_) => ErrorKind::VmBoot,
            SandboxError::VmEnded { .. } => ErrorKind::VmEnded,
            SandboxError::Agent { .. } => ErrorKind::Agent,
            SandboxError::Partition { .. } => ErrorKind::Partition,
            SandboxError::Restore { .. } => ErrorKind::Restore,
            SandboxError::Snapshot(_) => ErrorKind::Snapshot,
            SandboxError::Io(_) => ErrorKind::Io,
            SandboxError::Other(_) => ErrorKind::Node,
        }
    }

    /// A restore of the snapshot in `dir` refused or failed for `why`.
    pub fn restore(
        backend: &'static str,
        dir: &std::path::Path,
        why: impl std::fmt::Display,
    ) -> Self {
        SandboxError::Restore {
            backend,
            dir: dir.to_path_buf(),
            why: why.to_string(),
        }
    }

    /// A guest agent's failure at `step`.
    pub fn agent(step: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        SandboxError::Agent {
            step,
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_has_its_kind_and_names_its_cause() {
        let e = SandboxError::restore("process", std::path::Path::new("/s"), "damaged");
        assert_eq!(e.kind(), ErrorKind::Restore);
        assert_eq!(
            e.to_string(),
            "cannot restore the process snapshot in /s: damaged"
        );
        let e = SandboxError::Exec {
            program: "python3".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(e.kind(), ErrorKind::Exec);
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            SandboxError::StartTimeout(5).kind(),
            ErrorKind::StartTimeout
        );
    }
}
