//! `icebox events`: the lifecycle event stream (server-sent events from /icebox/v1/events).

use crate::client::Client;
use crate::error::{CliError, Result};
use crate::output::emit_line;
use crate::table::{self, size};
use clap::Args;
use icebox_core::LifecycleEvent;
use std::io::BufRead;

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only events after this sequence number (0: every event the daemon still retains)
    #[arg(long, default_value_t = 0, value_name = "SEQ")]
    pub since: u64,
    /// Keep streaming live events until interrupted (Ctrl-C)
    #[arg(short, long)]
    pub follow: bool,
}

/// One server-sent event: its `id:` and its `data:` lines joined by newlines.
#[derive(Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
}

/// Line-by-line SSE decoder (the subset iceboxd sends: `id`, `data`, `event`, comments).
#[derive(Default)]
pub struct SseDecoder {
    id: Option<String>,
    data: Vec<String>,
}

impl SseDecoder {
    /// Feeds one line (without its line ending); a blank line completes an event.
    pub fn line(&mut self, line: &str) -> Option<SseEvent> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if self.data.is_empty() {
                self.id = None;
                return None;
            }
            let data = std::mem::take(&mut self.data).join("\n");
            return Some(SseEvent {
                id: self.id.take(),
                data,
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "id" => self.id = Some(value.to_string()),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }
}

/// `#41  2024-06-10 06:13:20.123  frozen         guest/hello  i-7f3a  uss 9.3 MiB  freeze took 0.4 ms`
pub fn event_line(e: &LifecycleEvent) -> String {
    let kind = serde_json::to_value(e.kind)
        .ok()
        .and_then(|k| k.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut line = format!(
        "#{:<5} {}  {kind:<13}  {}  {}",
        e.seq,
        table::utc_time_ms(e.time_ms),
        e.action,
        e.instance
    );
    if let Some(m) = &e.memory {
        line.push_str(&format!(
            "  uss {} pss {} rss {}",
            size(m.uss),
            size(m.pss),
            size(m.rss)
        ));
    }
    if let Some(detail) = &e.detail {
        line.push_str(&format!("  {detail}"));
    }
    line
}

pub fn run(client: &Client, json_out: bool, args: EventsArgs) -> Result<()> {
    let stream = client
        .get("/icebox/v1/events")
        .query("since", args.since)
        .query("follow", args.follow)
        .header("Accept", "text/event-stream")
        .stream()?;
    let mut decoder = SseDecoder::default();
    let mut last_seq = args.since;
    let mut count = 0usize;
    for line in stream.lines() {
        let line =
            line.map_err(|e| CliError::failed(format!("reading the event stream failed: {e}")))?;
        let Some(event) = decoder.line(&line) else {
            continue;
        };
        count += 1;
        if let Some(seq) = event.id.as_deref().and_then(|id| id.parse().ok()) {
            last_seq = seq;
        }
        if json_out {
            // One event per line (NDJSON), the daemon's JSON untouched.
            emit_line(&event.data);
            continue;
        }
        match serde_json::from_str::<LifecycleEvent>(&event.data) {
            Ok(e) => emit_line(&event_line(&e)),
            Err(_) => emit_line(&event.data),
        }
    }
    if args.follow {
        return Err(CliError::failed(format!(
            "the event stream ended (did iceboxd stop?); resume with `icebox events --follow --since {last_seq}`"
        )));
    }
    if count == 0 && !json_out {
        eprintln!(
            "no events after #{}; `icebox events --follow` waits for new ones",
            args.since
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::{EventKind, MemoryStats};

    fn decode(text: &str) -> Vec<SseEvent> {
        let mut d = SseDecoder::default();
        text.lines()
            .chain(std::iter::once(""))
            .filter_map(|l| d.line(l))
            .collect()
    }

    #[test]
    fn decodes_ids_data_and_skips_comments() {
        let events =
            decode(": keep-alive\n\nid: 41\ndata: {\"a\":1}\n\nid:42\r\ndata: x\ndata: y\r\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    id: Some("41".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    id: Some("42".into()),
                    data: "x\ny".into()
                },
            ]
        );
    }

    #[test]
    fn last_event_without_trailing_blank_line_is_not_lost_by_decode_helper() {
        let events = decode("id: 7\ndata: z");
        assert_eq!(
            events,
            vec![SseEvent {
                id: Some("7".into()),
                data: "z".into()
            }]
        );
    }

    #[test]
    fn formats_lifecycle_events() {
        let e = LifecycleEvent {
            seq: 41,
            time_ms: 1_718_000_000_123,
            instance: "i-7f3a".into(),
            action: "guest/hello".into(),
            kind: EventKind::RuntimeReady,
            memory: Some(MemoryStats {
                uss: 9_732_096,
                pss: 10_240_000,
                rss: 15_728_640,
                swap: 0,
                cgroup: 0,
            }),
            detail: Some("after 12 ms".into()),
        };
        assert_eq!(
            event_line(&e),
            "#41    2024-06-10 06:13:20.123  runtime_ready  guest/hello  i-7f3a  uss 9.3 MiB pss 9.8 MiB rss 15.0 MiB  after 12 ms"
        );
        let data = r#"{"seq":42,"time_ms":0,"instance":"i","action":"guest/a","kind":"thawed"}"#;
        let e: LifecycleEvent = serde_json::from_str(data).unwrap();
        assert_eq!(
            event_line(&e),
            "#42    1970-01-01 00:00:00.000  thawed         guest/a  i"
        );
    }
}
