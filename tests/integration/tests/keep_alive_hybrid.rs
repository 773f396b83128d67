//! `--keep-alive-policy hybrid` against the real daemon: an action called at a steady interval
//! gets a representative idle-time histogram, after which its instance is unloaded as soon as
//! it goes idle and a new one is pre-warmed shortly before the next call is expected, and
//! evicted after the histogram's tail when that call does not come.

use icebox_integration::{wait_for, Daemon};
use serde_json::json;
use std::time::Duration;

#[test]
fn a_steady_action_is_unloaded_when_idle_and_prewarmed_before_its_next_call() {
    // 200 ms bins: calls 1 s apart fill bin 5 (a little later under load: bin 6).
    let d = Daemon::start(&[
        "--keep-alive-policy",
        "hybrid",
        "--hybrid-bin",
        "200ms",
        "--prewarm",
        "none",
    ]);
    d.deploy_echo();
    let mut last = String::new();
    // The histogram needs 10 idle times.
    for n in 0..11 {
        if n > 0 {
            std::thread::sleep(Duration::from_millis(1000));
        }
        last = d
            .invoke("echo", json!({"n": n}))
            .expect_success()
            .instance()
            .to_string();
    }
    // Unloaded at once, not after the 10-minute TTL.
    wait_for(
        "the idle instance to be unloaded",
        Duration::from_secs(5),
        || d.instance(&last).is_none().then_some(()),
    );
    let unloaded = wait_for("the unload's reason", Duration::from_secs(5), || {
        d.events_of(&last).into_iter().find(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|s| s.starts_with("hybrid keep-alive: unloaded now"))
        })
    });
    assert!(
        unloaded["detail"]
            .as_str()
            .unwrap()
            .contains("pre-warmed in"),
        "{unloaded}"
    );
    // Pre-warmed within the second, idle, with no activation.
    let prewarm = wait_for("a pre-warm", Duration::from_secs(10), || {
        d.events().into_iter().find(|e| {
            e["action"] == "guest/echo"
                && e["detail"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("hybrid keep-alive: pre-warmed"))
        })
    });
    let prewarmed = prewarm["instance"].as_str().unwrap().to_string();
    assert_ne!(prewarmed, last);
    // Nobody calls: it goes when its window ends (1.1 × the tail, well under the TTL).
    wait_for(
        "the pre-warmed instance to go",
        Duration::from_secs(10),
        || d.instance(&prewarmed).is_none().then_some(()),
    );
    let evicted = wait_for("its eviction", Duration::from_secs(5), || {
        d.events_of(&prewarmed)
            .into_iter()
            .find(|e| e["kind"] == "evicted")
    });
    assert_eq!(evicted["detail"], "keep_alive_expired", "{evicted}");
    d.stop();
}
