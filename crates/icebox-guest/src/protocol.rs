//! The wire format between the host and the guest agent (docs/vm.md, "The agent and its
//! protocol"). Every yamux stream the host opens starts with one [`Open`] JSON line; the agent
//! answers with one [`Ack`] line, after which the stream carries what the op says.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Agent version reported by `hello`: bump when the protocol changes incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;

/// Name of the virtio-serial port the agent listens on.
pub const PORT_NAME: &str = "icebox.0";

/// Where an instance's proxy socket is in the guest.
pub fn guest_socket_path(instance: &str) -> String {
    format!("/run/icebox/{instance}/proxy.sock")
}

/// Longest header or control line accepted (a `start` carries argv and env).
pub const MAX_LINE: usize = 1 << 20;

/// First line of every stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Open {
    /// Requests and replies, newline-delimited JSON.
    Control,
    /// A byte pipe to the instance's proxy socket.
    Connect { instance: String },
    /// The instance's stdout (1) or stderr (2).
    Output { instance: String, fd: u8 },
    /// Lifecycle events, JSON lines.
    Events,
}

/// The agent's answer to an [`Open`] line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A control request: `{"id":N,"cmd":"...",...args}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub command: Command,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    Hello,
    Ping,
    /// Set the guest's wall clock (after a restore or a long pause it is stale).
    SetTime {
        unix_nanos: u64,
    },
    Start(StartRequest),
    Stop {
        instance: String,
    },
    Freeze {
        instance: String,
    },
    Thaw {
        instance: String,
    },
    Stats,
}

/// A control reply: `{"id":N,"ok":true,"result":...}` or `{"id":N,"ok":false,"error":"..."}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    pub id: u64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRequest {
    pub instance: String,
    pub argv: Vec<String>,
    /// The runtime's environment; the agent adds `ICEBOX_PROXY_SOCKET`.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub memory_limit_bytes: u64,
    pub pids_max: u64,
    /// Size of the instance's private /tmp (a tmpfs in its own mount namespace).
    pub tmp_bytes: u64,
    /// Bind the instance to this guest NUMA node (memory and CPUs) with numactl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Answer only once the proxy accepts on its socket (or fail if it exits first).
    #[serde(default)]
    pub wait_ready_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartReply {
    /// Guest pid of the runtime process.
    pub pid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub memory_total_bytes: u64,
    pub memory_free_bytes: u64,
    pub cpus: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub agent_version: String,
    pub protocol: u32,
    /// `uname -r` of the guest kernel.
    pub kernel: String,
    pub memory_total_bytes: u64,
    pub cpus: u32,
    pub numa_nodes: Vec<NumaNode>,
    /// Instances the agent runs now (a new session after a restore finds them).
    pub instances: Vec<String>,
    pub uptime_ms: u64,
}

/// Memory of one instance as the guest sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceStats {
    pub uss: u64,
    pub pss: u64,
    pub rss: u64,
    /// The instance cgroup's memory.current.
    pub memory_current: u64,
    pub memory_peak: u64,
    /// memory.events `oom_kill`.
    pub oom_kills: u64,
    pub pids: Vec<u32>,
    pub exited: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// /proc/meminfo, in bytes (fields given in kB are converted).
    pub meminfo: BTreeMap<String, u64>,
    /// /sys/devices/system/node/nodeN/meminfo per node, in bytes.
    pub nodes: BTreeMap<u32, BTreeMap<String, u64>>,
    /// /proc/vmstat counters about page migration and compaction.
    pub vmstat: BTreeMap<String, u64>,
    pub instances: BTreeMap<String, InstanceStats>,
}

/// A line of the events stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The instance's runtime process exited. `oom` is true when the guest kernel OOM-killed a
    /// process of its cgroup.
    Exited {
        instance: String,
        code: Option<i32>,
        signal: Option<i32>,
        oom: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn open_lines_are_the_documented_json() {
        assert_eq!(
            serde_json::to_value(Open::Connect {
                instance: "a1".into()
            })
            .unwrap(),
            json!({"op":"connect","instance":"a1"})
        );
        let o: Open = serde_json::from_str(r#"{"op":"output","instance":"x","fd":2}"#).unwrap();
        assert_eq!(
            o,
            Open::Output {
                instance: "x".into(),
                fd: 2
            }
        );
        assert_eq!(
            serde_json::from_str::<Open>(r#"{"op":"control"}"#).unwrap(),
            Open::Control
        );
    }

    #[test]
    fn requests_flatten_the_command() {
        let r = Request {
            id: 7,
            command: Command::Stop {
                instance: "i".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"id":7,"cmd":"stop","instance":"i"})
        );
        let r: Request =
            serde_json::from_str(r#"{"id":1,"cmd":"set_time","unix_nanos":5}"#).unwrap();
        assert!(matches!(r.command, Command::SetTime { unix_nanos: 5 }));
        let e = Event::Exited {
            instance: "i".into(),
            code: None,
            signal: Some(9),
            oom: true,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"event":"exited","instance":"i","code":null,"signal":9,"oom":true})
        );
    }
}
