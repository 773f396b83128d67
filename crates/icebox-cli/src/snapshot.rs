//! `icebox snapshot list|build|delete`: the node's action snapshots (docs/snapshots.md).

use crate::client::{segment, Client};
use crate::error::{CliError, Result};
use crate::output::{emit, emit_json, emit_line};
use crate::table::{self, size, Align, Table};
use clap::Subcommand;
use icebox_core::api::SnapshotView;

const API: &str = "/icebox/v1/snapshots";

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// List every action's snapshot: its state, size, loading set and restores
    List,
    /// Build an action's snapshot now (it needs the annotation icebox.snapshot)
    Build {
        /// Action name
        name: String,
    },
    /// Discard an action's snapshots (the next cold start starts normally and builds anew)
    Delete {
        /// Action name
        name: String,
    },
}

pub fn run(client: &Client, json_out: bool, command: SnapshotCommand) -> Result<()> {
    match command {
        SnapshotCommand::List => {
            let body = client.get(API).send()?;
            if json_out {
                emit_json(&body);
                return Ok(());
            }
            let list: Vec<SnapshotView> = parse(body)?;
            if list.is_empty() {
                emit_line(
                    "no snapshots; an action gets one when its annotation icebox.snapshot is true \
                     (`icebox action update NAME FILE -a icebox.snapshot true`)",
                );
            } else {
                emit(&snapshots_table(&list));
            }
            Ok(())
        }
        SnapshotCommand::Build { name } => {
            let body = client
                .post(action_path(&name))
                .explain(404, format!("action '{name}' does not exist"))
                .send()?;
            if json_out {
                emit_json(&body);
            } else {
                emit_line(&format!(
                    "ok: building the snapshot of {name} in the background; `icebox snapshot list` shows when it is ready"
                ));
            }
            Ok(())
        }
        SnapshotCommand::Delete { name } => {
            let body = client
                .delete(action_path(&name))
                .explain(404, format!("action '{name}' has no snapshot"))
                .send()?;
            if json_out {
                emit_json(&body);
            } else {
                emit_line(&format!("ok: discarded the snapshot of {name}"));
            }
            Ok(())
        }
    }
}

fn action_path(name: &str) -> String {
    format!("{API}/_/{}", segment(name))
}

fn parse(body: serde_json::Value) -> Result<Vec<SnapshotView>> {
    serde_json::from_value(body).map_err(|e| {
        CliError::failed(format!(
            "iceboxd's answer to {API} does not match this CLI ({e}); use --json for the raw answer"
        ))
    })
}

pub fn snapshots_table(list: &[SnapshotView]) -> String {
    let mut t = Table::new(&[
        ("ACTION", Align::Left),
        ("VERSION", Align::Left),
        ("ISOLATION", Align::Left),
        ("STATE", Align::Left),
        ("MEMORY", Align::Right),
        ("TOOK", Align::Right),
        ("LOADING SET", Align::Right),
        ("RESTORES", Align::Right),
        ("FALLBACKS", Align::Right),
        ("LAST RESTORE", Align::Left),
    ]);
    for s in list {
        let state = match (&s.reason, &s.recording) {
            (Some(reason), _) => format!("{} ({reason})", s.state),
            (None, Some(instance)) => format!("{} (recording {instance})", s.state),
            _ => s.state.clone(),
        };
        let loading_set = s
            .loading_set
            .as_ref()
            .map(|l| {
                format!(
                    "{} in {} regions",
                    size(l.loading_set_pages * 4096),
                    l.regions
                )
            })
            .unwrap_or_else(|| "-".into());
        let last = s
            .last_restore
            .as_ref()
            .map(|r| format!("{} {} ms ({})", r.mode.as_str(), r.ms, r.instance))
            .unwrap_or_else(|| "-".into());
        t.push(vec![
            s.action.clone(),
            s.version.clone(),
            s.isolation.clone(),
            state,
            s.snapshot
                .as_ref()
                .map(|i| size(i.memory_bytes))
                .unwrap_or_else(|| "-".into()),
            s.snapshot
                .as_ref()
                .map(|i| table::duration_ms(i.took_ms))
                .unwrap_or_else(|| "-".into()),
            loading_set,
            s.restores.to_string(),
            s.fallbacks.to_string(),
            last,
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::api::RestoreView;
    use icebox_core::units::MIB;
    use icebox_core::{LoadingSetInfo, RestoreMode, SnapshotInfo};

    #[test]
    fn the_table_says_state_size_loading_set_and_last_restore() {
        let ready = SnapshotView {
            action: "guest/hello".into(),
            version: "0.0.2".into(),
            isolation: "process".into(),
            state: "ready".into(),
            reason: None,
            created_ms: Some(1),
            dir: None,
            snapshot: Some(SnapshotInfo {
                backend: "crun".into(),
                memory_bytes: 13 * MIB,
                took_ms: 80,
            }),
            loading_set: Some(LoadingSetInfo {
                working_set_pages: 3000,
                zero_pages: 200,
                loading_set_pages: 2560,
                regions: 41,
                groups: 3,
            }),
            recording: None,
            restores: 7,
            fallbacks: 0,
            last_restore: Some(RestoreView {
                instance: "hello-1".into(),
                mode: RestoreMode::Faasnap,
                ms: 31,
                at_ms: 2,
            }),
        };
        let failed = SnapshotView {
            action: "guest/broken".into(),
            state: "failed".into(),
            reason: Some("criu dump failed".into()),
            snapshot: None,
            loading_set: None,
            last_restore: None,
            restores: 0,
            fallbacks: 1,
            ..ready.clone()
        };
        let out = snapshots_table(&[ready, failed]);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("ACTION"), "{out}");
        assert!(
            lines[1].contains("13.0 MiB") && lines[1].contains("10.0 MiB in 41 regions"),
            "{out}"
        );
        assert!(lines[1].contains("faasnap 31 ms (hello-1)"), "{out}");
        assert!(lines[2].contains("failed (criu dump failed)"), "{out}");
    }
}
