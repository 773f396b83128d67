//! Snapshots on the `vm` backend with FaaSnap's restore (docs/vm.md, "Snapshots on the `vm`
//! backend"). Every VM's RAM is a file on a tmpfs mapped shared (`backend::ram`), so the daemon's
//! template can be snapshotted whichever instance it is: its device state goes to a file
//! through QEMU's migration with `x-ignore-shared`, its RAM is copied sparse ([`take`]). A
//! restore maps that copy privately and brings pages into the host page cache as its mode
//! says ([`restore`]); the first restore records which pages came in ([`record`]), and the
//! loading set built from that ([`loadset_file`]) is what REAP and FaaSnap restores read
//! ([`loader`]).
//!
//! A snapshot directory holds `snapshot.json` ([`meta`]), `memory`, `state` and, once
//! recorded, `loadset.json`.

pub mod integrity;
pub mod loader;
pub mod loadset_file;
pub mod memfile;
pub mod meta;
pub mod record;
mod restore;
mod restored;
mod take;

pub use restored::{Ready, Restored, Steps};

use crate::backend::{VmBackend, VmSandbox};
use async_trait::async_trait;
use icebox_core::{LoadingSetInfo, RestoreMode, SnapshotInfo};
use icebox_sandbox_api::{InstanceSpec, Sandbox, SandboxError, Snapshots};
use meta::{Fingerprint, SnapshotMeta, MEMORY_FILE};
use std::path::Path;
use std::sync::Arc;

/// What a VM of this backend running `runtime` with `memory_mib` of RAM is, for snapshots.
pub(crate) fn fingerprint(
    backend: &VmBackend,
    runtime: &str,
    memory_mib: u64,
) -> Result<Fingerprint, String> {
    let accel = backend.accel();
    Ok(Fingerprint {
        image: meta::image_hashes(&backend.image().manifest),
        qemu: meta::qemu_version(&backend.config().qemu)?,
        accel: format!("{} -cpu {}", accel.name(), accel.cpu_model()),
        memory_mib,
        vcpus: backend.config().vcpus,
        runtime: runtime.to_string(),
    })
}

fn ours(sandbox: &Arc<dyn Sandbox>) -> Result<&VmSandbox, SandboxError> {
    sandbox
        .as_any()
        .downcast_ref::<VmSandbox>()
        .ok_or_else(|| SandboxError::Snapshot("not an instance of the vm backend".into()))
}

#[async_trait]
impl Snapshots for VmBackend {
    async fn snapshot(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<SnapshotInfo, SandboxError> {
        let vm = ours(sandbox)?;
        let taken = take::take(self, vm, dir).await;
        // The template is gone afterwards, snapshotted or not.
        sandbox.destroy().await;
        taken
    }

    async fn restore(
        &self,
        spec: InstanceSpec,
        dir: &Path,
        mode: RestoreMode,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        restore::restore(self, spec, dir, mode).await
    }

    /// FaaSnap §4.6: the working set recorded since the restore, minus the pages that are
    /// holes in the memory file (zero when snapshotted), merged and ordered
    /// (`icebox_snap::loadset`), written beside the snapshot.
    async fn finish_record(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        dir: &Path,
    ) -> Result<LoadingSetInfo, SandboxError> {
        let failed = SandboxError::Snapshot;
        let vm = ours(sandbox)?;
        let restored = vm
            .restored_as::<Restored>()
            .filter(|r| r.mode == RestoreMode::Record)
            .ok_or_else(|| failed("this instance was not restored in record mode".into()))?;
        let recorder = restored
            .recorder
            .as_ref()
            .expect("record mode has a recorder");
        let recording = recorder
            .finish()
            .ok_or_else(|| failed("the recording was already finished".into()))?
            .map_err(|e| failed(format!("the recording failed: {e}")))?;
        let dir = dir.to_path_buf();
        let snapshot = restored.meta.clone();
        tokio::task::spawn_blocking(move || {
            let current = SnapshotMeta::open(&dir, &snapshot.fingerprint)?;
            if current.id != snapshot.id {
                return Err("the snapshot was replaced while its restore was recorded".into());
            }
            let memory = std::fs::File::open(dir.join(MEMORY_FILE)).map_err(|e| e.to_string())?;
            let data = memfile::DataMap::of(&memory).map_err(|e| e.to_string())?;
            let set = loadset_file::build(&recording.pages, &data);
            tracing::debug!(
                recorded = recording.pages.len(),
                scans = recording.scans,
                already_resident = recording.already_resident,
                loading_set = set.pages(),
                regions = set.regions.len(),
                "VM loading set built"
            );
            loadset_file::write(&dir, &current, &set).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(failed)
    }
}
