//! The HTTP front door against clients that misbehave on purpose (issue 8): slow or silent
//! connections, floods of connections, unauthenticated payloads, clients that hold the daemon
//! open at shutdown, and the small routing/error-shape rules OpenWhisk clients rely on. Each
//! test runs against a real iceboxd with default flags unless it says otherwise.

use icebox_core::units::MIB_USIZE;
use icebox_integration::{action_path, Auth, Daemon, AUTH};
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn connect(d: &Daemon) -> TcpStream {
    TcpStream::connect(("127.0.0.1", d.port())).expect("connecting to iceboxd")
}

/// True once the daemon has closed `stream` (EOF or reset), false if it is still open after
/// `wait` (a bound for the test, not a measurement).
fn closed_by_daemon(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer (408) before the close is fine
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

fn raise_own_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        },
    );
}

#[test]
fn slow_and_idle_connections_are_closed() {
    let d = Daemon::start(&[]);
    // slowloris: half a request header, then silence.
    let mut slow = connect(&d);
    slow.write_all(b"GET /icebox/v1/health HTTP/1.1\r\nHost: icebox\r\nX-Slow: ")
        .unwrap();
    // an idle keep-alive connection after one complete request.
    let mut idle = connect(&d);
    idle.write_all(b"GET /icebox/v1/health HTTP/1.1\r\nHost: icebox\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    // the default header timeout is 20 s: both must be gone well within a minute.
    assert!(
        closed_by_daemon(&mut slow, Duration::from_secs(60)),
        "a half-sent header holds its connection open"
    );
    assert!(
        closed_by_daemon(&mut idle, Duration::from_secs(60)),
        "an idle keep-alive connection is never closed"
    );
    d.assert_healthy();
    d.stop();
}

#[test]
fn a_flood_of_idle_connections_does_not_stop_the_service() {
    raise_own_nofile();
    // Open files limited to what a sandbox gets (4096): before the cap, 5000 idle
    // connections took every fd and health stopped answering.
    let d = Daemon::start_with_nofile(4096, &[]);
    d.deploy_echo();
    let mut flood = Vec::new();
    for _ in 0..5000 {
        match TcpStream::connect(("127.0.0.1", d.port())) {
            Ok(s) => flood.push(s),
            Err(_) => break,
        }
    }
    assert!(
        flood.len() >= 4500,
        "the test could open only {} connections",
        flood.len()
    );
    d.assert_healthy();
    let a = d.invoke("echo", json!({"x": 1}));
    assert!(
        a.succeeded(),
        "an authenticated client is served during the flood: {:?}",
        a.record
    );
    let metrics = d
        .request("GET", "/metrics", Auth::None, None)
        .expect(200)
        .body;
    assert!(
        metrics.contains("icebox_http_connections_evicted_total"),
        "{metrics}"
    );
    drop(flood);
    d.stop();
}

#[test]
fn unauthenticated_bodies_are_refused_before_they_are_read_into_memory() {
    let d = Daemon::start(&[]);
    let pid = d.pid();
    let before = rss_kib(pid);
    let body = vec![b'x'; 5 * MIB_USIZE];
    let base = d.base_url().to_string();
    let threads: Vec<_> = (0..200)
        .map(|_| {
            let body = body.clone();
            let url = format!("{base}{}", action_path("anything"));
            std::thread::spawn(move || {
                let mut statuses = Vec::new();
                for _ in 0..1 {
                    let r = ureq::post(&url)
                        .set("Content-Type", "application/json")
                        .send_bytes(&body);
                    statuses.push(match r {
                        Ok(resp) => resp.status(),
                        Err(ureq::Error::Status(code, _)) => code,
                        Err(ureq::Error::Transport(_)) => 0,
                    });
                }
                statuses
            })
        })
        .collect();
    let statuses: Vec<u16> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 0),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().filter(|s| **s == 401).count() >= 150,
        "most clients read their 401: {statuses:?}"
    );
    let grown_mib = rss_kib(pid).saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "200 unauthenticated 5 MiB bodies grew the daemon by {grown_mib} MiB"
    );
    // an unknown path without a key is refused for the key, not reported missing.
    let r = d.request("GET", "/api/v1/no/such/thing", Auth::None, None);
    assert_eq!(r.status, 401, "{}", r.body);
    d.assert_healthy();
    d.stop();
}

#[test]
fn shutdown_finishes_whatever_clients_hold_open() {
    let d = Daemon::start(&[]);
    d.deploy_echo();
    d.invoke("echo", json!({})).expect_success();
    let auth = icebox_integration::basic(AUTH);
    // a follow stream of events
    let mut follow = connect(&d);
    write!(follow, "GET /icebox/v1/events?follow=true HTTP/1.1\r\nHost: icebox\r\nAuthorization: {auth}\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    follow.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // a half-sent header
    let mut partial_header = connect(&d);
    partial_header
        .write_all(b"GET /icebox/v1/instances HTTP/1.1\r\nHost: ic")
        .unwrap();
    // a half-sent body
    let mut partial_body = connect(&d);
    write!(
        partial_body,
        "POST {}?blocking=true HTTP/1.1\r\nHost: icebox\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"a\":",
        action_path("echo")
    )
    .unwrap();
    // Give the daemon a moment to be inside each of those requests before the signal.
    std::thread::sleep(Duration::from_millis(200));
    // stop() sends SIGTERM and fails the test if the daemon does not exit (within its bound)
    // or leaves an instance or cgroup behind.
    d.stop();
    drop((follow, partial_header, partial_body));
}

#[test]
fn routes_and_errors_follow_openwhisk() {
    let d = Daemon::start(&[]);
    d.deploy_echo();
    let listed = d.get("/api/v1/namespaces/_/actions/").expect(200).json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    d.get("/api/v1/namespaces/_/activations/").expect(200);
    let unknown = d.get("/api/v1/namespaces/_/nothing-here").expect(404);
    assert!(unknown
        .content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("application/json")));
    let bad_query = d.get("/api/v1/namespaces/_/actions?limit=lots").expect(400);
    assert!(
        bad_query
            .content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json")),
        "a query the daemon cannot parse is answered in the JSON error shape: {:?} {}",
        bad_query.content_type,
        bad_query.body
    );
    assert!(!bad_query.error_message().is_empty());
    let wrong_method = d
        .request("PATCH", &action_path("echo"), Auth::Key(AUTH), None)
        .expect(405);
    assert!(!wrong_method.error_message().is_empty());
    d.stop();
}

#[test]
fn actions_get_the_api_key_only_when_they_ask_for_it() {
    let d = Daemon::start(&[]);
    let code = "import os\ndef main(args):\n    return {'key': os.environ.get('__OW_API_KEY')}\n";
    d.deploy("plain", "python:3", code, json!({}));
    let asks = json!({
        "exec": {"kind": "python:3", "code": code},
        "annotations": [{"key": "provide-api-key", "value": true}],
    });
    d.put_action("asks", &asks).expect(200);
    let plain = d.invoke("plain", json!({})).expect_success();
    assert_eq!(
        plain.result()["key"],
        serde_json::Value::Null,
        "the node's admin key reached an action that did not ask for it"
    );
    let asked = d.invoke("asks", json!({})).expect_success();
    assert_eq!(
        asked.result()["key"],
        AUTH,
        "provide-api-key: true gives the key, as in OpenWhisk"
    );
    d.stop();
}
