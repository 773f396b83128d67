//! The `vm` backend end to end: real QEMU, the real guest image, real runtimes.

mod common;

use common::*;
use icebox_core::units::MIB;
use icebox_sandbox_api::{ExitCause, SandboxBackend, SENTINEL};
use rustix::process::{kill_process, Pid, Signal};
use std::time::Duration;

const PY_HELLO: &str = "def main(args):\n    print('hello from the guest')\n    return {'greeting': 'hi ' + args.get('name', '?')}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_runs_through_the_host_socket_and_its_output_reaches_the_log_collector() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    assert_eq!(backend.name(), "vm");
    let sandbox = backend.start(spec("py1", "python:3", 256)).await.unwrap();
    init(&sandbox, PY_HELLO).await;
    let marks = sandbox.logs().marks();
    let (status, body) = run(&sandbox, serde_json::json!({"name": "vm"})).await;
    assert_eq!(status, 200);
    assert_eq!(body["greeting"], "hi vm");
    let lines = sandbox
        .logs()
        .take_after(marks, Duration::from_secs(30))
        .await;
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("stdout: hello from the guest")),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains(SENTINEL)));
    assert_eq!(sandbox.logs().marks(), [marks[0] + 1, marks[1] + 1]);

    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    let mem = sandbox.memory();
    assert!(mem.rss > 0 && mem.uss <= mem.rss, "{mem:?}");
    let (guest, mine) = vm.guest_stats().await.unwrap();
    let mine = mine.expect("the instance's stats");
    assert!(mine.memory_current > 0 && !mine.pids.is_empty(), "{mine:?}");
    assert!(guest.meminfo["MemTotal"] > 256 * MIB);

    let dir = vm.vm().paths.dir.clone();
    sandbox.destroy().await;
    sandbox.destroy().await;
    assert!(!dir.exists());
    assert!(processes_mentioning(&dir).is_empty());
    assert!(backend.ram_files().is_empty());
    assert_eq!(sandbox.exit_cause(), Some(ExitCause::Exited));
}

const JS_HELLO: &str =
    "function main(args) { console.log('node in the guest'); return {sum: args.a + args.b}; }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodejs_runs_in_a_vm() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let sandbox = backend.start(spec("js1", "nodejs:20", 256)).await.unwrap();
    init(&sandbox, JS_HELLO).await;
    let marks = sandbox.logs().marks();
    let (status, body) = run(&sandbox, serde_json::json!({"a": 2, "b": 40})).await;
    assert_eq!((status, body["sum"].as_i64()), (200, Some(42)));
    let lines = sandbox
        .logs()
        .take_after(marks, Duration::from_secs(30))
        .await;
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("stdout: node in the guest")),
        "{lines:?}"
    );
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_runs_in_a_vm() {
    use base64::Engine;
    let jar = std::fs::read(repo().join("examples/java/target/icebox-examples.jar"))
        .expect("examples/java/target/icebox-examples.jar (built by scripts/setup.sh)");
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let sandbox = backend.start(spec("java1", "java:17", 256)).await.unwrap();
    let code = base64::engine::general_purpose::STANDARD.encode(jar);
    let reply = sandbox
        .client()
        .post_json(
            "/init",
            &serde_json::json!({"value": {"name": "t", "main": "Hello", "code": code, "binary": true}}),
        )
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let (status, body) = run(&sandbox, serde_json::json!({"name": "jvm"})).await;
    assert_eq!(
        (status, body["greeting"].as_str()),
        (200, Some("Hello, jvm!"))
    );
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_vm_is_paused_and_runs_again_after_thaw() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend_with(state.path(), |c| {
        c.ping_interval = Duration::from_millis(200);
        c.ping_timeout = Duration::from_secs(2);
    })
    .await;
    let sandbox = backend.start(spec("frz", "python:3", 128)).await.unwrap();
    init(&sandbox, PY_HELLO).await;
    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    sandbox.freeze().unwrap();
    assert_eq!(vm.vm().qmp.status().await.unwrap(), "paused");
    // Longer than a ping timeout: a frozen VM is not taken for a dead one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sandbox.exit_cause(), None);
    sandbox.thaw().unwrap();
    assert_eq!(vm.vm().qmp.status().await.unwrap(), "running");
    let (status, body) = run(&sandbox, serde_json::json!({"name": "again"})).await;
    assert_eq!((status, body["greeting"].as_str()), (200, Some("hi again")));
    assert_eq!(sandbox.exit_cause(), None);
    sandbox.destroy().await;
}

const PY_HOG: &str = "def main(args):\n    blocks = []\n    while True:\n        blocks.append(bytearray(8 << 20))\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_past_its_memory_limit_is_oom_killed_in_the_guest_and_ends_the_instance() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let sandbox = backend.start(spec("oom", "python:3", 96)).await.unwrap();
    init(&sandbox, PY_HOG).await;
    let reply = sandbox
        .client()
        .post_json("/run", &serde_json::json!({"value": {}}))
        .await;
    assert!(reply.is_err() || reply.unwrap().status != 200);
    tokio::time::timeout(Duration::from_secs(60), sandbox.exited())
        .await
        .expect("the instance ends");
    assert_eq!(sandbox.exit_cause(), Some(ExitCause::OutOfMemory));
    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    assert!(
        vm.exit_reason().unwrap().contains("OOM-killed: true"),
        "{:?}",
        vm.exit_reason()
    );
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_qemu_ends_the_instance_and_destroy_leaves_nothing() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let sandbox = backend.start(spec("kill", "python:3", 128)).await.unwrap();
    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    let dir = vm.vm().paths.dir.clone();
    let pid = sandbox.pids()[0];
    // The test's own QEMU child.
    let qemu = Pid::from_raw(pid.cast_signed()).expect("QEMU's pid");
    kill_process(qemu, Signal::KILL).expect("SIGKILL to QEMU");
    tokio::time::timeout(Duration::from_secs(30), sandbox.exited())
        .await
        .expect("the instance ends");
    assert_eq!(sandbox.exit_cause(), Some(ExitCause::Exited));
    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    assert!(
        vm.exit_reason().unwrap().starts_with("QEMU exited"),
        "{:?}",
        vm.exit_reason()
    );
    assert!(sandbox.pids().is_empty());
    sandbox.destroy().await;
    assert!(!dir.exists());
    assert!(processes_mentioning(&dir).is_empty());
    assert_eq!(
        std::fs::read_dir(backend.instances_dir()).unwrap().count(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_agent_is_detected() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend_with(state.path(), |c| {
        c.ping_interval = Duration::from_millis(300);
        c.ping_timeout = Duration::from_secs(2);
    })
    .await;
    let sandbox = backend.start(spec("hung", "python:3", 128)).await.unwrap();
    let vm = sandbox
        .as_any()
        .downcast_ref::<icebox_vm::VmSandbox>()
        .unwrap();
    // Paused behind the sandbox's back: to the host the guest just stops answering.
    vm.vm().qmp.stop().await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), sandbox.exited())
        .await
        .expect("the silent agent is noticed");
    assert_eq!(sandbox.exit_cause(), Some(ExitCause::Exited));
    assert!(
        vm.exit_reason().unwrap().contains("did not answer a ping"),
        "{:?}",
        vm.exit_reason()
    );
    sandbox.destroy().await;
    assert!(processes_mentioning(state.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_kills_the_vms_of_the_crashed_one() {
    let state = tempfile::tempdir().unwrap();
    let crashed = backend(state.path()).await;
    let sandbox = crashed
        .start(spec("orphan", "python:3", 128))
        .await
        .unwrap();
    let pid = sandbox.pids()[0];
    let dir = crashed.instances_dir().join("orphan");
    // The daemon "crashes": nothing of it destroys the sandbox.
    std::mem::forget(sandbox);
    drop(crashed);
    assert_eq!(processes_mentioning(&dir), vec![pid]);

    let restarted = backend(state.path()).await;
    assert_eq!(restarted.ram_files().len(), 1, "the orphan's RAM file");
    assert_eq!(restarted.cleanup_orphans().await.unwrap(), 1);
    assert!(processes_mentioning(&dir).is_empty());
    assert!(!dir.exists());
    assert!(restarted.ram_files().is_empty());
    assert_eq!(restarted.cleanup_orphans().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_exits_at_start_fails_with_its_output_and_leaves_nothing() {
    let state = tempfile::tempdir().unwrap();
    let backend = backend(state.path()).await;
    let mut s = spec("bad", "python:3", 128);
    s.env.push(("ICEBOX_SHARING".into(), "isolate".into()));
    let err = match backend.start(s).await {
        Ok(_) => panic!("a runtime refusing its sharing mode started"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("isolate"), "{err}");
    assert_eq!(
        std::fs::read_dir(backend.instances_dir()).unwrap().count(),
        0
    );
    assert!(processes_mentioning(state.path()).is_empty());
    assert!(backend.ram_files().is_empty());
}
