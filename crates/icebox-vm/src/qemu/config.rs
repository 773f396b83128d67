//! QEMU's command line for an icebox VM, built from a plain description so the 1:1 backend,
//! N:1 VMs and snapshot restores share one builder.

use crate::accel::Accel;
use std::path::PathBuf;

/// Guest kernel command line every icebox VM boots with: the serial console, a panic ends
/// QEMU at once (with -no-reboot), hot-plugged memory goes to ZONE_MOVABLE (virtio-mem can
/// take it back), no boot chatter on the slow emulated UART.
pub const BASE_CMDLINE: &str = "console=ttyS0 panic=-1 memhp_default_state=online_movable quiet";

/// Where guest RAM lives on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryBackend {
    /// Anonymous host memory (QEMU's default).
    Ram,
    /// A file mapped shared (snapshot source: the file is the RAM image) or private (restore:
    /// pages come from the file copy-on-write). With several NUMA nodes node N uses
    /// `<path>.node<N>`.
    File { path: PathBuf, share: bool },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtioMem {
    /// Largest size the device can grow to.
    pub max_mib: u64,
    pub requested_mib: u64,
    pub block_mib: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNodeConfig {
    /// Boot memory of the node (may be 0 when it has a virtio-mem device).
    pub memory_mib: u64,
    /// vCPUs of the node (QEMU 7.2 drops a node with neither CPUs nor boot memory from ACPI).
    pub cpus: Vec<u32>,
    pub virtio_mem: Option<VirtioMem>,
}

#[derive(Debug, Clone)]
pub struct VmConfig {
    pub name: String,
    pub accel: Accel,
    /// TCG's translation cache in MiB (QEMU's default is 1 GiB, filled as guest code is
    /// translated: it is most of an idle TCG VM's host memory). Ignored under KVM.
    pub tcg_tb_mib: Option<u64>,
    pub vcpus: u32,
    /// Boot memory; with `numa` the nodes' memory must add up to it.
    pub memory_mib: u64,
    pub memory_backend: MemoryBackend,
    pub numa: Vec<NumaNodeConfig>,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Extra kernel parameters after [`BASE_CMDLINE`].
    pub append: String,
    pub rootfs: PathBuf,
    /// The virtio-serial port `icebox.0`'s chardev socket (QEMU listens).
    pub agent_socket: PathBuf,
    /// One QMP monitor per socket (QEMU listens on each).
    pub qmp_sockets: Vec<PathBuf>,
    /// The guest's serial console.
    pub console_log: Option<PathBuf>,
    pub balloon: Option<Balloon>,
    /// Wait for `migrate-incoming` instead of booting (snapshot restore).
    pub incoming_defer: bool,
    pub pidfile: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balloon {
    pub free_page_reporting: bool,
}

impl VmConfig {
    /// A one-node VM with the defaults icebox uses.
    pub fn new(name: &str, accel: Accel, memory_mib: u64, image: &crate::GuestImage) -> VmConfig {
        VmConfig {
            name: name.to_string(),
            accel,
            tcg_tb_mib: None,
            vcpus: 1,
            memory_mib,
            memory_backend: MemoryBackend::Ram,
            numa: Vec::new(),
            kernel: image.kernel.clone(),
            initrd: image.initrd.clone(),
            append: String::new(),
            rootfs: image.rootfs.clone(),
            agent_socket: PathBuf::new(),
            qmp_sockets: Vec::new(),
            console_log: None,
            balloon: None,
            incoming_defer: false,
            pidfile: None,
        }
    }

    fn hotplug_mib(&self) -> u64 {
        self.numa
            .iter()
            .filter_map(|n| n.virtio_mem.as_ref().map(|v| v.max_mib))
            .sum()
    }

    fn backend_object(&self, id: &str, size_mib: u64, node: Option<usize>) -> String {
        match &self.memory_backend {
            MemoryBackend::Ram => format!("memory-backend-ram,id={id},size={size_mib}M"),
            MemoryBackend::File { path, share } => {
                let path = match node {
                    Some(n) if self.numa.len() > 1 => format!("{}.node{n}", path.display()),
                    _ => path.display().to_string(),
                };
                let share = if *share { "on" } else { "off" };
                format!(
                    "memory-backend-file,id={id},size={size_mib}M,mem-path={path},share={share}"
                )
            }
        }
    }

    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |parts: &[&str]| a.extend(parts.iter().map(|s| s.to_string()));
        push(&["-name", &format!("{},debug-threads=on", self.name)]);
        push(&[
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ]);
        push(&[
            "-accel",
            self.accel.qemu_arg(),
            "-cpu",
            self.accel.cpu_model(),
        ]);
        push(&["-smp", &self.vcpus.to_string()]);
        let hotplug = self.hotplug_mib();
        let mem = if hotplug > 0 {
            format!("{}M,maxmem={}M", self.memory_mib, self.memory_mib + hotplug)
        } else {
            format!("{}M", self.memory_mib)
        };
        push(&["-m", &mem]);
        if self.numa.is_empty() {
            if self.memory_backend != MemoryBackend::Ram {
                push(&[
                    "-object",
                    &self.backend_object("ram0", self.memory_mib, None),
                ]);
                push(&["-machine", "q35,memory-backend=ram0"]);
            } else {
                push(&["-machine", "q35"]);
            }
        } else {
            push(&["-machine", "q35"]);
            for (n, node) in self.numa.iter().enumerate() {
                let cpus = node
                    .cpus
                    .iter()
                    .map(|c| format!("cpus={c}"))
                    .collect::<Vec<_>>()
                    .join(",");
                let cpus = if cpus.is_empty() {
                    String::new()
                } else {
                    format!(",{cpus}")
                };
                if node.memory_mib > 0 {
                    push(&[
                        "-object",
                        &self.backend_object(&format!("ram{n}"), node.memory_mib, Some(n)),
                    ]);
                    push(&["-numa", &format!("node,nodeid={n}{cpus},memdev=ram{n}")]);
                } else {
                    push(&["-numa", &format!("node,nodeid={n}{cpus}")]);
                }
            }
        }
        push(&["-kernel", &self.kernel.display().to_string()]);
        push(&["-initrd", &self.initrd.display().to_string()]);
        let append = format!("{BASE_CMDLINE} {}", self.append);
        push(&["-append", append.trim_end()]);
        push(&[
            "-drive",
            &format!(
                "file={},if=none,id=rootfs,format=raw,readonly=on",
                self.rootfs.display()
            ),
            "-device",
            "virtio-blk-pci,drive=rootfs",
        ]);
        push(&[
            "-device",
            "virtio-serial-pci,id=vser0",
            "-chardev",
            &format!(
                "socket,id=agent,path={},server=on,wait=off",
                self.agent_socket.display()
            ),
            "-device",
            &format!(
                "virtserialport,bus=vser0.0,chardev=agent,name={}",
                icebox_guest::protocol::PORT_NAME
            ),
        ]);
        for (i, qmp) in self.qmp_sockets.iter().enumerate() {
            push(&[
                "-chardev",
                &format!("socket,id=qmp{i},path={},server=on,wait=off", qmp.display()),
                "-mon",
                &format!("chardev=qmp{i},mode=control"),
            ]);
        }
        match &self.console_log {
            Some(log) => push(&["-serial", &format!("file:{}", log.display())]),
            None => push(&["-serial", "null"]),
        }
        for (n, node) in self.numa.iter().enumerate() {
            if let Some(v) = &node.virtio_mem {
                push(&[
                    "-object",
                    &format!("memory-backend-ram,id=vmem{n},size={}M", v.max_mib),
                ]);
                push(&[
                    "-device",
                    &format!(
                        "virtio-mem-pci,id=vm{n},memdev=vmem{n},node={n},requested-size={}M,block-size={}M",
                        v.requested_mib, v.block_mib
                    ),
                ]);
            }
        }
        if let Some(b) = self.balloon {
            let fpr = if b.free_page_reporting {
                ",free-page-reporting=on"
            } else {
                ""
            };
            push(&["-device", &format!("virtio-balloon-pci,id=balloon0{fpr}")]);
        }
        if self.incoming_defer {
            push(&["-incoming", "defer"]);
        }
        if let Some(p) = &self.pidfile {
            push(&["-pidfile", &p.display().to_string()]);
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> VmConfig {
        VmConfig {
            name: "t".into(),
            accel: Accel::Tcg,
            tcg_tb_mib: None,
            vcpus: 2,
            memory_mib: 512,
            memory_backend: MemoryBackend::Ram,
            numa: Vec::new(),
            kernel: "/k".into(),
            initrd: "/i".into(),
            append: "x=1".into(),
            rootfs: "/r".into(),
            agent_socket: "/d/agent.sock".into(),
            qmp_sockets: vec!["/d/qmp.sock".into()],
            console_log: None,
            balloon: None,
            incoming_defer: false,
            pidfile: None,
        }
    }

    fn joined(c: &VmConfig) -> String {
        c.args().join(" ")
    }

    #[test]
    fn a_plain_vm_boots_the_image_read_only_with_the_agent_port() {
        let s = joined(&base());
        assert!(s.contains("-accel tcg,thread=multi -cpu max -smp 2 -m 512M -machine q35"));
        assert!(s.contains("file=/r,if=none,id=rootfs,format=raw,readonly=on"));
        assert!(s.contains("socket,id=agent,path=/d/agent.sock,server=on,wait=off"));
        assert!(s.contains("name=icebox.0"));
        assert!(s.contains(&format!("-append {BASE_CMDLINE} x=1")));
        assert!(!s.contains("-incoming"));
    }

    #[test]
    fn numa_nodes_get_their_cpus_and_virtio_mem_devices() {
        let mut c = base();
        c.numa = vec![
            NumaNodeConfig {
                memory_mib: 512,
                cpus: vec![0],
                virtio_mem: None,
            },
            NumaNodeConfig {
                memory_mib: 0,
                cpus: vec![1],
                virtio_mem: Some(VirtioMem {
                    max_mib: 1024,
                    requested_mib: 0,
                    block_mib: 2,
                }),
            },
        ];
        let s = joined(&c);
        assert!(s.contains("-m 512M,maxmem=1536M"));
        assert!(s.contains("-numa node,nodeid=0,cpus=0,memdev=ram0"));
        assert!(s.contains("-numa node,nodeid=1,cpus=1 "));
        assert!(
            s.contains("virtio-mem-pci,id=vm1,memdev=vmem1,node=1,requested-size=0M,block-size=2M")
        );
    }

    #[test]
    fn file_backed_ram_for_snapshots() {
        let mut c = base();
        c.memory_backend = MemoryBackend::File {
            path: "/s/ram".into(),
            share: false,
        };
        c.incoming_defer = true;
        let s = joined(&c);
        assert!(s.contains("memory-backend-file,id=ram0,size=512M,mem-path=/s/ram,share=off"));
        assert!(s.contains("-machine q35,memory-backend=ram0"));
        assert!(s.ends_with("-incoming defer"));
    }
}
