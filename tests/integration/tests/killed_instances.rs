//! An instance whose runtime is killed while it waits for work (found by the soak: the next
//! request sent to it failed with 502). The daemon must notice the death on its own, evict
//! the instance, and serve the next request from a fresh one.

use icebox_integration::{wait_for, Daemon};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::json;
use std::time::Duration;

#[test]
#[expect(
    clippy::cast_possible_truncation,
    reason = "a pid the daemon reported fits in pid_t"
)]
fn an_idle_instance_whose_runtime_is_killed_is_evicted_before_it_is_reused() {
    // A long pause grace keeps the instance idle, not frozen (a process frozen by the v1
    // freezer only dies once thawed).
    let d = Daemon::start(&["--pause-grace", "10m"]);
    d.deploy(
        "echo",
        "python:3",
        "def main(args):\n    return args\n",
        json!({}),
    );
    let first = d.invoke("echo", json!({"n": 1})).expect_success();
    let instance = first.instance().to_string();
    let pids: Vec<i32> = wait_for(
        "the instance's pids to be measured",
        Duration::from_secs(10),
        || {
            let view = d.instance(&instance)?;
            let pids: Vec<i32> = view["pids"]
                .as_array()?
                .iter()
                .filter_map(|p| p.as_i64())
                .map(|p| p as i32)
                .collect();
            (view["state"] == "idle" && !pids.is_empty()).then_some(pids)
        },
    );
    let runtime = *pids.last().expect("a pid");
    // A process of the instance this test's daemon started, listed by that daemon.
    let runtime = Pid::from_raw(runtime).expect("the runtime's pid");
    kill_process(runtime, Signal::KILL).expect("SIGKILL to the runtime");
    wait_for(
        "the dead instance to be evicted",
        Duration::from_secs(20),
        || d.instance(&instance).is_none().then_some(()),
    );
    // The instance leaves the books before its sandbox is destroyed; the event follows that.
    let evicted = wait_for("an evicted event", Duration::from_secs(10), || {
        d.events_of(&instance)
            .into_iter()
            .find(|e| e["kind"] == "evicted")
    });
    assert_eq!(evicted["detail"], "exited", "{evicted}");
    let next = d.invoke("echo", json!({"n": 2})).expect_success();
    assert_ne!(next.instance(), instance);
    assert_eq!(next.start_kind(), "cold");
    d.stop();
}
