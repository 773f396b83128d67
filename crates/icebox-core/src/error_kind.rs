//! Why an activation failed, for programs: the activation record's `icebox.error` annotation,
//! beside OpenWhisk's message in `response.result.error` (which is for people and may change).
//! A harness groups failures by this instead of matching message text.

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorKind {
    // The node could not give the activation an instance (status `internal error`).
    /// No capacity became available within the queue timeout.
    QueueTimeout,
    ShuttingDown,
    /// The action's runtime kind is not installed on this node.
    NotInstalled,
    /// The action's isolation has no backend here.
    IsolationUnavailable,
    /// The runtime did not accept connections within the start timeout.
    StartTimeout,
    /// The runtime exited before it was ready.
    RuntimeExited,
    /// The container runtime (crun) could not run the instance.
    Container,
    /// The runtime's program could not be executed.
    Exec,
    /// The backend cannot give what the action asks (network in a VM, a runtime the guest
    /// image lacks, a state directory too deep for a socket path).
    Unsupported,
    /// No room: every VM partition holds a live instance, or none became free in time.
    NoCapacity,
    /// A VM did not boot.
    VmBoot,
    /// The VM holding the instance ended while it started.
    VmEnded,
    /// The guest agent failed a step of the start.
    Agent,
    /// Plugging a memory partition into an N:1 VM failed.
    Partition,
    /// A snapshot restore was refused or failed (the daemon then starts normally: this kind
    /// reaches a record only if that start fails too).
    Restore,
    /// Taking or recording a snapshot failed.
    Snapshot,
    /// A frozen instance could not be thawed.
    Thaw,
    /// An I/O error of the node.
    Io,
    /// Anything else of the node.
    Node,

    // /init failed: the action's code does not load (status `developer error`).
    InitTimeout,
    InitExited,
    InitTooLarge,
    /// The runtime could not be reached or broke the connection during /init.
    InitConnection,
    /// The runtime answered /init with an error.
    InitRefused,

    // /run failed.
    /// The action exceeded its time limit.
    Timeout,
    /// The instance's memory cgroup killed the runtime.
    OutOfMemory,
    /// The action created more processes than its pids limit.
    PidsLimit,
    /// The runtime exited or broke the connection without an answer.
    Exited,
    /// The action's response was larger than allowed.
    ResponseTooLarge,
    /// The node held its most activation output (`--output-budget`).
    OutputBudget,
    /// The action answered with an error of its own (status `application error`).
    ApplicationError,
    /// The runtime's answer was not a valid activation result.
    BadResponse,
    /// The daemon stopped (crashed, was killed) before the activation ended: recovered at
    /// its next start.
    Unfinished,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn names_round_trip_through_strings_and_json() {
        for kind in ErrorKind::VARIANTS {
            let name = kind.as_str();
            assert_eq!(name.parse::<ErrorKind>().unwrap(), *kind);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        assert_eq!(ErrorKind::OutOfMemory.to_string(), "out_of_memory");
    }

    /// The API contract lists exactly these names.
    #[test]
    fn the_openapi_file_lists_every_kind() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api/openapi.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let block = &text[text.find("    ErrorKind:").expect("an ErrorKind schema")..];
        let line = block
            .lines()
            .find(|l| l.trim_start().starts_with("enum: ["))
            .unwrap();
        let listed: Vec<&str> = line
            .trim()
            .trim_start_matches("enum: [")
            .trim_end_matches(']')
            .split(", ")
            .collect();
        let ours: Vec<&str> = ErrorKind::VARIANTS.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed, ours);
    }
}
