//! The shape of an N:1 VM for each memory mode: its NUMA nodes, vCPUs, devices and where an
//! instance's partition is. Pure, so the command line can be checked without QEMU.

use super::config::Mode;
use crate::qemu::{Balloon, NumaNodeConfig, VirtioMem, VmConfig};
use icebox_core::units::MIB;

/// The guest's memory block size (x86-64 Linux), the unit it adds and removes memory in.
pub const LINUX_BLOCK_MIB: u64 = 128;

/// The sizes an N:1 VM is built from, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub mode: Mode,
    pub partitions: u32,
    pub partition_mib: u64,
    pub block_mib: u64,
    /// Node 0's boot memory (adjusted so no device region has its size, see [`Self::device_mib`]).
    pub shared_mib: u64,
    /// Whether the guest kernel zeroes pages it allocates (`init_on_alloc`, on in Debian's
    /// kernel). Unplugging isolates every page of a block through the page allocator, so
    /// with it on the guest zeroes memory it is about to hand back (Squeezy §2.2 measured
    /// 24% of virtio-mem's unplug latency; under TCG it is most of it). Squeezy leaves
    /// zeroing to the host, which gives plugged memory back as fresh zero pages.
    pub guest_zeroing: bool,
}

impl Layout {
    pub fn new(
        mode: Mode,
        partitions: u32,
        partition_mib: u64,
        block_mib: u64,
        shared_mib: u64,
    ) -> Layout {
        let mut layout = Layout {
            mode,
            partitions,
            partition_mib,
            block_mib,
            shared_mib,
            guest_zeroing: mode.default_guest_zeroing(),
        };
        // The host finds a partition's memory in QEMU's smaps by its region's size: boot
        // RAM must not share one with a device.
        while mode == Mode::Squeezy
            && (1..=partitions).any(|p| layout.device_mib(p) == layout.shared_mib)
        {
            layout.shared_mib += block_mib;
        }
        layout
    }

    /// `guest_zeroing` other than the mode's default (`SharedConfig::guest_zeroing`).
    pub fn with_guest_zeroing(mut self, zeroing: Option<bool>) -> Layout {
        if let Some(z) = zeroing {
            self.guest_zeroing = z;
        }
        self
    }

    /// Squeezy: the maximum size of partition `p`'s (1-based) virtio-mem device. Devices sit
    /// one after the other in guest physical memory and the guest adds memory in whole Linux
    /// memory blocks, so each is a multiple of the block size (a device starting mid-block
    /// loses that block). Each is a memory block larger than the one before so that its RAM
    /// region in QEMU's address space has a size of its own (QEMU's ramblock listing has no
    /// host address); only address space, never memory.
    pub fn device_mib(&self, p: u32) -> u64 {
        self.partition_mib.next_multiple_of(LINUX_BLOCK_MIB) + u64::from(p - 1) * LINUX_BLOCK_MIB
    }

    /// The QMP path of the virtio-mem device that partition `p` (1-based) is plugged
    /// through (the one device of a vanilla virtio-mem VM for every partition).
    pub fn device_path(&self, p: u32) -> String {
        match self.mode {
            Mode::Squeezy => format!("/machine/peripheral/vm{p}"),
            Mode::VirtioMem | Mode::Balloon => "/machine/peripheral/vm0".to_string(),
        }
    }

    /// The guest NUMA node an instance in partition `p` is bound to (Squeezy only).
    pub fn node_of(&self, p: u32) -> Option<u32> {
        (self.mode == Mode::Squeezy).then_some(p)
    }

    pub fn vcpus(&self) -> u32 {
        // The same compute in every mode: one vCPU per partition plus node 0's.
        self.partitions + 1
    }

    /// Guest RAM the balloon leaves the guest when `plugged_mib` is handed out.
    pub fn balloon_target_bytes(&self, plugged_bytes: u64) -> u64 {
        self.shared_mib * MIB + plugged_bytes
    }

    /// Fill in `config` (made by [`VmConfig::new`]) for this layout.
    pub fn apply(&self, config: &mut VmConfig) {
        config.vcpus = self.vcpus();
        if !self.guest_zeroing {
            // User pages are zeroed whatever this says (a page fault always gets a zeroed
            // page); only the hardening of kernel allocations goes.
            config.append = format!("{} init_on_alloc=0", config.append)
                .trim()
                .to_string();
        }
        match self.mode {
            Mode::Squeezy => {
                // Partition vCPUs run only what is bound to them: a process with the default
                // policy allocates on the node of the CPU it runs on, so the agent (and
                // anything it starts unbound) running there would leave pages in a partition
                // that its unplug then migrates. Isolated CPUs are no default placement.
                let isolated = format!(
                    "isolcpus={}",
                    if self.partitions == 1 {
                        "1".to_string()
                    } else {
                        format!("1-{}", self.partitions)
                    }
                );
                config.append = format!("{} {isolated}", config.append).trim().to_string();
                config.memory_mib = self.shared_mib;
                config.numa = std::iter::once(NumaNodeConfig {
                    memory_mib: self.shared_mib,
                    cpus: vec![0],
                    virtio_mem: None,
                })
                .chain((1..=self.partitions).map(|p| NumaNodeConfig {
                    memory_mib: 0,
                    // QEMU 7.2 leaves a node with neither CPUs nor boot memory out of ACPI.
                    cpus: vec![p],
                    virtio_mem: Some(VirtioMem {
                        max_mib: self.device_mib(p),
                        requested_mib: 0,
                        block_mib: self.block_mib,
                    }),
                }))
                .collect();
            }
            Mode::VirtioMem => {
                config.memory_mib = self.shared_mib;
                config.numa = vec![NumaNodeConfig {
                    memory_mib: self.shared_mib,
                    cpus: (0..self.vcpus()).collect(),
                    virtio_mem: Some(VirtioMem {
                        max_mib: (self.partition_mib * u64::from(self.partitions))
                            .next_multiple_of(LINUX_BLOCK_MIB),
                        requested_mib: 0,
                        block_mib: self.block_mib,
                    }),
                }];
            }
            Mode::Balloon => {
                config.memory_mib =
                    self.shared_mib + self.partition_mib * u64::from(self.partitions);
                config.numa = Vec::new();
                config.balloon = Some(Balloon {
                    free_page_reporting: false,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accel::Accel;

    fn config(layout: &Layout) -> String {
        let mut c = VmConfig {
            name: "t".into(),
            accel: Accel::Tcg,
            tcg_tb_mib: None,
            vcpus: 1,
            memory_mib: 1,
            memory_backend: crate::qemu::MemoryBackend::Ram,
            numa: Vec::new(),
            kernel: "/k".into(),
            initrd: "/i".into(),
            append: String::new(),
            rootfs: "/r".into(),
            agent_socket: "/d/a".into(),
            qmp_sockets: Vec::new(),
            console_log: None,
            balloon: None,
            incoming_defer: false,
            pidfile: None,
        };
        layout.apply(&mut c);
        c.args().join(" ")
    }

    #[test]
    fn squeezy_gives_each_partition_a_node_with_a_vcpu_and_a_device() {
        let l = Layout::new(Mode::Squeezy, 2, 256, 2, 512);
        let s = config(&l);
        assert!(s.contains("-smp 3 -m 512M,maxmem=1152M"), "{s}");
        assert!(s.contains("-numa node,nodeid=0,cpus=0,memdev=ram0"));
        assert!(s.contains("-numa node,nodeid=2,cpus=2 "));
        assert!(s.contains("init_on_alloc=0 isolcpus=1-2"), "{s}");
        assert!(s.contains("id=vmem1,size=256M"));
        assert!(s.contains("id=vmem2,size=384M"));
        assert!(s.contains("virtio-mem-pci,id=vm2,memdev=vmem2,node=2,requested-size=0M"));
        assert_eq!(l.device_path(2), "/machine/peripheral/vm2");
        assert_eq!(l.node_of(2), Some(2));
    }

    #[test]
    fn vanilla_virtio_mem_has_one_device_and_unbound_instances() {
        let l = Layout::new(Mode::VirtioMem, 3, 500, 2, 512);
        let s = config(&l);
        assert!(s.contains("-smp 4 -m 512M,maxmem=2048M"), "{s}");
        assert!(s.contains("-numa node,nodeid=0,cpus=0,cpus=1,cpus=2,cpus=3,memdev=ram0"));
        assert!(s.contains("virtio-mem-pci,id=vm0,memdev=vmem0,node=0,requested-size=0M"));
        assert_eq!(l.device_path(3), "/machine/peripheral/vm0");
        assert!(!s.contains("isolcpus"));
        assert!(
            !s.contains("init_on_alloc"),
            "vanilla keeps the kernel's zeroing: {s}"
        );
        assert_eq!(l.node_of(1), None);
        let l = l.with_guest_zeroing(Some(false));
        assert!(config(&l).contains("init_on_alloc=0"));
    }

    #[test]
    fn balloon_boots_with_room_for_every_partition() {
        let l = Layout::new(Mode::Balloon, 4, 512, 2, 512);
        let s = config(&l);
        assert!(s.contains("-smp 5 -m 2560M -machine q35"), "{s}");
        assert!(s.contains("virtio-balloon-pci"));
        assert!(!s.contains("virtio-mem"));
        assert_eq!(l.balloon_target_bytes(512 * MIB), 1024 * MIB);
    }

    #[test]
    fn boot_memory_never_has_a_device_region_size() {
        let l = Layout::new(Mode::Squeezy, 4, 384, 2, 512);
        assert_eq!(
            (1..=4).map(|p| l.device_mib(p)).collect::<Vec<_>>(),
            [384, 512, 640, 768]
        );
        assert_eq!(l.shared_mib, 514);
    }
}
