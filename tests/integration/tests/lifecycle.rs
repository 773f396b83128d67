//! The life of an instance against the real daemon: cold start, warm reuse, frozen after the
//! pause grace, thawed by the next invocation, evicted when its keep-alive expires or when
//! another instance needs its place in the memory budget.

use icebox_core::units::MIB;
use icebox_integration::{leaks, paths, wait_for, Daemon};
use serde_json::{json, Value};
use std::time::Duration;

fn hello_py() -> String {
    std::fs::read_to_string(paths::workspace_root().join("examples/python/hello.py"))
        .expect("examples/python/hello.py")
}

fn state_of(daemon: &Daemon, instance: &str) -> Option<String> {
    daemon
        .instance(instance)
        .map(|i| i["state"].as_str().unwrap_or("").to_string())
}

/// The first event of `kind` for `instance`, if any.
fn event(daemon: &Daemon, instance: &str, kind: &str) -> Option<Value> {
    daemon
        .events_of(instance)
        .into_iter()
        .find(|e| e["kind"] == kind)
}

#[test]
fn cold_warm_frozen_thawed_then_evicted_by_keep_alive() {
    let d = Daemon::start(&["--keep-alive", "3s", "--pause-grace", "100ms"]);
    d.deploy("hello", "python:3", &hello_py(), json!({"memory": 128}));

    let cold = d.invoke("hello", json!({"name": "Ada"})).expect_success();
    assert_eq!(cold.result()["greeting"], "Hello, Ada!");
    assert_eq!(cold.start_kind(), "cold");
    assert!(
        cold.annotation("initTime").is_some(),
        "a cold start reports initTime: {:#}",
        cold.record
    );
    let instance = cold.instance().to_string();
    assert!(!instance.is_empty());
    assert!(
        leaks::instance_cgroup_exists(d.state().tag(), &instance),
        "instance {instance} has no cgroup"
    );

    let warm = d.invoke("hello", json!({"name": "Bob"})).expect_success();
    assert_eq!(warm.start_kind(), "warm");
    assert_eq!(
        warm.instance(),
        instance,
        "a warm start reuses the instance"
    );
    assert!(
        warm.annotation("initTime").is_none(),
        "no initTime on a warm start: {:#}",
        warm.record
    );

    // The frozen event comes once the kernel has frozen the processes.
    wait_for(
        "the idle instance to be frozen",
        Duration::from_secs(20),
        || event(&d, &instance, "frozen"),
    );
    assert_eq!(state_of(&d, &instance).as_deref(), Some("frozen"));
    if let Some(frozen) = leaks::instance_frozen_in_kernel(d.state().tag(), &instance) {
        assert!(frozen, "the API says frozen, the kernel's freezer does not");
    }

    let thawed = d.invoke("hello", json!({"name": "Cy"})).expect_success();
    assert_eq!(thawed.result()["greeting"], "Hello, Cy!");
    assert_eq!(thawed.start_kind(), "warm");
    assert_eq!(thawed.instance(), instance);
    let seqs = |kind: &str| -> Vec<u64> {
        d.events_of(&instance)
            .iter()
            .filter(|e| e["kind"] == kind)
            .filter_map(|e| e["seq"].as_u64())
            .collect()
    };
    let (frozen, thaws) = (seqs("frozen"), seqs("thawed"));
    assert!(
        thaws.iter().any(|t| frozen.iter().any(|f| f < t)),
        "the invocation of a frozen instance thawed it (frozen at {frozen:?}, thawed at {thaws:?})"
    );

    let evicted = wait_for("the keep-alive to expire", Duration::from_secs(30), || {
        event(&d, &instance, "evicted")
    });
    assert_eq!(evicted["detail"], "keep_alive_expired", "{evicted}");
    assert!(
        d.instance(&instance).is_none(),
        "an evicted instance is not listed"
    );
    assert!(
        !leaks::instance_cgroup_exists(d.state().tag(), &instance),
        "an evicted instance's cgroup is removed"
    );

    let again = d.invoke("hello", json!({})).expect_success();
    assert_eq!(again.start_kind(), "cold");
    assert_ne!(again.instance(), instance);
    d.stop();
}

/// The budget is charged by declared limits here (`--pool-charge limit`): measured USS varies
/// from run to run, limits do not, so "one fits, two do not" holds exactly.
#[test]
fn memory_budget_evicts_the_least_recently_used_instance() {
    let d = Daemon::start(&["--pool-charge", "limit", "--pool-memory", "200MiB"]);
    d.deploy("first", "python:3", &hello_py(), json!({"memory": 128}));
    d.deploy("second", "python:3", &hello_py(), json!({"memory": 128}));

    let first = d
        .invoke("first", json!({}))
        .expect_success()
        .instance()
        .to_string();
    wait_for(
        "the first instance to join the keep-alive pool",
        Duration::from_secs(20),
        || matches!(state_of(&d, &first).as_deref(), Some("idle" | "frozen")).then_some(()),
    );
    let memory = d.get_json("/icebox/v1/memory");
    assert_eq!(memory["charge_mode"], "limit");
    assert_eq!(memory["charged"], 128 * MIB, "{memory}");

    let second = d
        .invoke("second", json!({}))
        .expect_success()
        .instance()
        .to_string();
    let evicted = wait_for(
        "the budget to push out the first instance",
        Duration::from_secs(20),
        || event(&d, &first, "evicted"),
    );
    assert_eq!(evicted["detail"], "memory_budget", "{evicted}");
    assert!(
        event(&d, &second, "evicted").is_none(),
        "the most recently used instance stays"
    );
    assert!(d.instance(&first).is_none());
    assert!(d.instance(&second).is_some());
    assert!(!leaks::instance_cgroup_exists(d.state().tag(), &first));
    wait_for(
        "the charge to drop to one instance",
        Duration::from_secs(20),
        || (d.get_json("/icebox/v1/memory")["charged"] == 128 * MIB).then_some(()),
    );

    let warm = d.invoke("second", json!({})).expect_success();
    assert_eq!(
        (warm.start_kind(), warm.instance()),
        ("warm", second.as_str())
    );
    d.stop();
}
