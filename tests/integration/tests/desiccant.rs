//! Desiccant against the real daemon and runtimes: reclaiming frozen garbage from idle
//! instances by hand and by the policy, a reclaim racing an invocation, and eager mode.

use icebox_core::units::MIB;
use icebox_integration::{paths, wait_for, Auth, Daemon, AUTH};
use serde_json::{json, Value};
use std::time::Duration;

fn example(path: &str) -> String {
    let file = paths::workspace_root().join(path);
    file.to_str().expect("utf-8 path").to_string()
}

/// Deploy the allocating example of a language through the CLI (Java needs its jar).
fn deploy_alloc(d: &Daemon, language: &str, name: &str, annotations: &[(&str, &str)]) {
    let mut args: Vec<String> = vec!["action".into(), "update".into(), name.into()];
    match language {
        "python" => args.push(example("examples/python/alloc.py")),
        "nodejs" => args.push(example("examples/nodejs/alloc.js")),
        "java" => {
            paths::java_proxy_jar();
            args.push(
                paths::java_examples_jar()
                    .to_str()
                    .expect("utf-8")
                    .to_string(),
            );
            args.extend(["--main".into(), "Alloc".into()]);
        }
        other => panic!("no alloc example for {other}"),
    }
    args.extend(["--memory".into(), "512".into()]);
    for (k, v) in annotations {
        args.extend(["-a".into(), (*k).into(), (*v).into()]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = d.cli(&argv);
    out.success();
}

fn wait_frozen(d: &Daemon, instance: &str) {
    wait_for(
        &format!("{instance} frozen"),
        Duration::from_secs(20),
        || {
            d.instance(instance)
                .filter(|i| i["state"] == "frozen")
                .map(|_| ())
        },
    );
}

fn reclaim(d: &Daemon, instance: &str) -> (u16, Value) {
    let reply = d.request(
        "POST",
        &format!("/icebox/v1/instances/{instance}/reclaim"),
        Auth::Key(AUTH),
        None,
    );
    let status = reply.status;
    let body = if status == 200 {
        reply.json()
    } else {
        json!({"error": reply.error_message()})
    };
    (status, body)
}

/// Allocate garbage twice so the instance holds frozen garbage, and wait for the freeze.
fn instance_with_garbage(d: &Daemon, name: &str, mb: u64) -> String {
    let first = d.invoke(name, json!({"mb": mb})).expect_success();
    let again = d.invoke(name, json!({"mb": mb})).expect_success();
    assert_eq!(first.instance(), again.instance());
    let instance = first.instance().to_string();
    wait_frozen(d, &instance);
    instance
}

#[test]
fn manual_reclaim_frees_most_frozen_garbage_on_every_runtime() {
    let d = Daemon::start(&["--pause-grace", "100ms", "--prewarm", "none"]);
    for language in ["python", "nodejs", "java"] {
        let name = format!("alloc-{language}");
        deploy_alloc(&d, language, &name, &[]);
        let instance = instance_with_garbage(&d, &name, 64);

        let (status, report) = reclaim(&d, &instance);
        assert_eq!(status, 200, "{language}: {report}");
        let before = report["uss_before"].as_u64().unwrap();
        let freed = report["freed"].as_u64().unwrap();
        // Measured here: Python 88%, Node.js 96%, Java 80% of USS freed after 64 MB of garbage.
        assert!(
            freed * 2 >= before,
            "{language}: a reclaim should free at least half of an instance full of garbage: {report:#}"
        );
        assert_ne!(
            report["variant"], "none",
            "{language}: the runtime has the reclaim extension"
        );

        // Frozen again, and the next invocation is warm on the same instance and correct.
        assert_eq!(
            d.instance(&instance).unwrap()["state"],
            "frozen",
            "{language}: refrozen after the reclaim"
        );
        let after = d.invoke(&name, json!({"mb": 4})).expect_success();
        assert_eq!(after.start_kind(), "warm");
        assert_eq!(after.instance(), instance);

        // The reclaim is visible as an event and in the metrics.
        assert!(
            d.events_of(&instance)
                .iter()
                .any(|e| e["kind"] == "reclaimed"),
            "{language}: no reclaimed event"
        );
    }
    let metrics = d.request("GET", "/metrics", Auth::None, None).body;
    assert!(
        metrics.contains("icebox_reclaims_total{outcome=\"ok\"} 3"),
        "{metrics}"
    );
    d.stop();
}

#[test]
fn the_policy_reclaims_when_the_pool_fills_up() {
    // Threshold 30% of a 256 MiB pool: one Python instance holding ~100 MB of garbage is
    // over it (but well inside the budget, so nothing is evicted).
    let d = Daemon::start(&[
        "--pause-grace",
        "100ms",
        "--prewarm",
        "none",
        "--pool-memory",
        "256MiB",
        "--reclaim-frozen-after",
        "500ms",
        "--reclaim-threshold-min",
        "0.2",
        "--reclaim-threshold-max",
        "0.3",
    ]);
    deploy_alloc(&d, "python", "alloc", &[]);
    let instance = instance_with_garbage(&d, "alloc", 96);
    let event = wait_for(
        "a reclaim started by the policy",
        Duration::from_secs(30),
        || {
            d.events_of(&instance)
                .into_iter()
                .find(|e| e["kind"] == "reclaimed")
        },
    );
    let uss_after = event["memory"]["uss"].as_u64().unwrap();
    assert!(
        uss_after < 64 * MIB,
        "the reclaim freed the garbage: {event}"
    );
    // Nothing was evicted: reclaiming made room instead.
    assert!(
        d.events().iter().all(|e| e["kind"] != "evicted"),
        "no eviction expected"
    );
    d.stop();
}

#[test]
fn vanilla_instances_are_never_reclaimed_by_the_policy() {
    let d = Daemon::start(&[
        "--pause-grace",
        "100ms",
        "--prewarm",
        "none",
        "--pool-memory",
        "256MiB",
        "--reclaim-mode",
        "vanilla",
        "--reclaim-frozen-after",
        "200ms",
        "--reclaim-threshold-min",
        "0.2",
        "--reclaim-threshold-max",
        "0.3",
    ]);
    deploy_alloc(&d, "python", "alloc", &[]);
    let instance = instance_with_garbage(&d, "alloc", 96);
    // Long enough for several policy rounds after the candidate time.
    std::thread::sleep(Duration::from_secs(3));
    assert!(d
        .events_of(&instance)
        .iter()
        .all(|e| e["kind"] != "reclaimed"));
    assert_eq!(d.instance(&instance).unwrap()["reclaim_mode"], "vanilla");
    d.stop();
}

#[test]
fn an_invocation_racing_a_reclaim_is_served_correctly() {
    let d = Daemon::start(&["--pause-grace", "50ms", "--prewarm", "none"]);
    deploy_alloc(&d, "nodejs", "alloc", &[]);
    let instance = instance_with_garbage(&d, "alloc", 64);
    for round in 0..5 {
        std::thread::scope(|s| {
            let reclaimer = s.spawn(|| reclaim(&d, &instance));
            let activation = d.invoke("alloc", json!({"mb": 2}));
            let (status, body) = reclaimer.join().unwrap();
            // The reclaim either ran (200) or found the instance busy with the invocation (409).
            assert!(
                status == 200 || status == 409,
                "round {round}: {status} {body}"
            );
            let activation = activation.expect_success();
            assert_eq!(
                activation.instance(),
                instance,
                "round {round}: served by the same warm instance"
            );
        });
        wait_frozen(&d, &instance);
    }
    d.assert_healthy();
    d.stop();
}

#[test]
fn reclaim_of_an_unknown_or_busy_instance_is_refused() {
    let d = Daemon::start(&["--prewarm", "none"]);
    assert_eq!(reclaim(&d, "no-such-instance").0, 404);
    d.deploy(
        "slow",
        "python:3",
        "import time\ndef main(args):\n    time.sleep(2)\n    return {'ok': True}\n",
        json!({"memory": 128}),
    );
    std::thread::scope(|s| {
        let run = s.spawn(|| d.invoke("slow", json!({})));
        let instance = wait_for("the slow instance", Duration::from_secs(10), || {
            d.instances()
                .into_iter()
                .find(|i| i["action"] == "guest/slow" && i["state"] == "running")
        });
        let (status, body) = reclaim(&d, instance["id"].as_str().unwrap());
        assert_eq!(status, 409, "{body}");
        run.join().unwrap().expect_success();
    });
    d.stop();
}

#[test]
fn eager_mode_collects_garbage_after_every_invocation() {
    let d = Daemon::start(&[
        "--pause-grace",
        "100ms",
        "--prewarm",
        "none",
        "--reclaim-mode",
        "vanilla",
    ]);
    // Same code, one action per mode (the action annotation overrides the node's mode).
    deploy_alloc(&d, "python", "vanilla", &[]);
    deploy_alloc(&d, "python", "eager", &[("icebox.reclaim", "\"eager\"")]);
    let uss = |name: &str| {
        let instance = instance_with_garbage(&d, name, 64);
        let view = d.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
        (
            view["reclaim_mode"].as_str().unwrap().to_string(),
            view["memory"]["uss"].as_u64().unwrap(),
        )
    };
    let (vanilla_mode, vanilla) = uss("vanilla");
    let (eager_mode, eager) = uss("eager");
    assert_eq!(
        (vanilla_mode.as_str(), eager_mode.as_str()),
        ("vanilla", "eager")
    );
    // The example leaves its 64 MB as reference cycles: only a collection frees them.
    assert!(
        eager * 2 < vanilla,
        "eager {eager} should hold far less than vanilla {vanilla}"
    );
    d.stop();
}

#[test]
fn a_runtime_without_the_reclaim_extension_is_reclaimed_by_page_out_only() {
    let fixture = paths::workspace_root().join("tests/integration/fixtures/runtimes");
    let d = Daemon::start_with_runtimes(&fixture, &["--pause-grace", "100ms", "--prewarm", "none"]);
    d.deploy(
        "old",
        "python:legacy",
        "def main(args):\n    return {'hello': args.get('name')}\n",
        json!({"memory": 128}),
    );
    let first = d.invoke("old", json!({"name": "a"})).expect_success();
    assert_eq!(first.result(), &json!({"hello": "a"}));
    let instance = first.instance().to_string();
    wait_frozen(&d, &instance);

    let (status, report) = reclaim(&d, &instance);
    assert_eq!(
        status, 200,
        "a proxy without /icebox/reclaim is skipped, not an error: {report}"
    );
    assert_eq!(
        report["variant"], "none",
        "no runtime reclaim ran: {report}"
    );
    assert!(report["live_bytes"].is_null(), "{report}");
    assert_eq!(
        d.instance(&instance).unwrap()["state"],
        "frozen",
        "refrozen after the page-out"
    );

    let again = d.invoke("old", json!({"name": "b"})).expect_success();
    assert_eq!(
        (again.instance(), again.result()),
        (instance.as_str(), &json!({"hello": "b"}))
    );
    d.assert_healthy();
    d.stop();
}

#[test]
fn node_keeps_its_heap_inside_the_memory_limit() {
    // Node sizes its heap from the cgroup limit it starts in (259 MiB in a 256 MiB cgroup), so
    // garbage piled up between collections used to get it OOM-killed; iceboxd starts it with
    // --max-old-space-size below the limit. Both a fresh start and a stem cell.
    for prewarm in ["none", "nodejs:20=1"] {
        let d = Daemon::start(&[
            "--pause-grace",
            "100ms",
            "--prewarm",
            prewarm,
            "--reclaim-mode",
            "vanilla",
        ]);
        let out = d.cli(&[
            "action",
            "update",
            "alloc",
            &example("examples/nodejs/alloc.js"),
            "--memory",
            "256",
        ]);
        out.success();
        if prewarm != "none" {
            wait_for(
                "a prewarmed Node.js runtime",
                Duration::from_secs(20),
                || {
                    d.instances()
                        .into_iter()
                        .find(|i| i["state"] == "prewarmed")
                },
            );
        }
        let first = d.invoke("alloc", json!({"mb": 90})).expect_success();
        // A stem cell's id carries over: its own runtime_ready comes first, the action's last.
        let origin = d
            .events_of(first.instance())
            .into_iter()
            .rev()
            .find(|e| e["kind"] == "runtime_ready")
            .unwrap()["detail"]
            .clone();
        assert_eq!(
            origin == "prewarmed",
            prewarm != "none",
            "prewarm {prewarm}: the stem cell serves 256 MB actions"
        );
        for round in 0..8 {
            let next = d.invoke("alloc", json!({"mb": 90})).expect_success();
            assert_eq!(
                next.instance(),
                first.instance(),
                "prewarm {prewarm}, round {round}: the instance survived"
            );
        }
        assert!(
            d.events().iter().all(|e| e["kind"] != "evicted"),
            "prewarm {prewarm}: nothing was OOM-killed"
        );
        if prewarm != "none" {
            // A stem cell's heap is sized for its own limit: an action of another size starts afresh.
            d.cli(&[
                "action",
                "update",
                "big",
                &example("examples/nodejs/alloc.js"),
                "--memory",
                "512",
            ])
            .success();
            let big = d.invoke("big", json!({"mb": 1})).expect_success();
            let origin = d
                .events_of(big.instance())
                .into_iter()
                .find(|e| e["kind"] == "runtime_ready")
                .unwrap()["detail"]
                .clone();
            assert!(
                origin.is_null(),
                "a 512 MB action does not take a 256 MB stem cell: {origin}"
            );
        }
        d.stop();
    }
}

#[test]
fn a_reclaim_whose_runtime_hangs_or_dies_or_that_is_evicted_meanwhile_leaves_no_instance_behind() {
    let fixture = paths::workspace_root().join("tests/integration/fixtures/runtimes");
    let d = Daemon::start_with_runtimes(&fixture, &["--pause-grace", "100ms", "--prewarm", "none"]);
    let main = "def main(args):\n    return {'ok': True}\n";
    d.deploy("bystander", "python:legacy", main, json!({"memory": 128}));
    d.deploy(
        "hangs",
        "python:legacy",
        &format!("import time\n{main}def reclaim():\n    time.sleep(3600)\n"),
        json!({"memory": 128}),
    );
    d.deploy(
        "dies",
        "python:legacy",
        &format!("import os\n{main}def reclaim():\n    os._exit(3)\n"),
        json!({"memory": 128}),
    );
    let bystander = d
        .invoke("bystander", json!({}))
        .expect_success()
        .instance()
        .to_string();
    for name in ["hangs", "dies"] {
        let instance = d
            .invoke(name, json!({}))
            .expect_success()
            .instance()
            .to_string();
        wait_frozen(&d, &instance);
        let (status, body) = reclaim(&d, &instance);
        assert!(
            status >= 500,
            "{name}: the reclaim failed visibly: {status} {body}"
        );
        // Evicted, not left thawed in the pool; its processes and cgroups are gone.
        wait_for(&format!("{name} evicted"), Duration::from_secs(20), || {
            d.events_of(&instance)
                .into_iter()
                .find(|e| e["kind"] == "evicted")
        });
        assert!(d.instance(&instance).is_none(), "{name}: no longer listed");
        // The next invocation starts a new instance and is served.
        let next = d.invoke(name, json!({})).expect_success();
        assert_ne!(next.instance(), instance, "{name}: a fresh instance");
    }
    // Evicted meanwhile: the action is deleted while its instance's reclaim hangs. The reclaim
    // ends with an error as soon as the runtime is gone (not at its 10 s timeout's leisure:
    // nothing here depends on that), and the instance is evicted exactly once.
    d.deploy(
        "retired",
        "python:legacy",
        &format!("import time\n{main}def reclaim():\n    time.sleep(3600)\n"),
        json!({"memory": 128}),
    );
    let instance = d
        .invoke("retired", json!({}))
        .expect_success()
        .instance()
        .to_string();
    wait_frozen(&d, &instance);
    std::thread::scope(|s| {
        let reclaimer = s.spawn(|| reclaim(&d, &instance));
        // The pool still lists it as frozen; the kernel's freezer shows the reclaim's thaw.
        wait_for(
            "the reclaim to thaw the instance",
            Duration::from_secs(10),
            || {
                match icebox_integration::leaks::instance_frozen_in_kernel(
                    d.state().tag(),
                    &instance,
                ) {
                    Some(false) => Some(()),
                    Some(true) => None,
                    None => panic!("instance {instance} has no freezer cgroup"), // Daemon::start requires crun
                }
            },
        );
        d.request(
            "DELETE",
            &icebox_integration::action_path("retired"),
            Auth::Key(AUTH),
            None,
        )
        .expect(200);
        let (status, body) = reclaimer.join().unwrap();
        assert!(
            status >= 500 || status == 404,
            "the reclaim of an evicted instance failed visibly: {status} {body}"
        );
    });
    assert!(d.instance(&instance).is_none(), "evicted");
    let evictions = d
        .events_of(&instance)
        .into_iter()
        .filter(|e| e["kind"] == "evicted")
        .count();
    assert_eq!(evictions, 1, "evicted once");

    // The neighbour was never touched.
    assert!(
        d.instance(&bystander).is_some(),
        "the bystander instance lives on"
    );
    assert_eq!(
        d.invoke("bystander", json!({})).expect_success().instance(),
        bystander
    );
    d.assert_healthy();
    d.stop();
}
