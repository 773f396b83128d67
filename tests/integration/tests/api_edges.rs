//! Small API defects found by trying the daemon as a client would (issue 18 §6): item paths
//! with a trailing slash, the answers hyper gives before any handler runs, and boolean query
//! parameters. Each runs against a real iceboxd.

use icebox_integration::{action_path, Auth, Daemon};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends raw bytes and reads the answer until the daemon closes the connection.
fn raw_exchange(d: &Daemon, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", d.port())).expect("connecting to iceboxd");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The daemon may answer and close before it has read all of a huge head.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !out.is_empty() => break,
            Err(e) => panic!(
                "reading the answer: {e} (got {:?})",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete answer: {text:?}"));
    (head.to_string(), body.to_string())
}

fn assert_json_error(head: &str, body: &str, status: &str) {
    assert!(
        head.starts_with(&format!("HTTP/1.1 {status} ")),
        "expected {status}: {head}"
    );
    let v: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{status} body is not JSON ({e}): {body:?}\n{head}"));
    assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(v["code"].is_string(), "{body}");
}

#[test]
fn item_paths_answer_with_a_trailing_slash() {
    let d = Daemon::start(&[]);
    d.deploy_echo();
    let action = d
        .get(&format!("{}/", action_path("echo")))
        .expect(200)
        .json();
    assert_eq!(action["name"], "echo");
    d.get("/icebox/v1/memory/").expect(200).json();
    // Public without a key, with the slash too.
    let health = d.request("GET", "/icebox/v1/health/", Auth::None, None);
    assert_eq!(health.status, 200, "{}", health.body);
    // A query string survives the trim.
    let no_code = d
        .get(&format!("{}/?code=false", action_path("echo")))
        .expect(200)
        .json();
    assert!(no_code["exec"].get("code").is_none(), "{no_code}");
    let reply = d.request(
        "POST",
        &format!("{}/?blocking=true&result=true", action_path("echo")),
        Auth::Key(icebox_integration::AUTH),
        Some(br#"{"x": 1}"#),
    );
    assert_eq!(reply.expect(200).json(), json!({"x": 1}));
}

#[test]
fn answers_hyper_gives_before_any_handler_are_json() {
    let d = Daemon::start(&[]);
    let (head, body) = raw_exchange(&d, b"NOT AN HTTP REQUEST\r\n\r\n");
    assert_json_error(&head, &body, "400");

    let long_uri = format!(
        "GET /icebox/v1/health?{} HTTP/1.1\r\nHost: icebox\r\n\r\n",
        "a".repeat(70_000)
    );
    let (head, body) = raw_exchange(&d, long_uri.as_bytes());
    assert_json_error(&head, &body, "414");

    let mut huge_head = String::from("GET /icebox/v1/health HTTP/1.1\r\nHost: icebox\r\n");
    for i in 0..400 {
        huge_head.push_str(&format!("X-Filler-{i}: {}\r\n", "b".repeat(2000)));
    }
    huge_head.push_str("\r\n");
    let (head, body) = raw_exchange(&d, huge_head.as_bytes());
    assert_json_error(&head, &body, "431");

    // The daemon is unharmed and ordinary answers are untouched.
    d.assert_healthy();
}

#[test]
fn boolean_parameters_take_true_or_false_only() {
    let d = Daemon::start(&[]);
    d.deploy_echo();
    let before = d
        .get_json("/api/v1/namespaces/_/activations")
        .as_array()
        .map_or(0, Vec::len);
    let reply = d.invoke_raw("echo", "blocking=maybe", b"{}").expect(400);
    assert!(
        reply.error_message().contains("'blocking'"),
        "{}",
        reply.body
    );
    let reply = d
        .invoke_raw("echo", "blocking=true&result=yes", b"{}")
        .expect(400);
    assert!(reply.error_message().contains("'result'"), "{}", reply.body);
    // Refused before anything ran: no activation was made.
    let after = d
        .get_json("/api/v1/namespaces/_/activations")
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(before, after);

    let reply = d.get("/icebox/v1/events?follow=yes").expect(400);
    assert!(reply.error_message().contains("'follow'"), "{}", reply.body);
    let reply = d
        .get(&format!("{}?code=nope", action_path("echo")))
        .expect(400);
    assert!(reply.error_message().contains("'code'"), "{}", reply.body);
    // The accepted spellings still work.
    d.invoke_raw("echo", "blocking=1&result=TRUE", b"{}")
        .expect(200);
    d.invoke_raw("echo", "blocking=false", b"{}").expect(202);
}
