//! Taking a snapshot of a running `vm` instance (the daemon's template, idle after `/init`):
//! the host's session ends so the guest agent waits for the next one, the VM is paused, its
//! device state is migrated into a file with `x-ignore-shared` (the RAM is the shared file,
//! not part of the stream), and the RAM file is copied beside it, sparse.

use super::meta::{self, MemoryImage, SnapshotMeta, StateImage, MEMORY_FILE, STATE_FILE};
use super::{integrity, memfile};
use crate::backend::{VmBackend, VmSandbox};
use crate::qmp::shell_quote;
use icebox_core::SnapshotInfo;
use icebox_sandbox_api::SandboxError;
use std::path::Path;
use std::time::{Duration, Instant};

/// The guest sees the port close only when it runs: give it this long to end its session
/// before the VM is paused, so a restored agent is waiting for a new one.
const SESSION_END_GRACE: Duration = Duration::from_millis(100);
/// The device state is about a megabyte: seconds mean something is wrong.
const MIGRATE_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn take(
    backend: &VmBackend,
    sandbox: &VmSandbox,
    dir: &Path,
) -> Result<SnapshotInfo, SandboxError> {
    let t0 = Instant::now();
    let failed = |what: &str, e: String| SandboxError::Snapshot(format!("{what}: {e}"));
    let source = sandbox.snapshot_source().cloned().ok_or_else(|| {
        failed(
            "cannot snapshot this VM",
            "its RAM is not a shared file (a restored instance, or a backend without a RAM \
             directory)"
                .into(),
        )
    })?;
    let image = meta::image_hashes(&backend.image().manifest);
    if image.is_empty() {
        return Err(failed(
            "cannot snapshot",
            "the guest image's manifest has no sha256 of its files: rebuild it with \
             scripts/guest/build.sh"
                .into(),
        ));
    }
    let fingerprint = super::fingerprint(backend, &source.runtime, source.memory_mib)
        .map_err(|e| failed("cannot snapshot", e))?;
    if sandbox.vm().qemu.exit_status().is_some() {
        return Err(failed("cannot snapshot", "its QEMU has exited".into()));
    }

    sandbox.detach().await;
    tokio::time::sleep(SESSION_END_GRACE).await;
    let qmp = &sandbox.vm().qmp;
    let state = dir.join(STATE_FILE);
    let migrated = async {
        qmp.stop().await.map_err(|e| e.to_string())?;
        qmp.migrate_set_capabilities(&[("x-ignore-shared", true)])
            .await
            .map_err(|e| e.to_string())?;
        qmp.migrate(&format!("exec:cat > {}", shell_quote(&state)))
            .await
            .map_err(|e| e.to_string())?;
        crate::vm::wait_migration(qmp, MIGRATE_TIMEOUT).await
    };
    migrated
        .await
        .map_err(|e| failed("saving the device state", e))?;
    let memory = dir.join(MEMORY_FILE);
    // The sums are taken from the copy, which is what a restore reads (and is in the page
    // cache, just written).
    let (copied, crc32) = tokio::task::spawn_blocking(move || {
        let copied = memfile::copy_sparse(&source.ram_file, &memory)?;
        let sums = integrity::sums_of(&std::fs::File::open(&memory)?)?;
        std::io::Result::Ok((copied, sums))
    })
    .await
    .map_err(|e| failed("copying the RAM", e.to_string()))?
    .map_err(|e| failed("copying the RAM", e.to_string()))?;
    let state_bytes =
        std::fs::read(&state).map_err(|e| failed("reading the device state", e.to_string()))?;
    std::fs::File::open(&state)
        .and_then(|f| f.sync_all())
        .map_err(|e| failed("syncing the device state", e.to_string()))?;
    let took_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    let snapshot = SnapshotMeta::new(
        fingerprint,
        sandbox.guest_id().to_string(),
        MemoryImage {
            bytes: copied.bytes,
            data_pages: copied.data_pages,
            crc32,
        },
        StateImage {
            bytes: state_bytes.len() as u64,
            fnv1a: meta::fnv1a(&state_bytes),
        },
        took_ms,
    );
    snapshot
        .write(dir)
        .map_err(|e| failed("writing snapshot.json", e.to_string()))?;
    tracing::debug!(
        dir = %dir.display(),
        data_pages = copied.data_pages,
        zero_pages = copied.zero_pages,
        state_bytes = state_bytes.len(),
        took_ms,
        "VM snapshot taken"
    );
    Ok(SnapshotInfo {
        backend: "vm".into(),
        memory_bytes: copied.data_pages * memfile::PAGE,
        took_ms,
    })
}
