//! The `vm` backend (docs/vm.md) through the real daemon: an action asking for VM isolation
//! runs in its own QEMU VM with the real guest image, its runtime's death or QEMU's ends the
//! instance, and nothing of a VM outlives the daemon, even one killed with SIGKILL.

use icebox_integration::{paths, wait_for, Daemon, StateDir};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};
use std::time::Duration;

fn hello() -> String {
    std::fs::read_to_string(paths::workspace_root().join("examples/python/hello.py")).unwrap()
}

fn deploy_vm(d: &Daemon, name: &str) {
    d.put_action(
        name,
        &json!({"exec": {"kind": "python:3", "code": hello()},
                "annotations": [{"key": "icebox.isolation", "value": "vm"}]}),
    )
    .expect(200);
}

fn instance_of(d: &Daemon, name: &str) -> Option<Value> {
    d.instances()
        .into_iter()
        .find(|i| i["action"] == format!("guest/{name}"))
}

/// TCG here: no probe VM at every start (auto skips it without hardware KVM anyway).
const VM: &[&str] = &[
    "--prewarm",
    "none",
    "--vm-backends",
    "on",
    "--vm-accel",
    "tcg",
];

#[test]
fn an_action_asking_for_vm_isolation_runs_in_its_own_vm() {
    let d = Daemon::start(VM);
    let health = d.get_json("/icebox/v1/health");
    let vm = health["isolations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["isolation"] == "vm")
        .cloned()
        .unwrap();
    assert_eq!(vm["backend"], "vm", "{health}");
    deploy_vm(&d, "hv");
    let a = d.invoke("hv", json!({"name": "guest"})).expect_success();
    assert_eq!(a.result()["greeting"], "Hello, guest!");
    assert_eq!(a.start_kind(), "cold");
    let warm = d.invoke("hv", json!({"name": "again"})).expect_success();
    assert_eq!(warm.start_kind(), "warm");
    assert_eq!(warm.instance(), a.instance());
    let view = instance_of(&d, "hv").unwrap();
    assert_eq!(view["isolation"], "vm", "{view}");
    let pids = view["pids"].as_array().unwrap();
    assert_eq!(pids.len(), 1, "one QEMU process: {view}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pids[0])).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("qemu-system"),
        "the instance's process is QEMU"
    );
    assert!(view["memory"]["uss"].as_u64().unwrap() > 0);
}

#[test]
fn a_killed_qemu_ends_its_instance_and_the_next_invocation_starts_a_new_vm() {
    let d = Daemon::start(VM);
    deploy_vm(&d, "hv");
    let first = d.invoke("hv", json!({})).expect_success();
    let view = instance_of(&d, "hv").unwrap();
    let qemu = i32::try_from(view["pids"][0].as_u64().unwrap()).unwrap();
    // A QEMU this test's daemon started (its pid from the daemon's own view).
    let qemu = Pid::from_raw(qemu).expect("QEMU's pid");
    kill_process(qemu, Signal::KILL).expect("SIGKILL to QEMU");
    wait_for(
        "the instance to be evicted",
        Duration::from_secs(30),
        || {
            d.events_of(first.instance())
                .into_iter()
                .find(|e| e["kind"] == "evicted")
        },
    );
    let dir = d.state().path().join("vm-instances").join(first.instance());
    wait_for("its directory to go", Duration::from_secs(10), || {
        (!dir.exists()).then_some(())
    });
    let second = d.invoke("hv", json!({})).expect_success();
    assert_ne!(second.instance(), first.instance());
    assert_eq!(second.start_kind(), "cold");
}

#[test]
fn the_vms_of_a_daemon_killed_with_sigkill_are_removed_at_its_next_start() {
    let state = StateDir::new();
    let first = Daemon::start_on(&state, VM);
    deploy_vm(&first, "hv");
    first.invoke("hv", json!({})).expect_success();
    let qemu = instance_of(&first, "hv").unwrap()["pids"][0]
        .as_u64()
        .unwrap();
    first.kill9();
    assert!(
        std::path::Path::new(&format!("/proc/{qemu}")).exists(),
        "the VM outlives a SIGKILLed daemon until the next start"
    );
    let second = Daemon::start_on(&state, VM);
    wait_for(
        "the orphaned VM to be gone",
        Duration::from_secs(30),
        || (!std::path::Path::new(&format!("/proc/{qemu}")).exists()).then_some(()),
    );
    let left: Vec<_> = std::fs::read_dir(state.path().join("vm-instances"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    second.invoke("hv", json!({})).expect_success();
}

#[test]
fn vm_isolation_is_refused_at_deployment_when_the_node_has_none() {
    let d = Daemon::start(&["--prewarm", "none", "--vm-backends", "off"]);
    let reply = d.put_action(
        "hv",
        &json!({"exec": {"kind": "python:3", "code": hello()},
                "annotations": [{"key": "icebox.isolation", "value": "vm"}]}),
    );
    assert_eq!(reply.status, 400);
    assert!(
        reply
            .error_message()
            .contains("isolation 'vm' is not available"),
        "{}",
        reply.error_message()
    );
    let bad = d.put_action(
        "hv",
        &json!({"exec": {"kind": "python:3", "code": hello()},
                "annotations": [{"key": "icebox.isolation", "value": "kvm"}]}),
    );
    assert_eq!(bad.status, 400);
    assert!(bad.error_message().contains("unknown isolation 'kvm'"));
}
