//! `icebox activation …`: activation records, their results and logs.

use crate::action::{annotation, str_of};
use crate::client::{segment, Client, NAMESPACE};
use crate::error::Result;
use crate::output::{emit, emit_json, emit_line, pretty};
use crate::table::{self, Align, Table};
use clap::Subcommand;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum ActivationCommand {
    /// List recent activations, newest first
    List {
        /// Only the activations of this action
        name: Option<String>,
        /// Show at most this many activations (the daemon allows up to 200)
        #[arg(long, default_value_t = 30, value_name = "N")]
        limit: u32,
        /// Skip this many activations first
        #[arg(long, default_value_t = 0, value_name = "N")]
        skip: u32,
    },
    /// Show one activation: outcome, cold/warm start, timings, result and logs
    Get {
        /// Activation id (as printed by `icebox action invoke` and `icebox activation list`)
        id: String,
    },
    /// Print an activation's log lines (stdout and stderr of the action, timestamped)
    Logs {
        /// Activation id
        id: String,
    },
    /// Print an activation's result
    Result {
        /// Activation id
        id: String,
    },
}

pub fn run(client: &Client, json_out: bool, command: ActivationCommand) -> Result<()> {
    match command {
        ActivationCommand::List { name, limit, skip } => {
            list(client, json_out, name.as_deref(), limit, skip)
        }
        ActivationCommand::Get { id } => {
            let record = fetch(client, &id, "")?;
            if json_out {
                emit_json(&record);
            } else {
                emit(&describe(&record, table::now_ms()));
            }
            Ok(())
        }
        ActivationCommand::Logs { id } => {
            let body = fetch(client, &id, "/logs")?;
            if json_out {
                emit_json(&body);
            } else {
                let lines: Vec<&str> = body["logs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if !lines.is_empty() {
                    emit_line(&lines.join("\n"));
                }
            }
            Ok(())
        }
        ActivationCommand::Result { id } => {
            let response = fetch(client, &id, "/result")?;
            emit_json(if json_out {
                &response
            } else {
                &response["result"]
            });
            Ok(())
        }
    }
}

fn fetch(client: &Client, id: &str, suffix: &str) -> Result<Value> {
    client
        .get(format!("{NAMESPACE}/activations/{}{suffix}", segment(id)))
        .explain(
            404,
            format!(
                "activation {id} does not exist or has not finished yet; `icebox activation list` shows \
                 the recent ones (records are kept for a limited time)"
            ),
        )
        .send()
}

fn list(client: &Client, json_out: bool, name: Option<&str>, limit: u32, skip: u32) -> Result<()> {
    let mut call = client
        .get(format!("{NAMESPACE}/activations"))
        .query("limit", limit)
        .query("skip", skip);
    if let Some(name) = name {
        call = call.query("name", name);
    }
    let records = call.send()?;
    if json_out {
        emit_json(&records);
        return Ok(());
    }
    let items = records.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        match name {
            Some(n) => emit_line(&format!(
                "no activations of {n}; run it with `icebox action invoke {n}`"
            )),
            None => emit_line("no activations; run an action with `icebox action invoke NAME`"),
        }
        return Ok(());
    }
    emit(&activations_table(&items, table::now_ms()));
    Ok(())
}

/// OpenWhisk's outcome, from `response.status` in full records or `statusCode` in summaries.
pub fn status_text(record: &Value) -> String {
    if let Some(status) = record["response"]["status"].as_str() {
        return status.to_string();
    }
    let code = record["statusCode"]
        .as_u64()
        .or_else(|| record["response"]["statusCode"].as_u64());
    match code {
        Some(0) => "success",
        Some(1) => "application error",
        Some(2) => "action developer error",
        Some(3) => "whisk internal error",
        _ => "unknown",
    }
    .to_string()
}

pub fn activations_table(items: &[Value], now: u64) -> String {
    let mut t = Table::new(&[
        ("ACTIVATION ID", Align::Left),
        ("ACTION", Align::Left),
        ("STATUS", Align::Left),
        ("START", Align::Left),
        ("DURATION", Align::Right),
        ("STARTED", Align::Left),
    ]);
    for r in items {
        let start = annotation(r, "icebox.start")
            .and_then(Value::as_str)
            .unwrap_or("-");
        t.push(vec![
            str_of(&r["activationId"]),
            str_of(&r["name"]),
            status_text(r),
            start.to_string(),
            r["duration"]
                .as_u64()
                .map(table::duration_ms)
                .unwrap_or_else(|| "-".into()),
            r["start"]
                .as_u64()
                .map(|s| table::ago(s, now))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    t.render()
}

/// A full record for people: the facts first, then result and logs.
pub fn describe(record: &Value, now: u64) -> String {
    let mut status = status_text(record);
    if annotation(record, "timeout").and_then(Value::as_bool) == Some(true) {
        status.push_str(" (timed out)");
    }
    let mut lines = vec![
        ("activation", str_of(&record["activationId"])),
        (
            "action",
            format!(
                "{}/{} (version {})",
                str_of(&record["namespace"]),
                str_of(&record["name"]),
                str_of(&record["version"])
            ),
        ),
        ("status", status),
    ];
    let start = annotation(record, "icebox.start").and_then(Value::as_str);
    let instance = annotation(record, "icebox.instance").and_then(Value::as_str);
    let restore = annotation(record, "icebox.restore").and_then(Value::as_str);
    if let Some(start) = start {
        // A cold start from a snapshot says how it was restored (lazy, faasnap, ...).
        let how = restore
            .map(|mode| format!("{start}, restored from a snapshot ({mode})"))
            .unwrap_or_else(|| start.to_string());
        lines.push((
            "start",
            instance.map(|i| format!("{how} on {i}")).unwrap_or(how),
        ));
    }
    if let Some(s) = record["start"].as_u64() {
        lines.push((
            "started",
            format!("{} UTC ({})", table::utc_time(s), table::ago(s, now)),
        ));
    }
    if let Some(d) = record["duration"].as_u64() {
        let mut parts = Vec::new();
        if let Some(w) = annotation(record, "waitTime").and_then(Value::as_u64) {
            parts.push(format!("wait {}", table::duration_ms(w)));
        }
        if let Some(i) = annotation(record, "initTime").and_then(Value::as_u64) {
            parts.push(format!("init {}", table::duration_ms(i)));
        }
        let extra = if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        };
        lines.push(("duration", format!("{}{extra}", table::duration_ms(d))));
    }
    let mut out: String = lines.iter().map(|(k, v)| format!("{k:<12}{v}\n")).collect();
    if !record["response"]["result"].is_null() {
        out.push_str("result\n");
        out.push_str(&indented(&record["response"]["result"]));
    }
    let logs: Vec<&str> = record["logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !logs.is_empty() {
        out.push_str("logs\n");
        for line in logs {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

fn indented(value: &Value) -> String {
    pretty(value).lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> Value {
        json!({
            "namespace": "guest", "name": "hello", "version": "0.0.1", "subject": "guest",
            "activationId": "8f2d1b6c9e0a4f3b9d7c6e5a4b3c2d1e",
            "start": 1_718_000_000_000u64, "end": 1_718_000_000_042u64, "duration": 42, "statusCode": 2,
            "response": {"status": "action developer error", "statusCode": 2, "success": false,
                         "result": {"error": "The action exceeded its time limits of 100 milliseconds."}},
            "logs": ["2024-06-10T06:13:20.031512Z stdout: working"],
            "annotations": [
                {"key": "path", "value": "guest/hello"}, {"key": "waitTime", "value": 3},
                {"key": "kind", "value": "python:3"}, {"key": "timeout", "value": true},
                {"key": "icebox.start", "value": "warm"}, {"key": "icebox.instance", "value": "i-1"}
            ],
            "publish": false
        })
    }

    #[test]
    fn describes_a_record() {
        let text = describe(&record(), 1_718_000_060_000);
        assert_eq!(
            text,
            "activation  8f2d1b6c9e0a4f3b9d7c6e5a4b3c2d1e\n\
             action      guest/hello (version 0.0.1)\n\
             status      action developer error (timed out)\n\
             start       warm on i-1\n\
             started     2024-06-10 06:13:20 UTC (1m00s ago)\n\
             duration    42ms (wait 3ms)\n\
             result\n\
             \x20 {\n\
             \x20   \"error\": \"The action exceeded its time limits of 100 milliseconds.\"\n\
             \x20 }\n\
             logs\n\
             \x20 2024-06-10T06:13:20.031512Z stdout: working\n"
        );
    }

    #[test]
    fn status_from_summary_code() {
        assert_eq!(status_text(&json!({"statusCode": 1})), "application error");
        assert_eq!(status_text(&json!({"statusCode": 0})), "success");
        assert_eq!(status_text(&json!({})), "unknown");
        assert_eq!(status_text(&record()), "action developer error");
    }

    #[test]
    fn table_of_summaries() {
        let mut summary = record();
        summary.as_object_mut().unwrap().remove("response");
        let t = activations_table(&[summary], 1_718_000_005_000);
        assert_eq!(
            t,
            "ACTIVATION ID                     ACTION  STATUS                  START  DURATION  STARTED\n\
             8f2d1b6c9e0a4f3b9d7c6e5a4b3c2d1e  hello   action developer error  warm       42ms  5.0s ago\n"
        );
    }
}
