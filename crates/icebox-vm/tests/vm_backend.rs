//! The `vm` backend end to end: real QEMU, the real guest image, real runtimes.

mod common;

use common::*;
use icebox_sandbox::{ExitCause, SandboxBackend, SENTINEL};
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
    assert!(guest.meminfo["MemTotal"] > 256 << 20);

    let dir = vm.vm().paths.dir.clone();
    sandbox.destroy().await;
    sandbox.destroy().await;
    assert!(!dir.exists());
    assert!(processes_mentioning(&dir).is_empty());
    assert_eq!(sandbox.exit_cause(), Some(ExitCause::Exited));
}
