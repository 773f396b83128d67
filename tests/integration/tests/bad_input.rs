//! Every kind of bad input against the real daemon. Each test also keeps a healthy neighbour
//! action warm and checks afterwards that the daemon still serves it from the same instance:
//! no bad input may crash the daemon or reach another instance.

use icebox_core::units::MIB;
use icebox_integration::{action_path, leaks, wait_for, Auth, Daemon, Neighbour, AUTH, NAMESPACE};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// No instance of `action` is listed (a failed or broken instance is removed).
fn no_instance_of(d: &Daemon, action: &str) -> bool {
    let fqn = format!("{NAMESPACE}/{action}");
    d.instances().iter().all(|i| i["action"] != fqn.as_str())
}

#[track_caller]
fn assert_instance_gone(d: &Daemon, instance: &str) {
    assert!(!instance.is_empty(), "the activation names its instance");
    wait_for(
        "the broken instance to be removed",
        Duration::from_secs(20),
        || {
            (d.instance(instance).is_none()
                && !leaks::instance_cgroup_exists(d.state().tag(), instance))
            .then_some(())
        },
    );
}

#[test]
fn malformed_json_is_rejected_with_400() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);

    for body in [
        &b"{\"exec\": {\"kind\": \"python:3\", \"code\": "[..],
        b"not json at all",
        b"[1, 2]",
    ] {
        let reply = d
            .request("PUT", &action_path("broken"), Auth::Key(AUTH), Some(body))
            .expect(400);
        assert!(!reply.error_message().is_empty());
    }
    assert_eq!(
        d.get(&action_path("broken")).status,
        404,
        "a rejected action is not stored"
    );

    let reply = d
        .invoke_raw(&n.name, "blocking=true", b"{\"name\": ")
        .expect(400);
    assert!(
        reply.error_message().contains("malformed"),
        "{}",
        reply.body
    );
    let reply = d
        .invoke_raw(&n.name, "blocking=true", b"[\"not\", \"an\", \"object\"]")
        .expect(400);
    assert!(reply.error_message().contains("object"), "{}", reply.body);

    n.check(&d);
    d.stop();
}

#[test]
fn unknown_action_and_namespace_are_404() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);

    d.get(&action_path("nope")).expect(404);
    let reply = d.invoke_raw("nope", "blocking=true", b"{}").expect(404);
    assert!(reply.error_message().contains("nope"), "{}", reply.body);
    d.request("DELETE", &action_path("nope"), Auth::Key(AUTH), None)
        .expect(404);
    d.get("/api/v1/namespaces/_/activations/0123456789abcdef0123456789abcdef")
        .expect(404);

    let reply = d
        .get("/api/v1/namespaces/somebody-else/actions")
        .expect(404);
    assert!(
        reply.error_message().contains("somebody-else"),
        "{}",
        reply.body
    );
    d.request(
        "POST",
        &format!(
            "/api/v1/namespaces/somebody-else/actions/{}?blocking=true",
            n.name
        ),
        Auth::Key(AUTH),
        Some(b"{}"),
    )
    .expect(404);
    // The key's own namespace by name works like `_`.
    d.get(&format!("/api/v1/namespaces/guest/actions/{}", n.name))
        .expect(200);

    n.check(&d);
    d.stop();
}

#[test]
fn unknown_kind_is_400() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);

    let reply = d
        .put_action(
            "cobol",
            &json!({"exec": {"kind": "cobol:85", "code": "DISPLAY 'HI'."}}),
        )
        .expect(400);
    let message = reply.error_message();
    assert!(
        message.contains("cobol:85") && message.contains("python:3"),
        "names the kind and the supported ones: {message}"
    );
    d.get(&action_path("cobol")).expect(404);

    n.check(&d);
    d.stop();
}

#[test]
fn wrong_or_missing_api_key_is_401() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let (uuid, _) = AUTH.split_once(':').unwrap();
    let wrong = format!("{uuid}:not-the-key");
    let invoke = format!("{}?blocking=true", action_path(&n.name));

    for auth in [Auth::Key(&wrong), Auth::Key("someone:else"), Auth::None] {
        d.request("GET", "/api/v1/namespaces/_/actions", auth, None)
            .expect(401);
        d.request("POST", &invoke, auth, Some(b"{}")).expect(401);
        d.request(
            "PUT",
            &action_path("intruder"),
            auth,
            Some(br#"{"exec":{"kind":"python:3","code":"def main(a): return {}"}}"#),
        )
        .expect(401);
        d.request("GET", "/icebox/v1/instances", auth, None)
            .expect(401);
        let reply = d
            .request("GET", "/api/v1/namespaces/_/activations", auth, None)
            .expect(401);
        assert!(!reply.error_message().is_empty());
    }
    d.get(&action_path("intruder")).expect(404);
    // Health and metrics need no key.
    d.request("GET", "/icebox/v1/health", Auth::None, None)
        .expect(200);
    d.request("GET", "/metrics", Auth::None, None).expect(200);

    n.check(&d);
    d.stop();
}

/// Each failing-to-load action: (name, kind, code, what the init error must mention).
const LOAD_FAILURES: &[(&str, &str, &str, &str)] = &[
    (
        "py-syntax",
        "python:3",
        "def main(args):\n    return {'unclosed': [1, 2\n",
        "SyntaxError",
    ),
    (
        "py-no-main",
        "python:3",
        "def handler(args):\n    return {}\n",
        "main",
    ),
    (
        "js-syntax",
        "nodejs:20",
        "function main(params) {\n  return { unclosed: [1, 2 };\n",
        "SyntaxError",
    ),
    (
        "js-no-main",
        "nodejs:20",
        "function handler(params) { return {}; }\n",
        "main",
    ),
];

#[test]
fn code_that_fails_to_load_gives_an_init_error() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);

    for (name, kind, code, mentions) in LOAD_FAILURES {
        d.deploy(name, kind, code, json!({"memory": 128}));
        for attempt in 0..2 {
            let a = d.invoke(name, json!({}));
            assert_eq!(a.http_status, 502, "{name}: {:#}", a.record);
            assert_eq!(
                a.status(),
                "action developer error",
                "{name}: {:#}",
                a.record
            );
            let error = a.error();
            assert!(
                error.contains("nitializ") && error.contains(mentions),
                "{name} (attempt {attempt}): the error says initialisation failed and why ({mentions}): {error}"
            );
            assert!(
                a.annotation("initTime").is_some(),
                "{name}: an init failure is a cold start with initTime"
            );
            assert!(
                no_instance_of(&d, name),
                "{name}: an instance whose init failed is removed"
            );
        }
    }

    n.check(&d);
    d.stop();
}

#[test]
fn user_code_that_throws_is_an_application_error_and_the_instance_lives_on() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let cases = [
        ("py-throws", "python:3", "def main(args):\n    if args.get('fail'):\n        raise ValueError('boom from python')\n    return {'ok': True}\n", "boom from python"),
        ("js-throws", "nodejs:20", "function main(params) {\n  if (params.fail) throw new Error('boom from node');\n  return { ok: true };\n}\n", "boom from node"),
        ("js-rejects", "nodejs:20", "async function main(params) {\n  if (params.fail) throw new Error('rejected by node');\n  return { ok: true };\n}\n", "rejected by node"),
    ];
    for (name, kind, code, message) in cases {
        d.deploy(name, kind, code, json!({"memory": 128}));
        let failed = d.invoke(name, json!({"fail": true}));
        assert_eq!(failed.http_status, 502, "{name}: {:#}", failed.record);
        assert_eq!(
            failed.status(),
            "application error",
            "{name}: {:#}",
            failed.record
        );
        assert!(
            failed.error().contains(message),
            "{name}: {}",
            failed.error()
        );
        assert_eq!(failed.start_kind(), "cold");

        let next = d.invoke(name, json!({})).expect_success();
        assert_eq!(next.result()["ok"], true);
        assert_eq!(
            next.start_kind(),
            "warm",
            "{name}: the instance survived the exception"
        );
        assert_eq!(
            next.instance(),
            failed.instance(),
            "{name}: the same instance serves the next invocation"
        );
    }

    n.check(&d);
    d.stop();
}

#[test]
fn a_result_that_is_not_a_json_object_is_a_developer_error() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let cases = [
        (
            "py-list",
            "python:3",
            "def main(args):\n    return [1, 2, 3]\n",
        ),
        (
            "py-none",
            "python:3",
            "def main(args):\n    print('returns nothing')\n",
        ),
        ("js-number", "nodejs:20", "function main() { return 42; }\n"),
        (
            "js-string",
            "nodejs:20",
            "function main() { return 'hello'; }\n",
        ),
    ];
    for (name, kind, code) in cases {
        d.deploy(name, kind, code, json!({"memory": 128}));
        let a = d.invoke(name, json!({}));
        assert_eq!(a.http_status, 502, "{name}: {:#}", a.record);
        assert_eq!(
            a.status(),
            "action developer error",
            "{name}: {:#}",
            a.record
        );
        assert!(
            a.error().contains("did not return"),
            "{name}: {}",
            a.error()
        );
    }

    n.check(&d);
    d.stop();
}

#[test]
fn exceeding_the_memory_limit_is_reported_and_the_instance_removed() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    // b"x" * n writes every byte, so the pages are really charged to the cgroup.
    let code = "def main(args):\n    hog = b'x' * (args['mb'] * 1024 * 1024)\n    return {'allocated': len(hog)}\n";
    d.deploy("hog", "python:3", code, json!({"memory": 64}));

    let a = d.invoke("hog", json!({"mb": 512}));
    assert_eq!(a.http_status, 502, "{:#}", a.record);
    assert_eq!(a.status(), "action developer error", "{:#}", a.record);
    assert!(
        a.error().contains("memory limit"),
        "the error names the memory limit: {}",
        a.error()
    );
    assert_instance_gone(&d, a.instance());

    // The action itself still works within its limit (on a new instance).
    let ok = d.invoke("hog", json!({"mb": 1})).expect_success();
    assert_eq!(ok.result()["allocated"], MIB);
    assert_eq!(ok.start_kind(), "cold");

    n.check(&d);
    d.stop();
}

#[test]
fn a_timeout_is_reported_and_the_instance_removed() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let code = "import time\n\ndef main(args):\n    time.sleep(args.get('sleep', 0))\n    return {'slept': args.get('sleep', 0)}\n";
    d.deploy(
        "sleepy",
        "python:3",
        code,
        json!({"memory": 128, "timeout": 1000}),
    );

    let warmup = d.invoke("sleepy", json!({})).expect_success();
    let a = d.invoke("sleepy", json!({"sleep": 5}));
    assert_eq!(a.http_status, 502, "{:#}", a.record);
    assert_eq!(a.status(), "action developer error", "{:#}", a.record);
    assert_eq!(
        a.error(),
        "The action exceeded its time limits of 1000 milliseconds."
    );
    assert!(a.timed_out(), "annotation timeout=true: {:#}", a.record);
    assert_eq!(a.instance(), warmup.instance());
    assert_instance_gone(&d, a.instance());

    let next = d.invoke("sleepy", json!({})).expect_success();
    assert_eq!(
        next.start_kind(),
        "cold",
        "a timed-out instance is never reused"
    );
    assert!(!next.timed_out());

    n.check(&d);
    d.stop();
}

#[test]
fn a_fork_bomb_is_contained_by_the_pids_limit() {
    let d = Daemon::start(&["--pids-max", "64"]);
    let n = Neighbour::deploy(&d);
    // Every process keeps forking; a failed fork (EAGAIN at the pids limit) only pauses it.
    let code = "import os, time\n\ndef main(args):\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            time.sleep(0.05)\n";
    d.deploy(
        "bomb",
        "python:3",
        code,
        json!({"memory": 128, "timeout": 5000}),
    );

    let (a, (limit, hits)) = std::thread::scope(|s| {
        let invocation = s.spawn(|| d.invoke("bomb", json!({})));
        // While it runs: the kernel refuses forks at the limit.
        let contained = wait_for(
            "the bomb to hit the pids limit",
            Duration::from_secs(5),
            || {
                let bomb = d
                    .instances()
                    .into_iter()
                    .find(|i| i["action"] == "guest/bomb")?;
                let (limit, hits) =
                    leaks::instance_pids_limit(d.state().tag(), bomb["id"].as_str()?)?;
                (hits > 0).then_some((limit, hits))
            },
        );
        (invocation.join().expect("invoking thread"), contained)
    });
    assert_eq!(limit, "64", "--pids-max is the instance's pids limit");
    assert!(hits > 0);
    assert_eq!(a.http_status, 502, "{:#}", a.record);
    assert_eq!(a.status(), "action developer error", "{:#}", a.record);
    assert!(
        a.timed_out() || a.error().contains("process limit"),
        "the bomb ends in a timeout or a process-limit error: {:#}",
        a.record
    );
    // A cgroup cannot be removed while a process is in it, and an unprivileged process
    // cannot leave it: the cgroup being gone means every forked process is gone.
    assert_instance_gone(&d, a.instance());

    n.check(&d);
    d.stop();
}

/// The 5 MiB payload limit is the invocation's: action code has its own (48 MiB, issue 23).
#[test]
fn payload_over_5_mb_is_413_but_code_is_not_a_payload() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let big = "x".repeat(6 * 1024 * 1024);

    let params = serde_json::to_vec(&json!({ "blob": big })).unwrap();
    let reply = d.invoke_raw(&n.name, "blocking=true", &params).expect(413);
    assert_eq!(
        reply.error_message(),
        format!(
            "Request larger than allowed: {} > 5242880 bytes.",
            params.len()
        )
    );

    let action = json!({"exec": {"kind": "python:3", "code": format!("# {big}\ndef main(args):\n    return {{}}\n")}});
    d.put_action("huge", &action).expect(200);
    d.get(&action_path("huge")).expect(200);

    n.check(&d);
    d.stop();
}

fn zip_of(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, content) in entries {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(content.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn archives_with_escaping_entries_are_rejected_at_create() {
    let d = Daemon::start(&[]);
    let n = Neighbour::deploy(&d);
    let main = "def main(args):\n    return {'ok': True}\n";

    let evil_zip = zip_of(&[
        ("__main__.py", main),
        ("../../escaped.py", "print('out')\n"),
    ]);
    let reply = d
        .put_action(
            "zipslip",
            &json!({"exec": {"kind": "python:3", "code": b64(&evil_zip), "binary": true}}),
        )
        .expect(400);
    assert!(
        reply.error_message().contains("../../escaped.py"),
        "names the bad entry: {}",
        reply.body
    );
    d.get(&action_path("zipslip")).expect(404);

    let evil_jar = zip_of(&[
        ("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"),
        ("../Evil.class", "\u{ca}\u{fe}"),
    ]);
    let reply = d
        .put_action("jarslip", &json!({"exec": {"kind": "java:17", "code": b64(&evil_jar), "binary": true, "main": "Evil"}}))
        .expect(400);
    assert!(
        reply.error_message().contains("../Evil.class"),
        "names the bad entry: {}",
        reply.body
    );

    let absolute = zip_of(&[
        ("__main__.py", main),
        ("/etc/cron.d/evil", "* * * * * root true\n"),
    ]);
    d.put_action(
        "abs",
        &json!({"exec": {"kind": "python:3", "code": b64(&absolute), "binary": true}}),
    )
    .expect(400);

    // The same archive without the bad entry deploys and runs.
    let good = zip_of(&[("__main__.py", main)]);
    d.put_action(
        "zipok",
        &json!({"exec": {"kind": "python:3", "code": b64(&good), "binary": true}}),
    )
    .expect(200);
    assert_eq!(
        d.invoke("zipok", json!({})).expect_success().result()["ok"],
        true
    );

    n.check(&d);
    d.stop();
}

#[test]
fn more_invocations_than_capacity_are_queued_then_refused_with_429() {
    // One instance may exist (the neighbour would take it), so no neighbour here: the
    // health and a final invocation show the daemon is fine.
    let d = Arc::new(Daemon::start(&[
        "--max-instances",
        "1",
        "--queue-size",
        "2",
    ]));
    let code = "import time\n\ndef main(args):\n    time.sleep(args.get('sleep', 0))\n    return {'done': True}\n";
    d.deploy(
        "slow",
        "python:3",
        code,
        json!({"memory": 128, "timeout": 30000}),
    );

    let callers = 6;
    let barrier = Arc::new(Barrier::new(callers));
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (d, barrier) = (d.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                d.invoke_raw("slow", "blocking=true", br#"{"sleep": 3}"#)
            })
        })
        .collect();
    let replies: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("caller thread"))
        .collect();

    let ok: Vec<Value> = replies
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.json())
        .collect();
    let refused: Vec<_> = replies.iter().filter(|r| r.status == 429).collect();
    let statuses: Vec<u16> = replies.iter().map(|r| r.status).collect();
    assert_eq!(
        ok.len() + refused.len(),
        callers,
        "every call succeeds or is refused: {statuses:?}"
    );
    // One runs, two wait in the queue, and the rest arrive while the queue is full.
    assert!(
        ok.len() >= 3,
        "the running call and the queued ones succeed: {statuses:?}"
    );
    assert!(
        !refused.is_empty(),
        "calls beyond the queue are refused: {statuses:?}"
    );
    for r in &refused {
        let retry: u64 = r
            .retry_after
            .as_deref()
            .expect("429 carries Retry-After")
            .parse()
            .expect("Retry-After is seconds");
        assert!(retry >= 1);
        assert!(!r.error_message().is_empty());
    }
    let instances: std::collections::BTreeSet<&str> = ok
        .iter()
        .map(|rec| {
            rec["annotations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|kv| kv["key"] == "icebox.instance")
                .unwrap()["value"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        instances.len(),
        1,
        "with --max-instances 1 the queued calls ran on the one instance"
    );

    d.assert_healthy();
    let after = d.invoke("slow", json!({})).expect_success();
    assert_eq!(after.start_kind(), "warm");
    Arc::try_unwrap(d).ok().expect("callers are done").stop();
}

/// Results are payloads too: one over `--max-payload` is OpenWhisk's developer error with its
/// message, and the instance serves on (issue 23; before, only a 16 MiB transport cap held).
#[test]
fn a_result_over_the_payload_limit_is_a_developer_error_naming_both_sizes() {
    let d = Daemon::start(&["--max-payload", "1MiB"]);
    d.deploy(
        "bigresult",
        "python:3",
        "def main(args):\n    return {'s': 'x' * args.get('n', 0)}\n",
        json!({}),
    );
    let small = d.invoke("bigresult", json!({"n": 1000})).expect_success();
    let a = d.invoke("bigresult", json!({"n": 2 * MIB}));
    assert_eq!(a.status(), "action developer error", "{}", a.result());
    let error = a.result()["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with("The action produced a response that exceeded the allowed length: ")
            && error.ends_with(" > 1048576 bytes."),
        "{error}"
    );
    // The runtime is fine: the same instance answers the next call.
    let again = d.invoke("bigresult", json!({"n": 10})).expect_success();
    assert_eq!(again.instance(), small.instance());
    d.stop();
}
