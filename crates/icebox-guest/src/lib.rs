//! The guest agent of icebox's microVMs and the host side of its protocol: one virtio-serial
//! port carries multiplexed streams (control, connections to an instance's proxy socket, its
//! output, lifecycle events). See docs/vm.md.
