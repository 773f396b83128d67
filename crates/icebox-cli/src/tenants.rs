//! `icebox namespace create|list|update|delete` and `icebox key create|revoke`: tenants, managed
//! with the node's admin key (`<state>/auth` or the daemon's `--auth`).

use crate::client::{segment, Client};
use crate::error::Result;
use crate::output::{emit, emit_json, emit_line};
use crate::table::{self, size, Align, Table};
use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};

const NAMESPACES: &str = "/icebox/v1/namespaces";

#[derive(Debug, Args)]
pub struct Limits {
    /// Invocations the namespace may start per minute (OpenWhisk's invocationsPerMinute)
    #[arg(long)]
    invocations_per_minute: Option<u64>,
    /// Invocations of the namespace running at once (OpenWhisk's concurrentInvocations)
    #[arg(long)]
    concurrent_invocations: Option<u64>,
    /// Memory its idle and frozen instances may be charged together, e.g. 512MiB
    #[arg(long, value_parser = parse_size)]
    memory_share: Option<u64>,
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    s.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("invalid size '{s}': {e} (examples: 512MiB, 2GiB)"))
}

impl Limits {
    fn json(&self) -> Value {
        let mut m = Map::new();
        if let Some(v) = self.invocations_per_minute {
            m.insert("invocationsPerMinute".into(), json!(v));
        }
        if let Some(v) = self.concurrent_invocations {
            m.insert("concurrentInvocations".into(), json!(v));
        }
        if let Some(v) = self.memory_share {
            m.insert("memoryShare".into(), json!(v));
        }
        json!({ "limits": m })
    }
}

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create a namespace (then give it a key with `icebox key create NAMESPACE`)
    Create {
        name: String,
        #[command(flatten)]
        limits: Limits,
    },
    /// Set a namespace's limits (a limit left out is removed)
    Update {
        name: String,
        #[command(flatten)]
        limits: Limits,
    },
    /// List the namespaces with their limits and keys
    List,
    /// Delete a namespace and its keys; with --force also its actions, instances and records
    Delete {
        name: String,
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an API key for a namespace; its secret is shown this once
    Create { namespace: String },
    /// Revoke a key by its uuid; requests with it are refused from now on
    Revoke { uuid: String },
}

fn namespace_path(name: &str) -> String {
    format!("{NAMESPACES}/{}", segment(name))
}

pub fn run_namespace(client: &Client, json_out: bool, command: NamespaceCommand) -> Result<()> {
    let (reply, done) = match command {
        NamespaceCommand::Create { name, limits } => (
            client
                .put(namespace_path(&name))
                .json(limits.json())
                .explain(409, format!("namespace '{name}' already exists; change its limits with `icebox namespace update {name}`"))
                .send()?,
            format!("ok: created namespace {name}; give it a key with `icebox key create {name}`"),
        ),
        NamespaceCommand::Update { name, limits } => (
            client
                .put(namespace_path(&name))
                .query("overwrite", "true")
                .json(limits.json())
                .send()?,
            format!("ok: updated namespace {name}"),
        ),
        NamespaceCommand::List => {
            let body = client.get(NAMESPACES).send()?;
            if json_out {
                emit_json(&body);
            } else {
                emit(&namespaces_table(body.as_array().map_or(&[][..], Vec::as_slice)));
            }
            return Ok(());
        }
        NamespaceCommand::Delete { name, force } => {
            let mut call = client
                .delete(namespace_path(&name))
                .explain(404, format!("there is no namespace '{name}'"));
            if force {
                call = call.query("force", "true");
            }
            (call.send()?, format!("ok: deleted namespace {name}"))
        }
    };
    if json_out {
        emit_json(&reply);
    } else {
        emit_line(&done);
    }
    Ok(())
}

pub fn run_key(client: &Client, json_out: bool, command: KeyCommand) -> Result<()> {
    match command {
        KeyCommand::Create { namespace } => {
            let reply = client
                .post(format!("{}/keys", namespace_path(&namespace)))
                .explain(404, format!("there is no namespace '{namespace}'"))
                .send()?;
            if json_out {
                emit_json(&reply);
            } else {
                emit_line(&format!(
                    "ok: created a key for {namespace} (shown only now; use it as ICEBOX_AUTH or wsk's --auth):\n{}",
                    reply["auth"].as_str().unwrap_or("?")
                ));
            }
        }
        KeyCommand::Revoke { uuid } => {
            let reply = client
                .delete(format!("/icebox/v1/keys/{}", segment(&uuid)))
                .explain(404, format!("there is no key '{uuid}'"))
                .send()?;
            if json_out {
                emit_json(&reply);
            } else {
                emit_line(&format!("ok: revoked key {uuid}"));
            }
        }
    }
    Ok(())
}

fn limit(v: &Value, f: impl Fn(u64) -> String) -> String {
    v.as_u64().map(f).unwrap_or_else(|| "-".into())
}

fn namespaces_table(list: &[Value]) -> String {
    let mut t = Table::new(&[
        ("NAMESPACE", Align::Left),
        ("PER MINUTE", Align::Right),
        ("CONCURRENT", Align::Right),
        ("MEMORY SHARE", Align::Right),
        ("IN FLIGHT", Align::Right),
        ("KEYS", Align::Left),
        ("CREATED", Align::Left),
    ]);
    for n in list {
        let l = &n["limits"];
        let keys: Vec<&str> = n["keys"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        t.push(vec![
            n["name"].as_str().unwrap_or("?").to_string(),
            limit(&l["invocationsPerMinute"], |v| v.to_string()),
            limit(&l["concurrentInvocations"], |v| v.to_string()),
            limit(&l["memoryShare"], size),
            n["inFlight"].as_u64().unwrap_or(0).to_string(),
            if keys.is_empty() {
                "-".into()
            } else {
                keys.join(",")
            },
            n["created"]
                .as_u64()
                .map(table::utc_time)
                .unwrap_or_default(),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::MIB;

    #[test]
    fn limits_are_sent_under_openwhisk_names_and_shown_in_the_table() {
        let l = Limits {
            invocations_per_minute: Some(60),
            concurrent_invocations: None,
            memory_share: Some(512 * MIB),
        };
        assert_eq!(
            l.json(),
            json!({"limits": {"invocationsPerMinute": 60, "memoryShare": 536870912}})
        );
        let t = namespaces_table(&[json!({
            "name": "alpha", "created": 0, "inFlight": 2, "keys": ["u-1"],
            "limits": {"invocationsPerMinute": 60, "memoryShare": 536870912}
        })]);
        let row = t.lines().nth(1).unwrap();
        for cell in ["alpha", "60", "512.0 MiB", "u-1", "2"] {
            assert!(row.contains(cell), "{cell} in {row}");
        }
    }
}
