//! The `vm` backend: one instance per QEMU VM (AWS Lambda's 1:1 model).

pub(crate) mod orphans;
pub mod ram;
mod sandbox;

pub use sandbox::{RestoredVm, SnapshotSource, VmSandbox};

use crate::accel::{self, Accel, AccelChoice};
use crate::image::GuestImage;
use crate::qemu::{MemoryBackend, VmConfig};
use crate::vm::{Vm, VmPaths};
use async_trait::async_trait;
use icebox_core::units::MIB;
use icebox_guest::protocol::StartRequest;
use icebox_guest::AgentError;
use icebox_sandbox_api::{
    InstanceSpec, LogCollector, Sandbox, SandboxBackend, SandboxError, Snapshots,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone)]
pub struct VmBackendConfig {
    /// The daemon's state directory; VMs live in `<state>/vm-instances/<id>`.
    pub state_dir: PathBuf,
    pub image_dir: PathBuf,
    pub accel: AccelChoice,
    pub qemu: String,
    pub vcpus: u32,
    /// TCG translation cache per VM (see [`VmConfig::tcg_tb_mib`]); `None`: QEMU's default.
    pub tcg_tb_mib: Option<u64>,
    /// Guest RAM beyond the instance's memory limit: kernel, agent, page cache of the runtime's
    /// files (see docs/vm.md for how it was measured).
    pub guest_overhead_mib: u64,
    /// From QEMU's start to the agent's hello.
    pub boot_timeout: Duration,
    /// From exec of the runtime to its proxy accepting, inside the guest.
    pub ready_timeout: Duration,
    /// How often an idle (not frozen) VM's agent is pinged, and how long it may take.
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
    /// A tmpfs where each VM's guest RAM lives as a file, mapped shared, so that any instance
    /// can be snapshotted (docs/vm.md, "Snapshots on the `vm` backend"). `None`: anonymous
    /// RAM, and no snapshots.
    pub ram_dir: Option<PathBuf>,
}

impl VmBackendConfig {
    pub fn new(state_dir: &Path, image_dir: &Path) -> VmBackendConfig {
        VmBackendConfig {
            state_dir: state_dir.to_path_buf(),
            image_dir: image_dir.to_path_buf(),
            accel: AccelChoice::Auto,
            qemu: "qemu-system-x86_64".to_string(),
            vcpus: 1,
            tcg_tb_mib: None,
            guest_overhead_mib: 160,
            boot_timeout: Duration::from_secs(90),
            ready_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(2),
            ping_timeout: Duration::from_secs(10),
            ram_dir: ram::default_dir(),
        }
    }
}

pub struct VmBackend {
    cfg: VmBackendConfig,
    image: GuestImage,
    accel: Accel,
    instances_dir: PathBuf,
}

impl VmBackend {
    /// Opens the guest image and settles the accelerator (a probe VM for `auto`/`kvm`).
    pub async fn new(cfg: VmBackendConfig) -> anyhow::Result<VmBackend> {
        let image = GuestImage::open(&cfg.image_dir)?;
        let accel = accel::resolve(cfg.accel, &cfg.qemu, &image).await?;
        let instances_dir = cfg.state_dir.join("vm-instances");
        std::fs::create_dir_all(&instances_dir)?;
        Ok(VmBackend {
            cfg,
            image,
            accel,
            instances_dir,
        })
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }

    pub fn image(&self) -> &GuestImage {
        &self.image
    }

    pub fn instances_dir(&self) -> &Path {
        &self.instances_dir
    }

    pub fn config(&self) -> &VmBackendConfig {
        &self.cfg
    }

    /// The file an instance's guest RAM lives in, when VMs have file-backed RAM.
    pub fn ram_file(&self, id: &str) -> Option<PathBuf> {
        let prefix = ram::prefix(&self.cfg.state_dir);
        self.cfg
            .ram_dir
            .as_ref()
            .map(|d| d.join(format!("{prefix}{id}")))
    }

    /// The RAM files of this backend's VMs now.
    pub fn ram_files(&self) -> Vec<PathBuf> {
        let prefix = ram::prefix(&self.cfg.state_dir);
        self.cfg
            .ram_dir
            .as_ref()
            .map(|d| ram::files(d, &prefix))
            .unwrap_or_default()
    }

    /// Creates the directory of instance `id`'s VM.
    pub(crate) fn instance_dir(&self, id: &str) -> Result<PathBuf, SandboxError> {
        let dir = self.instances_dir.join(id);
        // QEMU binds its sockets by path: sun_path holds 107 bytes.
        let longest = VmPaths::new(&dir).qmp_sync_socket;
        if longest.as_os_str().len() > 107 {
            return Err(SandboxError::Unsupported(format!(
                "{} is too long for a UNIX socket path: use a shorter state directory",
                longest.display()
            )));
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Guest RAM for an instance with this memory limit.
    pub fn vm_memory_mib(&self, memory_limit_bytes: u64) -> u64 {
        memory_limit_bytes.div_ceil(MIB) + self.cfg.guest_overhead_mib
    }

    /// The VM an instance with this memory limit gets. A snapshot restore must use the same
    /// layout (devices, memory) as the VM it was taken from: build both from here.
    pub fn vm_config(&self, id: &str, memory_limit_bytes: u64) -> VmConfig {
        let mut config = VmConfig::new(
            &format!("icebox-{id}"),
            self.accel,
            self.vm_memory_mib(memory_limit_bytes),
            &self.image,
        );
        config.vcpus = self.cfg.vcpus;
        config.tcg_tb_mib = self.cfg.tcg_tb_mib;
        if let Some(path) = self.ram_file(id) {
            config.memory_backend = MemoryBackend::File { path, share: true };
        }
        config
    }

    /// What the agent is asked to run for `spec` (see [`guest_start_request`]).
    pub fn start_request(&self, spec: &InstanceSpec) -> Result<StartRequest, SandboxError> {
        guest_start_request(&self.image, spec, None, self.cfg.ready_timeout)
    }

    async fn start_in(
        &self,
        spec: &InstanceSpec,
        dir: &Path,
    ) -> Result<Arc<VmSandbox>, SandboxError> {
        if spec.network {
            return Err(SandboxError::Unsupported(
                "the vm backend gives instances no network (the action asks for it)".into(),
            ));
        }
        let request = self.start_request(spec)?;
        let config = self.vm_config(&spec.id, spec.memory_limit_bytes);
        let paths = VmPaths::new(dir);
        let vm = Vm::boot(&self.cfg.qemu, config, paths, self.cfg.boot_timeout)
            .await
            .map_err(|e| SandboxError::VmBoot(Box::new(e)))?;
        let sandbox = VmSandbox::new(
            spec.id.clone(),
            vm,
            Arc::new(LogCollector::new()),
            self.cfg.clone(),
        );
        if let Some(ram_file) = self.ram_file(&spec.id) {
            sandbox.set_snapshot_source(SnapshotSource {
                ram_file,
                runtime: runtime_name(spec),
                memory_mib: self.vm_memory_mib(spec.memory_limit_bytes),
            });
        }
        // From here on a failure must end the VM.
        match self.start_runtime(&sandbox, &request).await {
            Ok(()) => Ok(sandbox),
            Err(e) => {
                sandbox.destroy().await;
                Err(e)
            }
        }
    }

    async fn start_runtime(
        &self,
        sandbox: &Arc<VmSandbox>,
        request: &StartRequest,
    ) -> Result<(), SandboxError> {
        let agent = &sandbox.vm().agent;
        // The guest clock starts from the RTC (whole seconds); deadlines need better.
        agent
            .set_time(SystemTime::now())
            .await
            .map_err(|e| SandboxError::agent("set_time", e))?;
        let events = agent
            .events()
            .await
            .map_err(|e| SandboxError::agent("events", e))?;
        match agent.start(request).await {
            Ok(_) => {}
            Err(AgentError::Timeout(t)) => {
                return Err(SandboxError::StartTimeout(
                    u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                ))
            }
            Err(e) => return Err(SandboxError::agent("start", e)),
        }
        sandbox
            .attach(events)
            .await
            .map_err(|e| SandboxError::agent("output", e))?;
        if !sandbox.client().wait_ready(Duration::from_secs(10)).await {
            return Err(SandboxError::Other(anyhow::anyhow!(
                "the host socket forwarder does not accept"
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl SandboxBackend for VmBackend {
    fn name(&self) -> &'static str {
        "vm"
    }

    /// The host has no cgroup of its own per VM (the guest has cgroup v2 inside).
    fn cgroup_version(&self) -> &'static str {
        "none"
    }

    async fn start(&self, spec: InstanceSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let dir = self.instance_dir(&spec.id)?;
        match self.start_in(&spec, &dir).await {
            Ok(s) => Ok(s),
            Err(e) => {
                // A VM that never became a sandbox: make sure its QEMU is gone with its files.
                orphans::kill_recorded(&dir).await;
                let _ = std::fs::remove_dir_all(&dir);
                if let Some(ram) = self.ram_file(&spec.id) {
                    let _ = std::fs::remove_file(ram);
                }
                Err(e)
            }
        }
    }

    async fn cleanup_orphans(&self) -> anyhow::Result<usize> {
        let cleaned = orphans::cleanup(&self.instances_dir).await?;
        // Their QEMUs are gone: nothing maps these RAM files any more.
        if let Some(dir) = &self.cfg.ram_dir {
            let prefix = ram::prefix(&self.cfg.state_dir);
            ram::remove_all(dir, &prefix);
        }
        Ok(cleaned)
    }

    /// Every instance is gone by now; a RAM file left means a VM the daemon never destroyed
    /// (a snapshot template still being built at shutdown): its memory goes with its QEMU.
    async fn shutdown(&self) {
        if let Some(dir) = &self.cfg.ram_dir {
            let prefix = ram::prefix(&self.cfg.state_dir);
            ram::remove_all(dir, &prefix);
        }
    }

    fn snapshots(&self) -> Option<&dyn Snapshots> {
        self.cfg.ram_dir.as_ref().map(|_| self as &dyn Snapshots)
    }
}

/// The runtime's directory name (python, nodejs, java): where the image has it.
pub(crate) fn runtime_name(spec: &InstanceSpec) -> String {
    spec.runtime
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The host socket path RuntimeClient connects to for an instance in `dir`.
pub(crate) fn host_socket(dir: &Path) -> PathBuf {
    dir.join("proxy.sock")
}

/// What the agent is asked to run for `spec` in either VM backend: the runtime as its manifest
/// says, with the runtime directory where the image put it, bound to guest NUMA `node` if any.
pub(crate) fn guest_start_request(
    image: &GuestImage,
    spec: &InstanceSpec,
    node: Option<u32>,
    ready_timeout: Duration,
) -> Result<StartRequest, SandboxError> {
    let name = runtime_name(spec);
    let guest_dir = image.runtime_dir(&name).ok_or_else(|| {
        SandboxError::Unsupported(format!(
            "the guest image has no runtime '{name}' (rebuild it with scripts/guest/build.sh)"
        ))
    })?;
    let mut env = vec![(
        "ICEBOX_CONCURRENCY".to_string(),
        spec.concurrency.to_string(),
    )];
    env.extend(spec.runtime.env_for(&guest_dir, spec.memory_limit_bytes));
    env.extend(spec.env.iter().cloned());
    Ok(StartRequest {
        instance: spec.id.clone(),
        argv: spec.runtime.argv(&guest_dir, spec.memory_limit_bytes),
        env,
        memory_limit_bytes: spec.memory_limit_bytes,
        pids_max: spec.pids_max,
        tmp_bytes: spec.tmp_bytes,
        numa_node: node,
        wait_ready_ms: Some(u64::try_from(ready_timeout.as_millis()).unwrap_or(u64::MAX)),
    })
}
