//! Shared by the VM tests: the real guest image (built by scripts/guest/build.sh — a missing
//! image fails the tests), the accelerator probed once per test binary, instance specs of the
//! repository's runtimes.

#![allow(dead_code)]

use icebox_core::units::MIB;
use icebox_sandbox_api::{InstanceSpec, Runtimes, Sandbox};
use icebox_vm::{Accel, AccelChoice, GuestImage, VmBackend, VmBackendConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn image_dir() -> PathBuf {
    std::env::var_os("ICEBOX_GUEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| GuestImage::default_dir(&repo()))
}

pub fn image() -> GuestImage {
    GuestImage::open(&image_dir())
        .unwrap_or_else(|e| panic!("the VM tests need the guest image: {e:#}"))
}

static ACCEL: OnceCell<Accel> = OnceCell::const_new();

/// The accelerator `auto` settles on here, probed once per test binary (the probe costs
/// seconds where KVM cannot boot guests).
pub async fn accel() -> Accel {
    *ACCEL
        .get_or_init(|| async {
            icebox_vm::accel::resolve(AccelChoice::Auto, "qemu-system-x86_64", &image())
                .await
                .unwrap()
        })
        .await
}

pub async fn backend(state: &Path) -> VmBackend {
    let mut cfg = VmBackendConfig::new(state, &image_dir());
    cfg.accel = match accel().await {
        Accel::Kvm => AccelChoice::Kvm,
        Accel::Tcg => AccelChoice::Tcg,
    };
    VmBackend::new(cfg)
        .await
        .unwrap_or_else(|e| panic!("VM backend: {e:#}"))
}

pub async fn backend_with(state: &Path, tweak: impl FnOnce(&mut VmBackendConfig)) -> VmBackend {
    let mut cfg = VmBackendConfig::new(state, &image_dir());
    cfg.accel = match accel().await {
        Accel::Kvm => AccelChoice::Kvm,
        Accel::Tcg => AccelChoice::Tcg,
    };
    tweak(&mut cfg);
    VmBackend::new(cfg)
        .await
        .unwrap_or_else(|e| panic!("VM backend: {e:#}"))
}

pub fn spec(id: &str, kind: &str, memory_mib: u64) -> InstanceSpec {
    let runtimes = Runtimes::load(&repo().join("runtimes")).unwrap();
    InstanceSpec {
        id: id.to_string(),
        action: "guest/test".to_string(),
        runtime: runtimes.resolve(kind).unwrap().clone(),
        memory_limit_bytes: memory_mib * MIB,
        pids_max: 512,
        tmp_bytes: 16 * MIB,
        concurrency: 1,
        network: false,
        env: Vec::new(),
    }
}

pub async fn init(sandbox: &Arc<dyn Sandbox>, code: &str) {
    let reply = sandbox
        .client()
        .post_json(
            "/init",
            &serde_json::json!({"value": {"name": "t", "main": "main", "code": code, "binary": false}}),
        )
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
}

pub async fn run(sandbox: &Arc<dyn Sandbox>, value: serde_json::Value) -> (u16, serde_json::Value) {
    let deadline = std::time::SystemTime::now() + Duration::from_secs(60);
    let ms = deadline
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let reply = sandbox
        .client()
        .post_json(
            "/run",
            &serde_json::json!({"value": value, "activation_id": "a1", "deadline": ms.to_string()}),
        )
        .await
        .unwrap();
    (
        reply.status,
        reply.json().unwrap_or(serde_json::Value::Null),
    )
}

/// Processes whose command line mentions `needle` (a VM's directory).
pub fn processes_mentioning(needle: &Path) -> Vec<u32> {
    let needle = needle.as_os_str().as_encoded_bytes().to_vec();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmd.windows(needle.len()).any(|w| w == needle.as_slice())
        })
        .collect()
}
