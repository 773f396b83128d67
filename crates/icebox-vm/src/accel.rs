//! Which accelerator VMs run with. KVM only where a probe VM actually boots with it: on
//! hosts whose /dev/kvm is PVM, `-accel kvm` starts but stock kernels cannot boot.

use crate::GuestImage;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    /// QEMU's emulator, multi-threaded (6–12× slower guest CPU).
    Tcg,
}

impl Accel {
    pub fn qemu_arg(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg,thread=multi",
        }
    }

    pub fn cpu_model(self) -> &'static str {
        match self {
            Accel::Kvm => "host",
            Accel::Tcg => "max",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// `--vm-accel auto|kvm|tcg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccelChoice {
    Auto,
    Kvm,
    Tcg,
}

impl std::str::FromStr for AccelChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(AccelChoice::Auto),
            "kvm" => Ok(AccelChoice::Kvm),
            "tcg" => Ok(AccelChoice::Tcg),
            other => Err(format!(
                "unknown VM accelerator '{other}' (expected auto, kvm or tcg)"
            )),
        }
    }
}

/// Printed by the initramfs when booted with `icebox.probe`, before it powers off.
const PROBE_MARK: &str = "ICEBOX-PROBE-OK";
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn resolve(choice: AccelChoice, qemu: &str, image: &GuestImage) -> anyhow::Result<Accel> {
    match choice {
        AccelChoice::Tcg => Ok(Accel::Tcg),
        AccelChoice::Kvm => match probe_kvm(qemu, image).await {
            Ok(()) => Ok(Accel::Kvm),
            Err(why) => anyhow::bail!("--vm-accel kvm: a probe VM does not boot with KVM: {why}"),
        },
        AccelChoice::Auto => {
            // A /dev/kvm without Intel's or AMD's module behind it is a software hypervisor
            // (here PVM's kvm_pvm), on which stock guest kernels do not boot: the probe would
            // only spend its whole timeout finding that out, at every daemon start.
            if hardware_kvm_module(Path::new("/sys/module")).is_none() {
                tracing::info!("VMs run under TCG: /dev/kvm is not backed by kvm_intel or kvm_amd");
                return Ok(Accel::Tcg);
            }
            match probe_kvm(qemu, image).await {
                Ok(()) => Ok(Accel::Kvm),
                Err(why) => {
                    tracing::info!("VMs run under TCG: {why}");
                    Ok(Accel::Tcg)
                }
            }
        }
    }
}

/// The hardware-virtualization KVM module that is loaded (or built in with parameters, which
/// also shows in `/sys/module`), if any.
fn hardware_kvm_module(sys_module: &Path) -> Option<&'static str> {
    ["kvm_intel", "kvm_amd"]
        .into_iter()
        .find(|m| sys_module.join(m).is_dir())
}

/// Boot the guest kernel and initramfs with KVM until the initramfs says it runs.
pub async fn probe_kvm(qemu: &str, image: &GuestImage) -> Result<(), String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        return Err(format!("/dev/kvm: {e}"));
    }
    let mut child = tokio::process::Command::new(qemu)
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args([
            "-accel", "kvm", "-cpu", "host", "-m", "256M", "-machine", "q35",
        ])
        .arg("-kernel")
        .arg(&image.kernel)
        .arg("-initrd")
        .arg(&image.initrd)
        .args([
            "-append",
            "console=ttyS0 panic=-1 quiet icebox.probe",
            "-serial",
            "stdio",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {qemu}: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut seen = Vec::new();
    let found = tokio::time::timeout(PROBE_TIMEOUT, async {
        let mut buf = [0u8; 4096];
        loop {
            match out.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if String::from_utf8_lossy(&seen).contains(PROBE_MARK) {
                        return true;
                    }
                }
            }
        }
    })
    .await;
    let _ = child.start_kill();
    let status = child.wait().await;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err).await;
    }
    match found {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "QEMU exited ({}) before the guest ran: {}",
            status.map(|s| s.to_string()).unwrap_or_default(),
            err.lines().next().unwrap_or("").trim()
        )),
        Err(_) => Err(format!("the guest did not boot within {PROBE_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_intel_or_amd_modules_count_as_hardware_kvm() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(hardware_kvm_module(dir.path()), None);
        std::fs::create_dir(dir.path().join("kvm_pvm")).unwrap();
        std::fs::create_dir(dir.path().join("kvm")).unwrap();
        assert_eq!(hardware_kvm_module(dir.path()), None);
        std::fs::create_dir(dir.path().join("kvm_amd")).unwrap();
        assert_eq!(hardware_kvm_module(dir.path()), Some("kvm_amd"));
    }
}
