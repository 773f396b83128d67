//! What a `vm-shared` backend is configured with, and the memory mechanisms it can use.

use crate::accel::AccelChoice;
use icebox_core::units::MIB;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How an N:1 VM gives an instance memory and takes it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Squeezy: one guest NUMA node per instance, each with its own vCPU and virtio-mem
    /// device; the instance is bound to its node, so once it has exited its node is empty and
    /// unplugging migrates nothing.
    Squeezy,
    /// Vanilla virtio-mem: one device for the whole VM, instances unbound; the guest picks
    /// which blocks to give back and migrates whatever live neighbours have in them.
    VirtioMem,
    /// virtio-balloon: the VM boots with room for every partition and the balloon holds what
    /// is not handed out; deflated to give an instance memory, inflated to take it back.
    Balloon,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Squeezy => "squeezy",
            Mode::VirtioMem => "virtio-mem",
            Mode::Balloon => "balloon",
        }
    }

    /// Whether the guest zeroes pages it allocates, unplugged ones included (see
    /// `Layout::guest_zeroing`): Squeezy defers zeroing to the host; the baselines keep the
    /// stock kernel's hardening, as the paper's Fig. 5 measured them.
    pub fn default_guest_zeroing(self) -> bool {
        !matches!(self, Mode::Squeezy)
    }

    /// One resize target for the whole VM (rather than one device per partition): resizes
    /// of one VM must then take turns.
    pub fn single_target(self) -> bool {
        !matches!(self, Mode::Squeezy)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "squeezy" => Ok(Mode::Squeezy),
            "virtio-mem" => Ok(Mode::VirtioMem),
            "balloon" => Ok(Mode::Balloon),
            other => Err(format!(
                "unknown vm-shared memory mode '{other}' (expected squeezy, virtio-mem or balloon)"
            )),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SharedConfig {
    /// The daemon's state directory; VMs live in `<state>/vm-shared/<vm>`.
    pub state_dir: PathBuf,
    pub image_dir: PathBuf,
    pub accel: AccelChoice,
    pub qemu: String,
    pub mode: Mode,
    /// Partitions per VM: how many instances of one action run at once (each with a vCPU).
    pub partitions: u32,
    /// Boot memory of node 0, the shared partition: the guest kernel (including the memory
    /// map of every plugged partition, ~1.6 % of it), the agent and the page cache of the
    /// runtime's files, read there at boot.
    pub shared_mib: u64,
    /// virtio-mem block size; partitions are instance limits rounded up to it.
    pub block_mib: u64,
    /// Guest `init_on_alloc` (`None`: the mode's default, off for Squeezy only).
    pub guest_zeroing: Option<bool>,
    /// Host limit on memory plugged into all N:1 VMs of this backend (`None`: no limit).
    pub memory_limit: Option<u64>,
    /// How long a start may wait for budget (memory being released) or a free partition.
    pub budget_timeout: Duration,
    /// How long a plug or an unplug may take before it is reported as stuck.
    pub resize_timeout: Duration,
    /// An empty VM is shut down after this long.
    pub idle_vm_timeout: Duration,
    pub tcg_tb_mib: Option<u64>,
    pub boot_timeout: Duration,
    /// From exec of the runtime to its proxy accepting, inside the guest.
    pub ready_timeout: Duration,
    pub ping_interval: Duration,
    pub ping_timeout: Duration,
}

impl SharedConfig {
    pub fn new(state_dir: &Path, image_dir: &Path) -> SharedConfig {
        SharedConfig {
            state_dir: state_dir.to_path_buf(),
            image_dir: image_dir.to_path_buf(),
            accel: AccelChoice::Auto,
            qemu: "qemu-system-x86_64".to_string(),
            mode: Mode::Squeezy,
            // Each partition brings a vCPU: 4 + node 0's on a 2-core host already
            // oversubscribes it under TCG.
            partitions: 4,
            shared_mib: 512,
            block_mib: 2,
            guest_zeroing: None,
            memory_limit: None,
            budget_timeout: Duration::from_secs(60),
            resize_timeout: Duration::from_secs(30),
            idle_vm_timeout: Duration::from_secs(30),
            tcg_tb_mib: None,
            boot_timeout: Duration::from_secs(90),
            ready_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(2),
            ping_timeout: Duration::from_secs(10),
        }
    }

    /// An instance's partition: its memory limit rounded up to the block size.
    pub fn partition_bytes(&self, memory_limit_bytes: u64) -> u64 {
        let block = self.block_mib * MIB;
        memory_limit_bytes.max(1).div_ceil(block) * block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for m in [Mode::Squeezy, Mode::VirtioMem, Mode::Balloon] {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
        }
        assert!("hotplug".parse::<Mode>().is_err());
        assert!(Mode::Balloon.single_target() && !Mode::Squeezy.single_target());
    }

    #[test]
    fn partitions_are_limits_rounded_to_blocks() {
        let c = SharedConfig::new(Path::new("/s"), Path::new("/i"));
        assert_eq!(c.partition_bytes(256 * MIB), 256 * MIB);
        assert_eq!(c.partition_bytes((256 * MIB) + 1), 258 * MIB);
        assert_eq!(c.partition_bytes(0), 2 * MIB);
    }
}
