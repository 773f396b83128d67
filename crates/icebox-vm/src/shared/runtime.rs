//! What the guest agent is asked to run: an instance's runtime in its partition, and the
//! warm-up on node 0 that puts the runtime's files in the shared page cache.
//!
//! Page cache is allocated where the reading process may allocate: a file an instance reads
//! first is cached in its partition and outlives it there, so the unplug has to migrate it.
//! Hence every file an instance is likely to read is read on node 0 when the VM boots.

use super::config::SharedConfig;
use crate::image::GuestImage;
use icebox_core::units::MIB;
use icebox_guest::protocol::{Event, StartRequest};
use icebox_guest::{AgentClient, EventStream};
use icebox_sandbox_api::{InstanceSpec, SandboxError};
use std::time::{Duration, Instant};

pub(super) use crate::backend::guest_start_request as start_request;

/// The agent's ids for the warm-up processes; never a daemon's instance id (those end in
/// eight hex digits).
const WARMUP_ID: &str = "icebox-warmup";
const PRELOAD_ID: &str = "icebox-preload";

/// Reads every file under its arguments once (into the page cache of the node it runs on).
const PRELOAD: &str = r#"
import os, sys
for top in sys.argv[1:]:
    for d, _, files in os.walk(top):
        for f in files:
            try:
                with open(os.path.join(d, f), "rb", buffering=0) as h:
                    while h.read(1 << 20):
                        pass
            except OSError:
                pass
"#;

/// Language-specific files beyond the runtime's directory that functions commonly read.
fn preload_paths(language: &str) -> &'static [&'static str] {
    match language {
        "python" => &["/usr/lib/python3.11"],
        _ => &[],
    }
}

/// The runtime of `spec` started once on node 0 until its proxy accepts, then stopped: the
/// interpreter, its libraries and the proxy's modules are read into node 0's page cache,
/// where every later instance maps them from instead of reading them into its own partition.
fn warmup_request(
    image: &GuestImage,
    spec: &InstanceSpec,
    ready_timeout: Duration,
) -> Result<StartRequest, SandboxError> {
    let mut req = start_request(image, spec, Some(0), ready_timeout)?;
    req.instance = WARMUP_ID.to_string();
    Ok(req)
}

/// Before the VM's first instance: the runtime's directory (its packages included) and its
/// language's library files are read on node 0, then the runtime itself is started there
/// until its proxy accepts (the interpreter, its libraries, the proxy's modules) and
/// stopped. Failures are only logged: the instance's own start reports a broken runtime.
pub async fn warm_up(
    agent: &AgentClient,
    image: &GuestImage,
    cfg: &SharedConfig,
    spec: &InstanceSpec,
    events: &mut EventStream,
) {
    let t0 = Instant::now();
    let request = match warmup_request(image, spec, cfg.ready_timeout) {
        Ok(r) => r,
        Err(e) => return tracing::warn!("no runtime warm-up: {e}"),
    };
    let dir = spec
        .runtime
        .dir
        .file_name()
        .and_then(|n| image.runtime_dir(&n.to_string_lossy()));
    let mut argv = vec![
        "/usr/bin/python3".to_string(),
        "-S".to_string(),
        "-c".to_string(),
        PRELOAD.to_string(),
    ];
    argv.extend(dir);
    argv.extend(
        preload_paths(spec.runtime.language())
            .iter()
            .map(|p| p.to_string()),
    );
    let preload = StartRequest {
        instance: PRELOAD_ID.to_string(),
        argv,
        env: Vec::new(),
        // Its page cache is charged to it: a smaller limit would evict what it read.
        memory_limit_bytes: cfg.shared_mib * MIB,
        pids_max: 16,
        tmp_bytes: MIB,
        numa_node: Some(0),
        wait_ready_ms: None,
    };
    match agent.start(&preload).await {
        Ok(_) => {
            let exited = async {
                while let Some(Event::Exited { instance, code, .. }) = events.next().await {
                    if instance == PRELOAD_ID {
                        return code;
                    }
                }
                None
            };
            match tokio::time::timeout(cfg.ready_timeout, exited).await {
                Ok(Some(0)) => {}
                Ok(code) => tracing::warn!(?code, "reading the runtime's files on node 0 failed"),
                Err(_) => {
                    tracing::warn!("reading the runtime's files on node 0 did not finish in time")
                }
            }
        }
        Err(e) => tracing::warn!("cannot read the runtime's files on node 0: {e}"),
    }
    let _ = agent.stop(PRELOAD_ID).await;
    if let Err(e) = agent.start(&request).await {
        tracing::warn!(action = %spec.action, "the runtime warm-up on node 0 failed: {e}");
    }
    if let Err(e) = agent.stop(WARMUP_ID).await {
        tracing::warn!("stopping the runtime warm-up: {e}");
    }
    tracing::debug!(action = %spec.action, ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX), "vm-shared warm-up done");
}
