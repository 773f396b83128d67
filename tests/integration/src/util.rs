//! Waiting for the daemon to reach a state on its own, and trimming logs for messages.

use std::time::{Duration, Instant};

/// Polls `probe` every 25 ms until it gives Some, or panics after `within` saying what was
/// awaited. For states the daemon reaches on its own (freezing, eviction).
#[track_caller]
pub fn wait_for<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The last `lines` lines of `text`, saying how many were left out.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let skip = all.len().saturating_sub(lines);
    let mut out = String::new();
    if skip > 0 {
        out.push_str(&format!("[... {skip} earlier lines ...]\n"));
    }
    out.push_str(&all[skip..].join("\n"));
    out
}
