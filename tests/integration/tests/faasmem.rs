//! FaaSMem against the real daemon, runtime and kernel: segment-wise offload of a Python
//! action into iceboxd's own zram pool, semi-warm, the TMO baseline, and the pool's faults
//! (full, swapoff'ed under load, a crashed daemon's device).
//!
//! These need root and the zram module (`/sys/class/zram-control`); without them each test
//! says so and passes without checking anything. The tests run one at a time: each daemon
//! has its own zram device, and the crash test looks for "its" device by name.

use icebox_integration::{wait_for, Daemon, StateDir};
use serde_json::{json, Value};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

use icebox_core::units::MIB;

/// An action whose /init builds 48 MiB it never touches again (cold) and 8 MiB every
/// request reads (hot); the result checks the hot data, so a page lost or mixed up in the
/// pool fails the request.
const ACTION: &str = r#"
def _fill(mb, seed):
    b = bytearray(mb << 20)
    for off in range(0, len(b), 4096):
        b[off:off + 16] = b"%016d" % ((off // 4096) * 7 + seed)
    return b

COLD = _fill(48, 1)
HOT = _fill(8, 2)

def main(args):
    total = 0
    for off in range(0, len(HOT), 4096):
        total += int(HOT[off:off + 16])
    return {"sum": total}
"#;

fn expected_sum() -> u64 {
    (0..(8 * MIB / 4096)).map(|page| page * 7 + 2).sum()
}

fn zram_usable() -> bool {
    let root = rustix::process::geteuid().is_root();
    let ok = root && std::path::Path::new("/sys/class/zram-control/hot_add").exists();
    if !ok {
        eprintln!("skipped: needs root and the zram module (/sys/class/zram-control)");
    }
    ok
}

/// One test's daemon (with these more flags) and the serial lock for the test's whole run;
/// None, after saying so, without root and zram.
struct Node {
    _serial: MutexGuard<'static, ()>,
    state: StateDir,
    d: Daemon,
}

fn node(extra: &[&str]) -> Option<Node> {
    node_with(|_| extra.iter().map(|s| s.to_string()).collect())
}

/// `node`, with flags that may name a path in the node's own state directory.
fn node_with(extra: impl FnOnce(&StateDir) -> Vec<String>) -> Option<Node> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !zram_usable() {
        return None;
    }
    let state = StateDir::new();
    let args = extra(&state);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = start(&state, &args);
    Some(Node {
        _serial: serial,
        state,
        d,
    })
}

/// A node with the test action deployed as `name` and invoked once: and the instance.
fn node_with_instance(extra: &[&str], name: &str) -> Option<(Node, String)> {
    let n = node(extra)?;
    deploy(&n.d, name);
    let instance = invoke_ok(&n.d, name);
    Some((n, instance))
}

fn start(state: &StateDir, extra: &[&str]) -> Daemon {
    let mut args = vec![
        "--prewarm",
        "none",
        "--pause-grace",
        "100ms",
        "--reclaim-mode",
        "vanilla",
    ];
    args.extend_from_slice(extra);
    Daemon::start_on(state, &args)
}

fn deploy(d: &Daemon, name: &str) {
    d.deploy(
        name,
        "python:3",
        ACTION,
        json!({"memory": 256, "timeout": 60000}),
    );
}

fn invoke_ok(d: &Daemon, name: &str) -> String {
    let a = d.invoke(name, json!({})).expect_success();
    assert_eq!(
        a.result()["sum"],
        json!(expected_sum()),
        "hot data came back wrong"
    );
    a.instance().to_string()
}

fn offload_of(d: &Daemon, instance: &str) -> Value {
    d.instance(instance).expect("instance listed")["offload"].clone()
}

fn pool_device(d: &Daemon) -> String {
    let memory = d.get_json("/icebox/v1/memory");
    memory["pool"]["device"]
        .as_str()
        .unwrap_or_else(|| panic!("no pool device in {memory}"))
        .to_string()
}

fn swapped_on(device: &str) -> bool {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().next() == Some(device))
}

fn device_exists(device: &str) -> bool {
    let name = device.trim_start_matches("/dev/");
    std::path::Path::new("/sys/block").join(name).exists()
}

#[test]
fn faasmem_offloads_the_runtime_and_cold_init_pages_and_keeps_the_hot_ones() {
    let Some((Node { _serial, state, d }, instance)) = node_with_instance(
        &[
            "--offload-pool",
            "zram:512MiB",
            "--offload",
            "faasmem",
            "--semiwarm",
            "off",
            "--semiwarm-start",
            "1s",
        ],
        "segments",
    ) else {
        return;
    };
    let device = pool_device(&d);
    assert!(swapped_on(&device), "{device} is not swapped on");
    // Enough requests for the init window of a stable access pattern to close.
    for _ in 0..6 {
        assert_eq!(invoke_ok(&d, "segments"), instance);
    }
    let offload = wait_for(
        "the cold init pages offloaded",
        Duration::from_secs(20),
        || {
            let o = offload_of(&d, &instance);
            (o["moved_bytes"].as_u64().unwrap_or(0) > 40 * MIB && !o["request_window"].is_null())
                .then_some(o)
        },
    );
    assert_eq!(offload["mode"], "faasmem");
    let window = offload["request_window"].as_u64().unwrap();
    assert!((1..=50).contains(&window), "request window {window}");
    // The cold 48 MiB are out; the hot 8 MiB, read by every request, stay local.
    let segments = &offload["segments"];
    assert!(
        segments["init"].as_u64().unwrap() < 24 * MIB,
        "init segment still local: {offload}"
    );
    let events = d.events_of(&instance);
    let steps: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "offloaded")
        .filter_map(|e| e["detail"].as_str().map(str::to_string))
        .collect();
    assert!(steps.iter().any(|s| s.starts_with("runtime ")), "{steps:?}");
    assert!(
        steps.iter().any(|s| s.starts_with("init_cold ")),
        "{steps:?}"
    );
    // Still correct after the offload (pages come back from the pool intact).
    for _ in 0..3 {
        invoke_ok(&d, "segments");
    }
    let inst = d.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
    let local = inst["offload"]["local_bytes"].as_u64().unwrap();
    let swapped = inst["memory"]["swap"].as_u64().unwrap();
    assert!(swapped > 30 * MIB, "swapped {swapped}: {inst}");
    assert!(
        local < inst["memory"]["uss"].as_u64().unwrap() + swapped,
        "local memory must be below USS + swapped: {inst}"
    );
    // Semi-warm is off: idle well past its start, the instance never turns semi-warm.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(offload_of(&d, &instance)["semiwarm"], json!(false));
    assert!(!d
        .events_of(&instance)
        .iter()
        .any(|e| e["detail"].as_str().unwrap_or("").starts_with("semi-warm")));
    let metrics = d.get("/metrics").body;
    assert!(
        metrics.contains("icebox_offloaded_bytes_total{step=\"init_cold\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("icebox_offload_barrier_seconds_count{barrier=\"init\"} 1"));
    let memory = d.cli(&["memory"]).success().stdout.clone();
    assert!(memory.contains("OFFLOADING INSTANCE"), "{memory}");
    assert!(memory.contains("offload pool   zram"), "{memory}");
    d.stop();
    assert!(!swapped_on(&device), "{device} still swapped on after stop");
    assert!(!state.path().join("offload-pool.json").exists());
}

#[test]
fn semiwarm_offloads_an_idle_instance_gradually_and_the_next_request_ends_it() {
    let Some((
        Node {
            _serial,
            state: _state,
            d,
        },
        instance,
    )) = node_with_instance(
        &[
            "--offload-pool",
            "zram:512MiB",
            "--offload",
            "faasmem",
            "--semiwarm",
            "20%/s",
            "--semiwarm-start",
            "1s",
        ],
        "sleepy",
    )
    else {
        return;
    };
    let before = d.instance(&instance).unwrap()["memory"]["uss"]
        .as_u64()
        .unwrap();
    let o = wait_for("semi-warm to offload", Duration::from_secs(30), || {
        let o = offload_of(&d, &instance);
        (o["semiwarm"] == json!(true) && o["moved_bytes"].as_u64().unwrap() > 20 * MIB).then_some(o)
    });
    assert!(
        o["local_bytes"].as_u64().unwrap() < before,
        "local memory did not drop: {o}"
    );
    // Offloaded while frozen: nothing thawed it.
    assert_eq!(d.instance(&instance).unwrap()["state"], "frozen");
    assert!(!d.events_of(&instance).iter().any(|e| e["kind"] == "thawed"));
    assert_eq!(invoke_ok(&d, "sleepy"), instance);
    assert_eq!(offload_of(&d, &instance)["semiwarm"], json!(false));
    d.stop();
}

#[test]
fn tmo_reclaims_a_small_fraction_through_the_kernel() {
    let Some((
        Node {
            _serial,
            state: _state,
            d,
        },
        instance,
    )) = node_with_instance(
        // 1 % rather than TMO's 0.05 %: a whole kernel reclaim batch at the first 6 s step.
        &[
            "--offload-pool",
            "zram:256MiB",
            "--offload",
            "tmo",
            "--tmo-fraction",
            "0.01",
        ],
        "slow",
    )
    else {
        return;
    };
    assert_eq!(offload_of(&d, &instance)["mode"], "tmo");
    // TMO acts every 6 s.
    wait_for("a TMO step", Duration::from_secs(30), || {
        d.get("/metrics")
            .body
            .contains("icebox_offload_step_seconds_count{step=\"tmo\"}")
            .then_some(())
    });
    invoke_ok(&d, "slow");
    d.stop();
}

#[test]
fn a_full_pool_stops_offloading_and_nothing_is_killed() {
    let Some((
        Node {
            _serial,
            state: _state,
            d,
        },
        instance,
    )) = node_with_instance(
        &[
            "--offload-pool",
            "zram:8MiB",
            "--offload",
            "faasmem",
            "--semiwarm",
            "100%/s",
            "--semiwarm-start",
            "1s",
        ],
        "crowded",
    )
    else {
        return;
    };
    for _ in 0..4 {
        assert_eq!(invoke_ok(&d, "crowded"), instance);
    }
    // The pool filled up and offloading stopped (the kernel alone would never exceed the
    // device; what matters is that icebox saw it was full and stopped asking).
    wait_for(
        "offload steps skipped for a full pool",
        Duration::from_secs(20),
        || {
            d.get("/metrics")
                .body
                .contains("icebox_offload_skipped_total{reason=\"pool_full\"}")
                .then_some(())
        },
    );
    // Same instance, correct answers: nothing was OOM-killed or evicted.
    for _ in 0..3 {
        assert_eq!(invoke_ok(&d, "crowded"), instance);
    }
    let evicted = d
        .events_of(&instance)
        .into_iter()
        .filter(|e| e["kind"] == "evicted")
        .count();
    assert_eq!(evicted, 0);
    d.stop();
}

#[test]
fn a_pool_swapped_off_under_load_degrades_health_and_instances_keep_running() {
    let Some((
        Node {
            _serial,
            state: _state,
            d,
        },
        instance,
    )) = node_with_instance(
        &["--offload-pool", "zram:256MiB", "--offload", "faasmem"],
        "orphaned",
    )
    else {
        return;
    };
    let device = pool_device(&d);
    let status = std::process::Command::new("swapoff")
        .arg(&device)
        .status()
        .expect("swapoff runs");
    assert!(status.success());
    let health = wait_for("health degraded", Duration::from_secs(10), || {
        let h = d.get_json("/icebox/v1/health");
        (h["status"] == "degraded").then_some(h)
    });
    let reason = health["reason"].as_str().unwrap();
    assert!(reason.contains("offload pool"), "{reason}");
    for _ in 0..4 {
        assert_eq!(invoke_ok(&d, "orphaned"), instance);
    }
    let memory = d.get_json("/icebox/v1/memory");
    assert!(memory["pool"]["error"].is_string(), "{memory}");
    d.stop();
    assert!(!device_exists(&device) || !swapped_on(&device));
}

#[test]
fn the_next_start_removes_the_zram_device_a_crashed_daemon_left() {
    let Some(Node { _serial, state, d }) = node(&["--offload-pool", "zram:128MiB"]) else {
        return;
    };
    let device = pool_device(&d);
    d.kill9();
    assert!(
        swapped_on(&device),
        "the crashed daemon's {device} should still be on"
    );
    let again = start(&state, &[]);
    assert!(
        !swapped_on(&device),
        "{device} still swapped on after the restart"
    );
    assert!(
        !device_exists(&device),
        "{device} still exists after the restart"
    );
    assert_eq!(again.get_json("/icebox/v1/memory")["pool"]["kind"], "none");
    again.stop();
}

#[test]
fn an_instance_evicted_while_it_is_offloaded_leaves_nothing_behind() {
    let Some(Node {
        _serial,
        state: _state,
        d,
    }) = node(&["--offload-pool", "zram:256MiB", "--offload", "faasmem"])
    else {
        return;
    };
    deploy(&d, "doomed");
    for _ in 0..3 {
        invoke_ok(&d, "doomed");
        // Deleting the action evicts its idle instance while the offload after the request
        // may still be scanning or paging it out.
        let reply = d.request(
            "DELETE",
            &icebox_integration::action_path("doomed"),
            icebox_integration::Auth::Key(icebox_integration::AUTH),
            None,
        );
        assert_eq!(reply.status, 200);
        deploy(&d, "doomed");
    }
    d.assert_healthy();
    d.stop();
}

#[test]
fn offloading_needs_a_pool() {
    let out = std::process::Command::new(icebox_integration::paths::binary("iceboxd"))
        .args(["--offload", "faasmem", "--listen", "127.0.0.1:0"])
        .output()
        .expect("iceboxd runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--offload faasmem needs an offload pool"),
        "{err}"
    );
}

fn zswap_enabled() -> Option<bool> {
    std::fs::read_to_string("/sys/module/zswap/parameters/enabled")
        .ok()
        .map(|s| s.trim() == "Y")
}

/// A node whose pool is a swap file in its own state directory (the disk tier), and the file.
fn node_with_swap_file(extra: &[&str]) -> Option<(Node, String)> {
    let mut file = String::new();
    let node = node_with(|state| {
        file = state.path().join("offload.swap").display().to_string();
        let mut args = vec![
            "--offload-pool".to_string(),
            format!("swapfile:{file}:256MiB"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    })?;
    Some((node, file))
}

#[test]
fn faasmem_offloads_into_a_swap_file_and_the_file_goes_at_stop() {
    let zswap_before = zswap_enabled();
    let Some((Node { _serial, state, d }, file)) =
        node_with_swap_file(&["--offload", "faasmem", "--semiwarm", "off"])
    else {
        return;
    };
    assert!(swapped_on(&file), "{file} is not swapped on");
    let memory = d.get_json("/icebox/v1/memory");
    assert_eq!(memory["pool"]["kind"], "swapfile", "{memory}");
    assert_eq!(memory["pool"]["device"], file.as_str(), "{memory}");
    if zswap_before == Some(false) {
        assert_eq!(zswap_enabled(), Some(true), "zswap in front of the file");
    }
    deploy(&d, "disk");
    let instance = invoke_ok(&d, "disk");
    for _ in 0..6 {
        assert_eq!(invoke_ok(&d, "disk"), instance);
    }
    wait_for("the cold pages offloaded", Duration::from_secs(20), || {
        let o = offload_of(&d, &instance);
        (o["moved_bytes"].as_u64().unwrap_or(0) > 40 * MIB).then_some(o)
    });
    // Pages come back intact from the file (or zswap in front of it).
    for _ in 0..3 {
        invoke_ok(&d, "disk");
    }
    let inst = d.get_json(&format!("/icebox/v1/instances/{instance}?fresh=true"));
    let swapped = inst["memory"]["swap"].as_u64().unwrap();
    assert!(swapped > 30 * MIB, "swapped {swapped}: {inst}");
    d.stop();
    assert!(!swapped_on(&file), "{file} still swapped on after stop");
    assert!(!std::path::Path::new(&file).exists(), "{file} left behind");
    assert_eq!(zswap_enabled(), zswap_before, "zswap as it was");
    assert!(!state.path().join("offload-pool.json").exists());
}

#[test]
fn the_next_start_removes_the_swap_file_a_crashed_daemon_left() {
    let zswap_before = zswap_enabled();
    let Some((Node { _serial, state, d }, file)) = node_with_swap_file(&[]) else {
        return;
    };
    d.kill9();
    assert!(
        swapped_on(&file),
        "the crashed daemon's {file} should still be on"
    );
    let again = start(&state, &[]);
    assert!(
        !swapped_on(&file),
        "{file} still swapped on after the restart"
    );
    assert!(!std::path::Path::new(&file).exists(), "{file} left behind");
    assert_eq!(zswap_enabled(), zswap_before, "zswap as it was");
    assert_eq!(again.get_json("/icebox/v1/memory")["pool"]["kind"], "none");
    again.stop();
}

/// Its cold data is random bytes: nothing a compressed-RAM pool can shrink.
const NOISE_ACTION: &str = r#"
import os
COLD = bytearray(os.urandom(48 << 20))

def main(args):
    return {"n": len(COLD)}
"#;

#[test]
fn pages_that_do_not_compress_stop_offloading_on_a_zram_pool() {
    let Some(Node {
        _serial,
        state: _state,
        d,
    }) = node(&[
        "--offload-pool",
        "zram:512MiB",
        "--offload",
        "faasmem",
        "--semiwarm",
        "off",
    ])
    else {
        return;
    };
    d.deploy(
        "noise",
        "python:3",
        NOISE_ACTION,
        json!({"memory": 256, "timeout": 60000}),
    );
    let instance = d
        .invoke("noise", json!({}))
        .expect_success()
        .instance()
        .to_string();
    for _ in 0..7 {
        d.invoke("noise", json!({})).expect_success();
    }
    let stopped = wait_for("offloading to stop", Duration::from_secs(20), || {
        d.events_of(&instance).into_iter().find(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|s| s.starts_with("offloading stopped"))
        })
    });
    assert_eq!(
        offload_of(&d, &instance)["incompressible"],
        json!(true),
        "{stopped}"
    );
    let steps = |d: &Daemon| {
        d.events_of(&instance)
            .iter()
            .filter(|e| e["kind"] == "offloaded")
            .count()
    };
    let before = steps(&d);
    for _ in 0..4 {
        d.invoke("noise", json!({})).expect_success();
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(steps(&d), before, "no step after offloading stopped");
    assert!(d.get("/metrics").body.contains("reason=\"incompressible\""));
    d.stop();
}

#[path = "faasmem/swap_file_faults.rs"]
mod swap_file_faults;
