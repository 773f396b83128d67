//! Writing to stdout without panicking when the reader goes away (`icebox events -f | head`).

use serde_json::Value;
use std::io::{ErrorKind, Write};

/// Writes `text` to stdout. A closed pipe ends the program quietly: whoever read the output
/// has all they wanted.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let result = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    if let Err(e) = result {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout failed: {e}");
        std::process::exit(1);
    }
}

pub fn emit_line(text: &str) {
    if text.ends_with('\n') {
        emit(text);
    } else {
        emit(&format!("{text}\n"));
    }
}

pub fn emit_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|_| out.flush()) {
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout failed: {e}");
            std::process::exit(1);
        }
    }
}

pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

pub fn emit_json(value: &Value) {
    emit_line(&pretty(value));
}
