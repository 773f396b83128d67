//! The guest agent through a bare VM (no backend): hello, sessions that end and begin again
//! with the instances kept (what VM snapshots rely on), output buffered while nobody reads.

mod common;

use common::*;
use icebox_core::units::MIB;
use icebox_guest::protocol::{Event, StartRequest};
use icebox_guest::AgentClient;
use icebox_vm::{Vm, VmConfig, VmPaths};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn boot(dir: &std::path::Path, memory_mib: u64) -> Vm {
    let config = VmConfig::new("agent-test", accel().await, memory_mib, &image());
    Vm::boot(
        "qemu-system-x86_64",
        config,
        VmPaths::new(dir),
        Duration::from_secs(90),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn shell(id: &str, script: &str) -> StartRequest {
    StartRequest {
        instance: id.to_string(),
        argv: vec!["/usr/bin/python3".into(), "-c".into(), script.into()],
        env: Vec::new(),
        memory_limit_bytes: 64 * MIB,
        pids_max: 64,
        tmp_bytes: MIB,
        numa_node: None,
        wait_ready_ms: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_describes_the_guest_and_instances_outlive_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let vm = boot(dir.path(), 256).await;
    let hello = vm.agent.hello_info().clone();
    assert_eq!(hello.kernel, image().kernel_release());
    assert_eq!(hello.protocol, icebox_guest::protocol::PROTOCOL_VERSION);
    assert!(hello.memory_total_bytes > 128 * MIB && hello.memory_total_bytes <= 256 * MIB);
    assert_eq!(hello.numa_nodes.len(), 1);
    assert!(hello.instances.is_empty());

    // An instance that prints its uid, its private /tmp, then a line a second.
    let script = "import os, time, sys\nprint(os.getuid(), os.getgid(), os.access('/tmp', os.W_OK), os.access('/usr', os.W_OK), flush=True)\nopen('/tmp/x', 'w').write('ok')\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.2)\n";
    vm.agent.start(&shell("keep", script)).await.unwrap();
    let mut out = vm.agent.open_output("keep", 1).await.unwrap();
    let mut first = vec![0u8; 64];
    let n = out.read(&mut first).await.unwrap();
    let first = String::from_utf8_lossy(&first[..n]).to_string();
    assert!(first.starts_with("10000 10000 True False"), "{first}");

    // The host goes away: the agent keeps the instance; its output waits in the guest.
    vm.agent.close().await;
    assert!(vm.agent.is_closed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = AgentClient::connect(&vm.paths.agent_socket, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again.hello_info().instances, vec!["keep".to_string()]);
    let mut out = again.open_output("keep", 1).await.unwrap();
    let mut buffered = vec![0u8; 4096];
    let n = out.read(&mut buffered).await.unwrap();
    assert!(String::from_utf8_lossy(&buffered[..n]).contains("tick"));

    let stats = again.stats().await.unwrap();
    let keep = &stats.instances["keep"];
    assert!(
        keep.memory_current > 0 && keep.uss > 0 && keep.pss >= keep.uss,
        "{keep:?}"
    );
    assert!(stats.meminfo["MemTotal"] > 0 && stats.nodes.contains_key(&0));

    again.freeze("keep").await.unwrap();
    again.thaw("keep").await.unwrap();
    again.stop("keep").await.unwrap();
    again.stop("keep").await.unwrap();
    assert!(again.hello().await.unwrap().instances.is_empty());
    vm.shutdown(Duration::from_secs(2)).await;
    assert!(vm.qemu.exit_status().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exits_are_events_and_replayed_to_a_new_events_stream() {
    let dir = tempfile::tempdir().unwrap();
    let vm = boot(dir.path(), 256).await;
    let mut events = vm.agent.events().await.unwrap();
    vm.agent
        .start(&shell("three", "import sys; sys.exit(3)"))
        .await
        .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap();
    let exited = Event::Exited {
        instance: "three".into(),
        code: Some(3),
        signal: None,
        oom: false,
    };
    assert_eq!(ev, Some(exited.clone()));
    // Not stopped yet: a new stream learns of it too.
    let mut late = vm.agent.events().await.unwrap();
    assert_eq!(late.next().await, Some(exited));

    // Refusals are errors, not hangs.
    assert!(vm.agent.start(&shell("three", "pass")).await.is_err());
    assert!(vm.agent.open_connection("nobody").await.is_err());
    let mut bad = shell("../x", "pass");
    assert!(vm.agent.start(&bad).await.is_err());
    bad.instance = "noexec".into();
    bad.argv = vec!["/no/such/binary".into()];
    assert!(vm.agent.start(&bad).await.is_err());

    // A proxy connection is a plain byte pipe (the agent's readiness probe is the first
    // connection the server accepts).
    let echo = "import socket, os\nos.makedirs('/run/icebox/echo', exist_ok=True)\ns = socket.socket(socket.AF_UNIX)\ns.bind(os.environ['ICEBOX_PROXY_SOCKET'])\ns.listen()\nwhile True:\n    c, _ = s.accept()\n    d = c.recv(100)\n    if d:\n        c.sendall(d.upper())\n    c.close()\n";
    let mut req = shell("echo", echo);
    req.wait_ready_ms = Some(60_000);
    vm.agent.start(&req).await.unwrap();
    let mut conn = vm.agent.open_connection("echo").await.unwrap();
    conn.write_all(b"through the port").await.unwrap();
    conn.flush().await.unwrap();
    let mut got = vec![0u8; 16];
    conn.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"THROUGH THE PORT");
    vm.shutdown(Duration::from_secs(2)).await;
}

/// The first line an instance prints.
async fn first_line(agent: &AgentClient, id: &str) -> String {
    let mut out = agent.open_output(id, 1).await.unwrap();
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    while !line.contains(&b'\n') {
        let n = tokio::time::timeout(Duration::from_secs(60), out.read(&mut buf))
            .await
            .expect("a line within a minute")
            .unwrap();
        assert!(
            n > 0,
            "{id} closed its output: {:?}",
            String::from_utf8_lossy(&line)
        );
        line.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&line).to_string();
    line.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_of_a_vm_have_their_own_uids_and_per_user_limits() {
    let dir = tempfile::tempdir().unwrap();
    let vm = boot(dir.path(), 256).await;
    // Holds inotify instances until EMFILE (the per-uid limit), then waits.
    let hog = "import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\nn = 0\nwhile n < 100000 and libc.inotify_init1(0) >= 0:\n    n += 1\nprint(os.getuid(), os.getgid(), n, ctypes.get_errno(), flush=True)\ntime.sleep(3600)\n";
    let probe = "import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.inotify_init1(0)\nprint(os.getuid(), os.getgid(), 'ok' if fd >= 0 else ctypes.get_errno(), flush=True)\ntime.sleep(3600)\n";
    vm.agent.start(&shell("hog", hog)).await.unwrap();
    let hogged = first_line(&vm.agent, "hog").await;
    let f: Vec<&str> = hogged.split(' ').collect();
    assert_eq!(
        (f[0], f[1], f[3]),
        ("10000", "10000", "24"),
        "EMFILE: {hogged}"
    );
    vm.agent.start(&shell("probe", probe)).await.unwrap();
    assert_eq!(first_line(&vm.agent, "probe").await, "10001 10001 ok");

    // A stopped instance's uid is the next one's (its cgroup is empty once stop returns).
    vm.agent.stop("hog").await.unwrap();
    vm.agent.start(&shell("next", probe)).await.unwrap();
    assert_eq!(first_line(&vm.agent, "next").await, "10000 10000 ok");
    vm.shutdown(Duration::from_secs(2)).await;
}

/// The building block of N:1 VMs: a second guest NUMA node with its own vCPU and a
/// virtio-mem device, plugged over QMP, an instance bound to it, unplugged after it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_bound_to_a_hot_plugged_numa_node() {
    use icebox_vm::qemu::{NumaNodeConfig, VirtioMem};
    let dir = tempfile::tempdir().unwrap();
    let mut config = VmConfig::new("numa-test", accel().await, 256, &image());
    config.vcpus = 2;
    config.numa = vec![
        NumaNodeConfig {
            memory_mib: 256,
            cpus: vec![0],
            virtio_mem: None,
        },
        NumaNodeConfig {
            memory_mib: 0,
            cpus: vec![1],
            virtio_mem: Some(VirtioMem {
                max_mib: 512,
                requested_mib: 0,
                block_mib: 2,
            }),
        },
    ];
    let vm = Vm::boot(
        "qemu-system-x86_64",
        config,
        VmPaths::new(dir.path()),
        Duration::from_secs(90),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let nodes = &vm.agent.hello_info().numa_nodes;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_eq!(nodes[1].cpus, vec![1]);
    assert_eq!(nodes[1].memory_total_bytes, 0);

    vm.qmp
        .qom_set(
            "/machine/peripheral/vm1",
            "requested-size",
            serde_json::json!(256 * MIB),
        )
        .await
        .unwrap();
    let mut plugged = 0;
    for _ in 0..300 {
        plugged = vm.agent.stats().await.unwrap().nodes[&1]["MemTotal"];
        if plugged >= 200 * MIB {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(plugged >= 200 * MIB, "node 1 has {plugged} bytes");

    let hog = "import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('held', flush=True)\ntime.sleep(600)\n";
    let mut req = shell("bound", hog);
    req.memory_limit_bytes = 200 * MIB;
    req.numa_node = Some(1);
    vm.agent.start(&req).await.unwrap();
    let mut out = vm.agent.open_output("bound", 1).await.unwrap();
    let mut line = vec![0u8; 16];
    let n = out.read(&mut line).await.unwrap();
    assert_eq!(&line[..n], b"held\n");
    let stats = vm.agent.stats().await.unwrap();
    let node1_used = stats.nodes[&1]["MemUsed"];
    assert!(node1_used >= 64 * MIB, "node 1 uses {node1_used} bytes");

    vm.agent.stop("bound").await.unwrap();
    vm.qmp
        .qom_set(
            "/machine/peripheral/vm1",
            "requested-size",
            serde_json::json!(0),
        )
        .await
        .unwrap();
    let mut size = u64::MAX;
    for _ in 0..600 {
        size = vm
            .qmp
            .qom_get("/machine/peripheral/vm1", "size")
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        if size == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        size, 0,
        "the partition is unplugged once its instance is gone"
    );
    vm.shutdown(Duration::from_secs(2)).await;
}
