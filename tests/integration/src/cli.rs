//! Running the `icebox` CLI binary and reading what it printed.

use serde_json::Value;
use std::process::Command;

#[derive(Debug)]
pub struct CliOutput {
    pub command: String,
    /// Exit code (None when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn run(mut cmd: Command) -> CliOutput {
        let command = format!("{:?}", cmd);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
        CliOutput {
            command,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics (showing both outputs) unless the command exited 0.
    #[track_caller]
    pub fn success(self) -> CliOutput {
        assert_eq!(self.code, Some(0), "{self}");
        self
    }

    /// stdout as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self}"))
    }

    /// stdout as one JSON document per line (NDJSON).
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("line is not JSON ({e}): {l}\n{self}"))
            })
            .collect()
    }
}

impl std::fmt::Display for CliOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\nexit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }
}
