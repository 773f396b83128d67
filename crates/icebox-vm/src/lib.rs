//! QEMU microVM backends for icebox (docs/vm.md): `vm` runs one instance per VM, `vm-shared`
//! runs Squeezy's N:1 VMs, one guest NUMA node + virtio-mem device + vCPU per instance
//! partition. Both implement icebox-sandbox's `SandboxBackend`.
