//! Runtime sharing (`icebox.sharing`) against the real daemon and runtimes: where concurrent
//! activations run in each mode, what the instances view shows, and that a misbehaving
//! activation in a shared runtime fails alone.

use icebox_core::units::MIB;
use icebox_integration::{wait_for, Activation, Daemon};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// Deploy with annotations; panics unless the daemon accepts it.
fn deploy(
    d: &Daemon,
    name: &str,
    kind: &str,
    code: &str,
    limits: Value,
    sharing: &[(&str, Value)],
) {
    let annotations: Vec<Value> = sharing
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    d.put_action(
        name,
        &json!({"exec": {"kind": kind, "code": code}, "limits": limits, "annotations": annotations}),
    )
    .expect(200);
}

/// examples/nodejs/alloc.js as "alloc" in isolate mode, on the worker engine: alloc.js measures
/// its heap with Node's `v8` module, which the v8 engine's isolates do not have.
fn deploy_isolate_alloc(d: &Daemon, concurrency: u32, memory_mb: u32) {
    let code = std::fs::read_to_string(
        icebox_integration::paths::workspace_root().join("examples/nodejs/alloc.js"),
    )
    .unwrap();
    deploy(
        d,
        "alloc",
        "nodejs:20",
        &code,
        json!({"concurrency": concurrency, "memory": memory_mb}),
        &[
            ("icebox.sharing", json!("isolate")),
            ("icebox.isolate_engine", json!("worker")),
        ],
    );
}

/// Invoke `n` times at once, each with its own parameters.
fn invoke_together(d: &Daemon, name: &str, params: Vec<Value>) -> Vec<Activation> {
    std::thread::scope(|s| {
        let handles: Vec<_> = params
            .into_iter()
            .map(|p| s.spawn(move || d.invoke(name, p)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// One activation to start the instance, then `n` together, so all `n` find it running;
/// each must succeed.
fn warm_then_together(d: &Daemon, name: &str, warm: Value, n: usize) -> Vec<Activation> {
    d.invoke(name, warm).expect_success();
    invoke_together(d, name, vec![json!({}); n])
        .into_iter()
        .map(Activation::expect_success)
        .collect()
}

/// The distinct values of a numeric result field.
fn distinct(runs: &[Activation], field: &str) -> BTreeSet<u64> {
    runs.iter()
        .map(|a| a.result()[field].as_u64().unwrap())
        .collect()
}

fn instances_of(d: &Daemon, action: &str) -> Vec<Value> {
    d.instances()
        .into_iter()
        .filter(|i| i["action"] == format!("guest/{action}"))
        .collect()
}

/// Sleeps, so that activations started together overlap, and says where it ran.
const NODE_WHERE: &str = r#"
function main(params) {
  const { threadId } = require('worker_threads');
  return new Promise((resolve) => setTimeout(() => resolve({
    pid: process.pid, thread: threadId, activation: process.env.__OW_ACTIVATION_ID,
  }), params.ms || 1500));
}"#;

#[test]
fn process_mode_gives_each_concurrent_activation_its_own_instance() {
    let d = Daemon::start(&["--prewarm", "none"]);
    // limits.concurrency 4 without an annotation: the default, process, still isolates them.
    deploy(
        &d,
        "where",
        "nodejs:20",
        NODE_WHERE,
        json!({"concurrency": 4}),
        &[],
    );
    let runs = invoke_together(&d, "where", vec![json!({}); 3]);
    let instances: BTreeSet<&str> = runs.iter().map(|a| a.instance()).collect();
    assert_eq!(instances.len(), 3, "{instances:?}");
    for i in instances_of(&d, "where") {
        assert_eq!(i["sharing_mode"], "process", "{i}");
        assert!(i.get("sharing").is_none(), "{i}");
    }
}

/// Sleeps like NODE_WHERE and says which isolate it ran in: a number each isolate draws once
/// (V8 isolates have no worker_threads to ask).
const NODE_WHICH_ISOLATE: &str = r#"
function main(params) {
  globalThis.tag = globalThis.tag || 1 + Math.floor(Math.random() * 1e15);
  return new Promise((resolve) => setTimeout(() => resolve({
    isolate: globalThis.tag, activation: process.env.__OW_ACTIVATION_ID,
  }), params.ms || 1500));
}"#;

#[test]
fn isolate_mode_runs_concurrent_activations_in_isolates_of_one_instance() {
    let d = Daemon::start(&["--prewarm", "none"]);
    // The default engine (v8) and the worker engine alike.
    for (name, engine) in [("which", None), ("where", Some("worker"))] {
        let mut annotations = vec![("icebox.sharing", json!("isolate"))];
        if let Some(engine) = engine {
            annotations.push(("icebox.isolate_engine", json!(engine)));
        }
        let code = if engine.is_some() {
            NODE_WHERE
        } else {
            NODE_WHICH_ISOLATE
        };
        deploy(
            &d,
            name,
            "nodejs:20",
            code,
            json!({"concurrency": 4, "memory": 256}),
            &annotations,
        );
        isolates_of_one_instance(&d, name, engine.unwrap_or("v8"));
    }
}

fn isolates_of_one_instance(d: &Daemon, name: &str, engine: &str) {
    let runs = warm_then_together(d, name, json!({"ms": 10}), 3);
    let instances: BTreeSet<&str> = runs.iter().map(|a| a.instance()).collect();
    assert_eq!(
        instances.len(),
        1,
        "{engine}: one instance takes all three: {instances:?}"
    );
    let field = if engine == "worker" {
        "thread"
    } else {
        "isolate"
    };
    let isolates = distinct(&runs, field);
    assert_eq!(
        isolates.len(),
        3,
        "{engine}: each overlapping activation has its own isolate"
    );
    assert!(
        !isolates.contains(&0),
        "{engine}: none runs on the main thread: {isolates:?}"
    );
    // Each activation sees its own id, although they share one process.
    for a in &runs {
        assert_eq!(a.result()["activation"], a.id(), "{}", a.result());
    }
    let id = runs[0].instance().to_string();
    let view = wait_for("the isolates account", Duration::from_secs(10), || {
        d.instance(&id)
            .filter(|i| i["sharing"]["isolates"]["created"].as_u64() >= Some(3))
    });
    assert_eq!(view["sharing_mode"], "isolate");
    let iso = &view["sharing"]["isolates"];
    assert_eq!(iso["engine"], engine, "{iso}");
    assert_eq!(
        iso["live"].as_u64(),
        Some(iso["busy"].as_u64().unwrap() + iso["idle"].as_u64().unwrap()),
        "{iso}"
    );
    assert_eq!(view["sharing"]["capacity"], 4);
}

const NODE_MISBEHAVE: &str = r#"
function main(params) {
  if (params.do === 'hang') { for (;;) {} }
  if (params.do === 'exit') { process.exit(3); }
  if (params.do === 'oom') { const hog = []; for (;;) hog.push(new Array(1e6).fill(hog.length)); }
  return new Promise((resolve) => setTimeout(() => resolve({ ok: true }), 800));
}"#;

#[test]
fn an_isolate_that_hangs_crashes_or_runs_out_of_heap_fails_only_its_activation() {
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy(
        &d,
        "misbehave",
        "nodejs:20",
        NODE_MISBEHAVE,
        json!({"concurrency": 4, "memory": 512, "timeout": 3000}),
        &[
            ("icebox.sharing", json!("isolate")),
            ("icebox.isolate_memory", json!(64)),
        ],
    );
    let first = d.invoke("misbehave", json!({})).expect_success();
    let instance = first.instance().to_string();
    for bad in ["hang", "exit", "oom"] {
        let runs = invoke_together(&d, "misbehave", vec![json!({"do": bad}), json!({})]);
        assert!(!runs[0].succeeded(), "{bad}: {}", runs[0].result());
        assert_eq!(
            runs[0].timed_out(),
            bad == "hang",
            "{bad}: {}",
            runs[0].result()
        );
        assert!(
            runs[1].succeeded(),
            "{bad}: the neighbour failed: {}",
            runs[1].result()
        );
        assert_eq!(runs[1].instance(), instance, "{bad}: the neighbour moved");
        // The instance lives on and serves the next activation.
        let next = d.invoke("misbehave", json!({})).expect_success();
        assert_eq!(
            next.instance(),
            instance,
            "{bad}: the instance was replaced"
        );
    }
    let view = wait_for("crash and timeout counts", Duration::from_secs(10), || {
        d.instance(&instance)
            .filter(|i| i["sharing"]["isolates"]["crashed"].as_u64() >= Some(2))
    });
    assert!(
        view["sharing"]["isolates"]["timed_out"].as_u64() >= Some(1),
        "{view}"
    );
    d.assert_healthy();
}

/// One activation allocates Buffers, 64 MiB at a time, to 4 GiB; the rest sleep.
const NODE_BUFFER_HOG: &str = r#"
function main(params) {
  if (params.hog) {
    const keep = [];
    for (let i = 0; i < 64; i++) keep.push(Buffer.alloc(64 * 1024 * 1024, 1));
    return { kept: keep.length };
  }
  return new Promise((resolve) => setTimeout(() => resolve({ ok: true }), 2000));
}"#;

#[test]
fn an_isolate_allocating_buffers_past_its_limit_fails_alone() {
    // Issue 18 §3: a Worker's resourceLimits bound its JavaScript heap only, so one activation
    // allocating 4 GB of Buffers got the whole instance OOM-killed by its memory cgroup, and
    // its 7 concurrent neighbours failed with it. A V8 isolate's memoryLimit counts them.
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy(
        &d,
        "hog",
        "nodejs:20",
        NODE_BUFFER_HOG,
        json!({"concurrency": 8, "memory": 256, "timeout": 20000}),
        &[("icebox.sharing", json!("isolate"))],
    );
    let first = d.invoke("hog", json!({})).expect_success();
    let instance = first.instance().to_string();
    let mut params = vec![json!({"hog": true})];
    params.extend(std::iter::repeat_n(json!({}), 7));
    let runs = invoke_together(&d, "hog", params);
    let failed: Vec<String> = runs[1..]
        .iter()
        .filter(|a| !a.succeeded())
        .map(|a| a.result().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 7 neighbours failed with the hog: {failed:?}",
        failed.len()
    );
    for a in &runs[1..] {
        assert_eq!(a.instance(), instance, "a neighbour moved");
    }
    let hog = &runs[0];
    assert!(!hog.succeeded(), "{}", hog.result());
    let error = hog.result()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("ran out of memory (memory limit"),
        "{}",
        hog.result()
    );
    let next = d.invoke("hog", json!({})).expect_success();
    assert_eq!(next.instance(), instance, "the instance was replaced");
    d.assert_healthy();
}

#[test]
fn shared_mode_keeps_globals_private_to_each_concurrent_activation() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let code = r#"
function main(params) {
  globalThis.count = (globalThis.count || 0) + 1;
  const mine = globalThis.count;
  return new Promise((resolve) => setTimeout(() => resolve({
    pid: process.pid, count: mine, now: globalThis.count,
  }), params.ms || 1500));
}"#;
    deploy(
        &d,
        "globals",
        "nodejs:20",
        code,
        json!({"concurrency": 3}),
        &[("icebox.sharing", json!("shared"))],
    );
    let runs = warm_then_together(&d, "globals", json!({"ms": 10}), 3);
    let pids = distinct(&runs, "pid");
    assert_eq!(pids.len(), 1, "one runtime: {pids:?}");
    // No activation saw another's increment while they overlapped.
    for a in &runs {
        assert_eq!(a.result()["count"], a.result()["now"], "{}", a.result());
    }
    let id = runs[0].instance().to_string();
    let view = wait_for("the contexts account", Duration::from_secs(10), || {
        d.instance(&id)
            .filter(|i| i["sharing"]["contexts"]["live"].as_u64() >= Some(3))
    });
    assert_eq!(view["sharing_mode"], "shared");
}

#[test]
fn python_shared_mode_runs_concurrent_activations_on_threads_of_one_interpreter() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let code = r#"import os, time, threading
def main(args):
    time.sleep(args.get('s', 1.5))
    return {'pid': os.getpid(), 'thread': threading.get_ident(),
            'activation': os.environ.get('__OW_ACTIVATION_ID')}
"#;
    deploy(
        &d,
        "pyshared",
        "python:3",
        code,
        json!({"concurrency": 3}),
        &[("icebox.sharing", json!("shared"))],
    );
    let runs = warm_then_together(&d, "pyshared", json!({"s": 0}), 3);
    let pids = distinct(&runs, "pid");
    assert_eq!(pids.len(), 1, "{pids:?}");
    for a in &runs {
        assert_eq!(a.result()["activation"], a.id(), "{}", a.result());
    }
}

#[test]
fn sharing_annotations_are_checked_at_deploy() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let put = |kind: &str, code: &str, annotations: Value| {
        d.put_action(
            "bad",
            &json!({"exec": {"kind": kind, "code": code}, "annotations": annotations}),
        )
    };
    let node = "function main() { return {}; }";
    let cases = [
        (
            "nodejs:20",
            node,
            json!([{"key": "icebox.sharing", "value": "threads"}]),
            "'threads'",
        ),
        (
            "python:3",
            "def main(a):\n    return a\n",
            json!([{"key": "icebox.sharing", "value": "isolate"}]),
            "only Node.js",
        ),
        (
            "nodejs:20",
            node,
            json!([{"key": "icebox.isolate_pool", "value": 2}]),
            "only applies",
        ),
        (
            "nodejs:20",
            node,
            json!([{"key": "icebox.sharing", "value": "isolate"}, {"key": "icebox.isolate_memory", "value": 4}]),
            "between 16 and",
        ),
        // The v8 engine's isolates reach nothing of the host: refused at deploy, by name.
        (
            "nodejs:20",
            "const { execSync } = require('node:child_process');\nfunction main() { return {out: String(execSync('id'))}; }",
            json!([{"key": "icebox.sharing", "value": "isolate"}]),
            "'child_process'",
        ),
    ];
    for (kind, code, annotations, expected) in cases {
        let reply = put(kind, code, annotations.clone());
        assert_eq!(reply.status, 400, "{annotations}: {}", reply.body);
        assert!(
            reply.error_message().contains(expected),
            "{annotations}: {}",
            reply.body
        );
    }
    // Nothing was stored by the refusals.
    assert_eq!(d.get("/api/v1/namespaces/_/actions/bad").status, 404);
    // A zip is scanned as the code store keeps it: its own scripts, not its node_modules.
    let zip = |files: &[(&str, &str)]| {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, body) in files {
            w.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(body.as_bytes()).unwrap();
        }
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            w.finish().unwrap().into_inner(),
        )
    };
    let put_zip = |name: &str, files: &[(&str, &str)]| {
        d.put_action(
            name,
            &json!({"exec": {"kind": "nodejs:20", "code": zip(files), "binary": true},
                    "annotations": [{"key": "icebox.sharing", "value": "isolate"}]}),
        )
    };
    let refused = put_zip(
        "badzip",
        &[
            ("package.json", r#"{"main": "index.js"}"#),
            ("index.js", "exports.main = require('./lib/io').main;"),
            (
                "lib/io.js",
                "const fs = require('fs');\nexports.main = () => ({});",
            ),
        ],
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.error_message().contains("'fs' (lib/io.js)"),
        "{}",
        refused.body
    );
    let fine = put_zip(
        "goodzip",
        &[
            ("package.json", r#"{"main": "index.js"}"#),
            ("index.js", "exports.main = () => ({ok: true});"),
            (
                "node_modules/dep/index.js",
                "module.exports = require('fs');",
            ),
        ],
    );
    assert_eq!(fine.status, 200, "{}", fine.body);
    // The worker engine has Node's built-ins: the same code deploys there.
    let worker = put(
        "nodejs:20",
        "const fs = require('fs');\nfunction main() { return {}; }",
        json!([{"key": "icebox.sharing", "value": "isolate"}, {"key": "icebox.isolate_engine", "value": "worker"}]),
    );
    assert_eq!(worker.status, 200, "{}", worker.body);
}

#[test]
fn isolates_allocating_together_stay_within_the_instance_memory_limit() {
    // Found by the soak: 8 isolates with the default heap limit each grew their garbage to it
    // and together past the 256 MB limit, so the kernel killed the instance and every
    // activation in it.
    let d = Daemon::start(&["--prewarm", "none"]);
    deploy_isolate_alloc(&d, 8, 256);
    d.invoke("alloc", json!({"mb": 1})).expect_success();
    for round in 0..6 {
        for a in invoke_together(&d, "alloc", vec![json!({"mb": 8}); 8]) {
            assert!(a.succeeded(), "round {round}: {}", a.result());
        }
    }
    let instances = instances_of(&d, "alloc");
    assert!(!instances.is_empty());
    for i in &instances {
        assert!(i["memory"]["rss"].as_u64() < Some(256 * MIB), "{i}");
    }
}

#[test]
fn reclaiming_an_idle_isolate_instance_gives_back_its_isolates() {
    let d = Daemon::start(&["--prewarm", "none", "--pause-grace", "100ms"]);
    deploy_isolate_alloc(&d, 4, 1024);
    let first = d.invoke("alloc", json!({"mb": 1})).expect_success();
    let instance = first.instance().to_string();
    // Four isolates, each left holding its activation's garbage.
    for a in invoke_together(&d, "alloc", vec![json!({"mb": 24}); 4]) {
        assert_eq!(a.expect_success().instance(), instance);
    }
    wait_for("the instance frozen", Duration::from_secs(20), || {
        d.instance(&instance).filter(|i| i["state"] == "frozen")
    });
    let report = d
        .request(
            "POST",
            &format!("/icebox/v1/instances/{instance}/reclaim"),
            icebox_integration::Auth::Key(icebox_integration::AUTH),
            None,
        )
        .expect(200)
        .json();
    let (before, after) = (
        report["uss_before"].as_u64().unwrap(),
        report["uss_after"].as_u64().unwrap(),
    );
    assert!(after * 2 < before, "isolates not given back: {report}");
    // The instance serves on, with a fresh isolate.
    let next = d.invoke("alloc", json!({"mb": 1})).expect_success();
    assert_eq!(next.instance(), instance);
}

/// Issue 22's defect: a first burst of activations with no instance running started one cold
/// instance per activation (admission joined only instances already running). Both sharing
/// modes absorb a cold burst into one instance when its capacity allows.
#[test]
fn a_cold_burst_is_absorbed_by_one_sharing_instance() {
    let d = Daemon::start(&["--prewarm", "none"]);
    let py = r#"import os, time
def main(args):
    time.sleep(1.0)
    return {'pid': os.getpid()}
"#;
    deploy(
        &d,
        "pyburst",
        "python:3",
        py,
        json!({"concurrency": 8}),
        &[("icebox.sharing", json!("shared"))],
    );
    deploy(
        &d,
        "isoburst",
        "nodejs:20",
        NODE_WHICH_ISOLATE,
        json!({"concurrency": 8, "memory": 512}),
        &[("icebox.sharing", json!("isolate"))],
    );
    for name in ["pyburst", "isoburst"] {
        let runs: Vec<Activation> = invoke_together(&d, name, vec![json!({"ms": 1000}); 8])
            .into_iter()
            .map(Activation::expect_success)
            .collect();
        let ran_on: BTreeSet<&str> = runs.iter().map(|a| a.instance()).collect();
        assert_eq!(
            ran_on.len(),
            1,
            "{name}: one instance took the burst: {ran_on:?}"
        );
        let instances = instances_of(&d, name);
        assert_eq!(instances.len(), 1, "{name}: {instances:?}");
        assert_eq!(instances[0]["invocations"], 8, "{name}: {}", instances[0]);
    }
}
