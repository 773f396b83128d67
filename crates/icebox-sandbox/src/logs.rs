//! Collects a runtime's stdout/stderr and cuts it into per-activation logs at the sentinel
//! line the action protocol prints after each activation.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::Notify;

pub const SENTINEL: &str = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX";

/// Lines kept per activation before the rest is dropped (with a note).
const MAX_LINES: usize = 10_000;
const MAX_LINE_BYTES: usize = 16 * 1024;

#[derive(Default)]
struct Inner {
    lines: Vec<String>,
    truncated: bool,
    /// Sentinels seen per stream (0 = stdout, 1 = stderr).
    sentinels: [u64; 2],
    closed: [bool; 2],
}

#[derive(Default)]
pub struct LogCollector {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl LogCollector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Read one stream until EOF. `stream` is 0 for stdout, 1 for stderr.
    pub async fn pump<R: AsyncRead + Unpin>(&self, reader: R, stream: usize) {
        let name = if stream == 0 { "stdout" } else { "stderr" };
        let mut reader = BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&buf);
            let line = text.trim_end_matches(['\n', '\r']);
            // Output without a final newline puts the sentinel at the end of its last line.
            let (line, ends_activation) = match line.strip_suffix(SENTINEL) {
                Some(prefix) => (prefix, true),
                None => (line, false),
            };
            let mut inner = self.inner.lock().unwrap();
            if line.is_empty() && ends_activation {
                // Sentinel alone on its line: nothing to keep.
            } else if inner.lines.len() >= MAX_LINES {
                inner.truncated = true;
            } else {
                let mut line = line.to_string();
                if line.len() > MAX_LINE_BYTES {
                    let mut cut = MAX_LINE_BYTES;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                let ts = humantime::format_rfc3339_millis(SystemTime::now());
                inner.lines.push(format!("{ts} {name}: {line}"));
            }
            if ends_activation {
                inner.sentinels[stream] += 1;
            }
            drop(inner);
            self.changed.notify_waiters();
        }
        self.inner.lock().unwrap().closed[stream] = true;
        self.changed.notify_waiters();
    }

    /// Sentinel counts now; pass them to [`Self::take_after`] to wait for the next ones.
    pub fn marks(&self) -> [u64; 2] {
        self.inner.lock().unwrap().sentinels
    }

    /// Wait (at most `wait`) until both streams printed a sentinel past `marks`, then take the
    /// lines collected so far.
    pub async fn take_after(&self, marks: [u64; 2], wait: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.changed.notified();
            {
                let inner = self.inner.lock().unwrap();
                let done = (0..2).all(|s| inner.sentinels[s] > marks[s] || inner.closed[s]);
                if done {
                    break;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        self.take()
    }

    /// Take whatever was collected (e.g. after the instance died).
    pub fn take(&self) -> Vec<String> {
        let mut inner = self.inner.lock().unwrap();
        let mut lines = std::mem::take(&mut inner.lines);
        if std::mem::take(&mut inner.truncated) {
            lines.push(format!("Logs were truncated: more than {MAX_LINES} lines."));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_at_sentinels_on_both_streams() {
        let c = LogCollector::new();
        let out = format!("hello\n{SENTINEL}\nno newline{SENTINEL}\n");
        let err = format!("oops\n{SENTINEL}\n{SENTINEL}\n");
        let marks = c.marks();
        c.pump(out.as_bytes(), 0).await;
        c.pump(err.as_bytes(), 1).await;
        let lines = c.take_after(marks, Duration::from_millis(10)).await;
        assert_eq!(lines.len(), 3);
        assert!(lines[1].ends_with(" stdout: no newline"));
        assert!(lines[0].ends_with(" stdout: hello"));
        assert!(lines.iter().any(|l| l.ends_with(" stderr: oops")));
        assert_eq!(c.marks(), [2, 2]);
        assert!(c.take().is_empty());
    }

    #[tokio::test]
    async fn waits_for_late_sentinel_then_gives_up() {
        let c = std::sync::Arc::new(LogCollector::new());
        let marks = c.marks();
        // Nothing ever arrives on either stream: returns empty after the wait.
        let lines = c.take_after(marks, Duration::from_millis(20)).await;
        assert!(lines.is_empty());
    }
}
