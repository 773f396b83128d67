//! Restoring a `vm` instance from a snapshot: QEMU maps the snapshot's RAM file privately
//! (copy-on-write: the file is never written), loads the device state with `-incoming
//! defer`, resumes, and the host opens a new agent session to the runtime the template left
//! running. How memory comes in is the [`RestoreMode`]:
//!
//! - `lazy`: on demand only, each first touch a fault on the file (a disk read when cold);
//! - `eager`: every data page of the file read into the page cache before `cont`;
//! - `record`: lazy, while the pages coming into the page cache are recorded (FaaSnap §4.4);
//! - `reap`: the recorded loading set read before `cont`;
//! - `faasnap`: the loading set read in group order by a loader thread while the guest runs.

use super::loader::Loader;
use super::memfile::{self, Residency, PAGE};
use super::meta::{SnapshotMeta, MEMORY_FILE, STATE_FILE};
use super::record::Recorder;
use super::restored::{Ready, Restored, Steps};
use super::{fingerprint, integrity, loadset_file};
use crate::backend::{orphans, runtime_name, RestoredVm, VmBackend, VmSandbox};
use crate::qemu::MemoryBackend;
use crate::vm::{BootError, Vm, VmPaths};
use icebox_core::RestoreMode;
use icebox_guest::AgentError;
use icebox_sandbox_api::{InstanceSpec, Sandbox, SandboxError};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

fn refused(dir: &Path, why: impl std::fmt::Display) -> SandboxError {
    SandboxError::restore("VM", dir, why)
}

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1e6).round() / 1000.0
}

pub async fn restore(
    backend: &VmBackend,
    spec: InstanceSpec,
    dir: &Path,
    mode: RestoreMode,
) -> Result<Arc<dyn Sandbox>, SandboxError> {
    if spec.network {
        return Err(SandboxError::Unsupported(
            "the vm backend gives instances no network (the action asks for it)".into(),
        ));
    }
    let t0 = Instant::now();
    let memory_mib = backend.vm_memory_mib(spec.memory_limit_bytes);
    let expected =
        fingerprint(backend, &runtime_name(&spec), memory_mib).map_err(|e| refused(dir, e))?;
    let meta = SnapshotMeta::open(dir, &expected).map_err(|e| refused(dir, e))?;
    let memory_path = dir.join(MEMORY_FILE);
    let memory = File::open(&memory_path).map_err(|e| refused(dir, e))?;
    let t_verify = Instant::now();
    let checked = {
        let (path, file) = (
            memory_path.clone(),
            memory.try_clone().map_err(|e| refused(dir, e))?,
        );
        let (id, sums) = (meta.id.clone(), meta.memory.crc32.clone());
        tokio::task::spawn_blocking(move || integrity::verify(&path, &id, &file, &sums))
            .await
            .map_err(|e| refused(dir, e))?
            .map_err(|e| refused(dir, e))?
    };
    let verify_ms = ms(t_verify);
    tracing::debug!(dir = %dir.display(), ?checked, verify_ms, "VM snapshot RAM checked");
    let prefetch = prefetch_ranges(mode, dir, &meta, &memory).map_err(|e| refused(dir, e))?;
    let prefetch_pages = prefetch
        .as_ref()
        .map_or(0, |r| r.iter().map(|(_, len)| len / PAGE).sum());
    // FaaSnap starts its loader as soon as the invocation arrives, before the VMM is up;
    // REAP and eager read while QEMU starts and wait for the loader before the guest runs.
    let loader = match prefetch {
        Some(ranges) => {
            let file = memory.try_clone().map_err(|e| refused(dir, e))?;
            Some(Loader::spawn(file, ranges).map_err(|e| refused(dir, e))?)
        }
        None => None,
    };
    let recorder = match mode {
        RestoreMode::Record => Some(Recorder::start(&memory).map_err(|e| refused(dir, e))?),
        _ => None,
    };
    let restored = Restored {
        mode,
        dir: dir.to_path_buf(),
        meta,
        loader,
        recorder,
        prefetch_pages,
        ready: Default::default(),
    };
    let mut steps = Steps {
        prepare: ms(t0),
        verify: verify_ms,
        ..Default::default()
    };

    let instance_dir = backend.instance_dir(&spec.id)?;
    let vm = match start_vm(backend, &spec, &instance_dir, &restored, &mut steps).await {
        Ok(vm) => vm,
        Err(e) => {
            restored.stop();
            orphans::kill_recorded(&instance_dir).await;
            let _ = std::fs::remove_dir_all(&instance_dir);
            return Err(refused(dir, e));
        }
    };
    let guest_id = restored.meta.guest_instance.clone();
    let sandbox = VmSandbox::restored(
        spec.id.clone(),
        guest_id,
        vm,
        backend.config().clone(),
        Box::new(restored),
    );
    let t = Instant::now();
    if let Err(e) = attach(&sandbox).await {
        sandbox.destroy().await;
        return Err(refused(dir, e));
    }
    steps.attach = ms(t);
    steps.total = ms(t0);
    let state = sandbox
        .restored_as::<Restored>()
        .expect("a restored sandbox");
    let ready = Ready {
        ms: steps,
        resident_pages: Residency::map(&memory)
            .and_then(|r| r.resident_pages())
            .unwrap_or(0),
        qemu_rss_pages: resident_pages(sandbox.vm().qemu.pid()),
        loader_bytes: state.loader.as_ref().map_or(0, |l| l.progress().0.bytes),
    };
    let _ = state.ready.set(ready);
    Ok(sandbox)
}

/// What the loader reads, in order: the file's data for eager, the loading set for REAP and
/// FaaSnap (a mode that needs one refuses a snapshot without it).
fn prefetch_ranges(
    mode: RestoreMode,
    dir: &Path,
    meta: &SnapshotMeta,
    memory: &File,
) -> Result<Option<Vec<(u64, u64)>>, String> {
    Ok(match mode {
        RestoreMode::Eager => Some(
            memfile::data_ranges(memory)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(start, end)| (start, end - start))
                .collect(),
        ),
        RestoreMode::Reap | RestoreMode::Faasnap => Some(
            loadset_file::read(dir, meta)?
                .iter()
                .map(|r| (r.start * PAGE, r.pages * PAGE))
                .collect(),
        ),
        RestoreMode::Lazy | RestoreMode::Record => None,
    })
}

/// QEMU on the snapshot's RAM (mapped privately) with its device state loaded, resumed once
/// the loader is done where the mode waits for it, with a new agent session.
async fn start_vm(
    backend: &VmBackend,
    spec: &InstanceSpec,
    instance_dir: &Path,
    restored: &Restored,
    steps: &mut Steps,
) -> Result<Vm, String> {
    let cfg = backend.config();
    let mut config = backend.vm_config(&spec.id, spec.memory_limit_bytes);
    config.memory_backend = MemoryBackend::File {
        path: restored.dir.join(MEMORY_FILE),
        share: false,
    };
    let t = Instant::now();
    let incoming = Vm::incoming(
        &cfg.qemu,
        config,
        VmPaths::new(instance_dir),
        &restored.dir.join(STATE_FILE),
        cfg.boot_timeout,
    )
    .await
    .map_err(|e| e.to_string())?;
    if let Some(r) = &restored.recorder {
        r.attach(incoming.qemu.pid());
    }
    steps.incoming = ms(t);
    let t = Instant::now();
    if matches!(restored.mode, RestoreMode::Eager | RestoreMode::Reap) {
        if let Some(loader) = &restored.loader {
            let report = loader.finished().await;
            if let Some(e) = report.error {
                return Err(format!("reading the memory image: {e}"));
            }
        }
    }
    steps.prefetch_wait = ms(t);
    let t = Instant::now();
    let vm = incoming
        .resume(cfg.boot_timeout)
        .await
        .map_err(|e| match e {
            BootError::AgentTimeout { .. } => format!("the restored guest's agent is silent: {e}"),
            e => e.to_string(),
        })?;
    steps.resume = ms(t);
    Ok(vm)
}

/// The new session to the runtime the template left running: the guest clock (stale since
/// the snapshot), the events, output and the host socket, then the proxy's answer.
async fn attach(sandbox: &Arc<VmSandbox>) -> Result<(), String> {
    let agent = &sandbox.vm().agent;
    let failed = |what: &str, e: AgentError| format!("{what}: {e}");
    agent
        .set_time(SystemTime::now())
        .await
        .map_err(|e| failed("set_time", e))?;
    let hello = agent.hello().await.map_err(|e| failed("hello", e))?;
    if !hello.instances.iter().any(|i| i == sandbox.guest_id()) {
        return Err(format!(
            "the runtime of the snapshot ({}) is not running in the restored guest (it runs {:?})",
            sandbox.guest_id(),
            hello.instances
        ));
    }
    let events = agent.events().await.map_err(|e| failed("events", e))?;
    sandbox
        .attach(events)
        .await
        .map_err(|e| failed("output", e))?;
    if !sandbox.client().wait_ready(Duration::from_secs(10)).await {
        return Err("the restored runtime does not accept through the host socket".into());
    }
    Ok(())
}

/// Resident pages of a process (/proc/PID/statm).
fn resident_pages(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}
