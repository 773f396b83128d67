//! The `vm-shared` backend (Squeezy's N:1 VMs, docs/vm.md) through the real daemon: instances
//! of one action share a QEMU VM, each in its own partition, plugged when it starts and
//! unplugged when it is evicted, with events and metrics that say so; a host memory budget
//! makes a start evict idle instances and wait for their memory; nothing outlives a daemon
//! killed with SIGKILL.

use icebox_core::units::MIB;
use icebox_integration::{wait_for, Daemon, StateDir};
use serde_json::{json, Value};
use std::time::Duration;

/// Sleeps for `s` seconds, so that two invocations at once need two instances.
const SLEEPER: &str = "import time\n\ndef main(args):\n    time.sleep(float(args.get('s', 0)))\n    return {'slept': args.get('s', 0)}\n";

const SHARED: &[&str] = &[
    "--prewarm",
    "none",
    "--vm-backends",
    "on",
    "--vm-accel",
    "tcg",
    "--vm-partitions",
    "2",
];

fn deploy_shared(d: &Daemon, name: &str, code: &str) {
    d.put_action(
        name,
        &json!({"exec": {"kind": "python:3", "code": code},
                "limits": {"memory": 128},
                "annotations": [{"key": "icebox.isolation", "value": "vm-shared"}]}),
    )
    .expect(200);
}

fn instances_of(d: &Daemon, name: &str) -> Vec<Value> {
    d.instances()
        .into_iter()
        .filter(|i| i["action"] == format!("guest/{name}"))
        .collect()
}

fn event_of(d: &Daemon, instance: &str, kind: &str) -> Option<Value> {
    d.events_of(instance)
        .into_iter()
        .find(|e| e["kind"] == kind)
}

fn detail(event: &Value) -> Value {
    serde_json::from_str(event["detail"].as_str().unwrap()).unwrap()
}

fn evict(d: &Daemon, instance: &str) {
    d.request(
        "DELETE",
        &format!("/icebox/v1/instances/{instance}"),
        icebox_integration::Auth::Key(icebox_integration::AUTH),
        None,
    )
    .expect(200);
}

#[test]
fn instances_of_an_action_share_one_vm_and_an_evicted_ones_partition_goes_back() {
    let d = Daemon::start(SHARED);
    let health = d.get_json("/icebox/v1/health");
    let shared = health["isolations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["isolation"] == "vm-shared")
        .cloned()
        .unwrap();
    assert_eq!(shared["backend"], "vm-shared", "{health}");
    deploy_shared(&d, "nq", SLEEPER);
    // The first start boots the VM; the second invocation runs while the first sleeps.
    d.invoke("nq", json!({})).expect_success();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| d.invoke("nq", json!({"s": 3})));
        std::thread::sleep(Duration::from_millis(300));
        let b = s.spawn(|| d.invoke("nq", json!({"s": 0})));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (a, b) = (a.expect_success(), b.expect_success());
    assert_ne!(a.instance(), b.instance(), "two at once need two instances");
    let views = instances_of(&d, "nq");
    assert_eq!(views.len(), 2, "{views:?}");
    for v in &views {
        assert_eq!(v["isolation"], "vm-shared", "{v}");
    }
    assert_eq!(
        views[0]["pids"], views[1]["pids"],
        "one QEMU for both: {views:?}"
    );
    let plugs: Vec<Value> = views
        .iter()
        .map(|v| detail(&event_of(&d, v["id"].as_str().unwrap(), "partition_plugged").unwrap()))
        .collect();
    assert_ne!(plugs[0]["partition"], plugs[1]["partition"], "{plugs:?}");
    assert_eq!(plugs[0]["bytes"], 128 * MIB);

    let gone = views[1]["id"].as_str().unwrap().to_string();
    evict(&d, &gone);
    let reclaimed = wait_for("the partition's unplug", Duration::from_secs(60), || {
        event_of(&d, &gone, "partition_reclaimed")
    });
    let report = detail(&reclaimed);
    assert_eq!(report["outcome"], "released", "{report}");
    assert_eq!(
        report["pages_migrated"], 0,
        "Squeezy migrates nothing: {report}"
    );
    assert_eq!(report["mode"], "squeezy");
    assert_eq!(report["neighbours"], 1);
    let metrics = d.get("/metrics").expect(200).body;
    assert!(
        metrics.contains(r#"icebox_partition_reclaims_total{mode="squeezy",outcome="released"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("icebox_partition_plugged_bytes 134217728"),
        "{metrics}"
    );
    // The other instance serves on.
    let again = d.invoke("nq", json!({})).expect_success();
    assert_eq!(again.start_kind(), "warm");
}

#[test]
fn a_start_past_the_memory_budget_evicts_an_idle_instance_and_waits_for_its_memory() {
    let mut args = SHARED.to_vec();
    args.extend(["--vm-memory", "128MiB"]);
    let d = Daemon::start(&args);
    deploy_shared(&d, "first", SLEEPER);
    deploy_shared(&d, "second", SLEEPER);
    let first = d.invoke("first", json!({})).expect_success();
    // Another action's VM: its partition fits only once the first's is unplugged.
    let second = d.invoke("second", json!({})).expect_success();
    assert_eq!(second.start_kind(), "cold");
    let evicted = event_of(&d, first.instance(), "evicted").expect("the idle instance made room");
    assert!(
        evicted["detail"].as_str().unwrap_or("").contains("memory"),
        "{evicted}"
    );
    let reclaimed = event_of(&d, first.instance(), "partition_reclaimed")
        .expect("its partition was unplugged before the new one was plugged");
    let plugged = event_of(&d, second.instance(), "partition_plugged").unwrap();
    assert!(reclaimed["seq"].as_u64() < plugged["seq"].as_u64());
    assert!(detail(&plugged)["waited_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_shared_vms_of_a_daemon_killed_with_sigkill_are_removed_at_its_next_start() {
    let state = StateDir::new();
    let first = Daemon::start_on(&state, SHARED);
    deploy_shared(&first, "nq", SLEEPER);
    first.invoke("nq", json!({})).expect_success();
    let qemu = instances_of(&first, "nq")[0]["pids"][0].as_u64().unwrap();
    first.kill9();
    assert!(std::path::Path::new(&format!("/proc/{qemu}")).exists());
    let second = Daemon::start_on(&state, SHARED);
    wait_for(
        "the orphaned VM to be gone",
        Duration::from_secs(30),
        || (!std::path::Path::new(&format!("/proc/{qemu}")).exists()).then_some(()),
    );
    let left: Vec<_> = std::fs::read_dir(state.path().join("vm-shared"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    second.invoke("nq", json!({})).expect_success();
}
