//! An instance evicted while the manager freezes it: the freeze fails because the instance's
//! cgroup is gone, which is a normal race and must not be logged as an error.

use super::tests::{action, Harness, Setup};
use super::Health;
use icebox_policy::Clock;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tracing_subscriber::fmt::MakeWriter;

/// Everything the daemon logs during the tests of this binary, as text lines.
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Capture {
        Capture
    }
}

/// Log lines that mention `needle`. The subscriber is global: the pool logs from every worker.
fn logged(needle: &str) -> Vec<String> {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_writer(Capture)
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .try_init();
    });
    String::from_utf8_lossy(&LOG.lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_evicted_mid_freeze_is_not_an_error() {
    logged("");
    let h = Arc::new(Harness::new(Setup::default()));
    let lease = h.lease(&action("a", "0.0.1")).await;
    let id = lease.instance.id.clone();
    lease.release(Health::Reusable).await;

    // Past the pause grace the manager freezes the idle instance; the freeze is held open.
    h.backend.counters.freeze_gate.arm();
    h.clock.advance(100);
    let freezing = {
        let h = h.clone();
        tokio::spawn(async move { h.pool.keep_alive_round(h.clock.now_ms()).await })
    };
    while !h.backend.counters.freeze_gate.entered() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // An operator evicts it meanwhile (DELETE /icebox/v1/instances/ID): the sandbox is gone.
    assert!(
        h.pool.evict_idle(&id).await,
        "a frozen instance can be evicted"
    );
    h.backend.counters.freeze_gate.open();
    freezing.await.expect("the keep-alive round ends");

    let lines = logged(&id);
    assert!(
        lines.iter().any(|l| l.contains("already gone")),
        "the failed freeze is noted: {lines:#?}"
    );
    let errors: Vec<_> = lines.iter().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "logged as errors: {errors:#?}");
    assert_eq!((h.pool.instance_count(), h.live()), (0, 0));
}
