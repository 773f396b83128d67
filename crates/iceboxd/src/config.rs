//! Daemon flags; every flag has an ICEBOX_* environment equivalent.

use crate::pool::backends::Isolation;
use clap::Parser;
use icebox_core::units::MIB;
use icebox_core::{ChargeMode, RestoreMode};
use icebox_sandbox::process::IsolationMode;
use std::path::PathBuf;
use std::time::Duration;

/// Fewest open files a runtime works with (a JVM proxy holds ~40 at rest; an action needs
/// room for its own files and sockets).
pub const MIN_NOFILE: u64 = 64;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "iceboxd",
    version,
    about = "icebox node daemon: keeps many function instances warm in little memory"
)]
pub struct Config {
    /// Address to serve the API on: HOST:PORT, or unix:PATH for a UNIX socket.
    #[arg(long, env = "ICEBOX_LISTEN", default_value = "127.0.0.1:8740")]
    pub listen: String,

    /// Directory for the registry (SQLite), the API key and instance state.
    #[arg(long, env = "ICEBOX_STATE_DIR", default_value = "./var")]
    pub state_dir: PathBuf,

    /// Start with an empty registry even though this state directory had one (its icebox.db
    /// is missing or is another directory's); without it, such a start is refused.
    #[arg(long, env = "ICEBOX_INIT_REGISTRY")]
    pub init_registry: bool,

    /// Memory budget of the keep-alive pool (idle and frozen instances), e.g. 2GiB, 512MiB.
    #[arg(long, env = "ICEBOX_POOL_MEMORY", default_value = "2GiB", value_parser = parse_size)]
    pub pool_memory: u64,

    /// What an idle instance is charged against the budget: its measured uss or pss, or its
    /// declared memory limit.
    #[arg(long, env = "ICEBOX_POOL_CHARGE", default_value = "uss")]
    pub pool_charge: ChargeMode,

    /// How long an idle instance is kept alive.
    #[arg(long, env = "ICEBOX_KEEP_ALIVE", default_value = "10m", value_parser = humantime::parse_duration)]
    pub keep_alive: Duration,

    /// How long each idle instance is kept: `fixed` (`--keep-alive` for every action) or
    /// `hybrid` (Shahrad et al., ATC '20: each action's keep-alive and pre-warm window from its
    /// histogram of idle times; `--keep-alive` for actions with too little history).
    #[arg(long, env = "ICEBOX_KEEP_ALIVE_POLICY", default_value = "fixed", value_parser = ["fixed", "hybrid"])]
    pub keep_alive_policy: String,

    /// Which memory techniques apply to each action: `default` (each technique's own flags and
    /// annotations, as before) or `auto` (the flags say which are available; each action gets
    /// those its measurements call for: docs/techniques.md). An action's `icebox.techniques`
    /// annotation (a list of names) overrides both.
    #[arg(long, env = "ICEBOX_TECHNIQUES", default_value = "default", value_parser = parse_techniques())]
    pub techniques: crate::pool::TechniquesMode,

    /// The hybrid policy's histogram bin (the paper's 1 minute); the histogram spans 240 bins.
    #[arg(long, env = "ICEBOX_HYBRID_BIN", default_value = "1m", value_parser = humantime::parse_duration)]
    pub hybrid_bin: Duration,

    /// How long an idle instance stays runnable before it is frozen.
    #[arg(long, env = "ICEBOX_PAUSE_GRACE", default_value = "50ms", value_parser = humantime::parse_duration)]
    pub pause_grace: Duration,

    /// Most instances (busy or idle) on this node.
    #[arg(long, env = "ICEBOX_MAX_INSTANCES", default_value_t = 64)]
    pub max_instances: usize,

    /// Invocations that may wait for capacity; beyond it, 429 with Retry-After.
    #[arg(long, env = "ICEBOX_QUEUE_SIZE", default_value_t = 256)]
    pub queue_size: usize,

    /// API key `uuid:key` (default: <state-dir>/auth, generated on first start).
    #[arg(long, env = "ICEBOX_AUTH", hide_env_values = true)]
    pub auth: Option<String>,

    /// The namespace the key owns (what `_` means).
    #[arg(long, env = "ICEBOX_NAMESPACE", default_value = "guest")]
    pub namespace: String,

    /// Directory with runtimes/<lang>/runtime.json (default: found next to the binary or in ./runtimes).
    #[arg(long, env = "ICEBOX_RUNTIMES_DIR")]
    pub runtimes_dir: Option<PathBuf>,

    /// Sandbox isolation of actions that do not choose one (annotation `icebox.isolation`):
    /// auto (crun when root, else none), crun (namespaces + cgroups, needs root), none (plain
    /// processes), vm (one microVM per instance) or vm-shared (Squeezy's N:1 VMs). Process
    /// isolation stays available to actions that ask for it.
    #[arg(long, env = "ICEBOX_ISOLATION", default_value = "auto")]
    pub isolation: NodeIsolation,

    /// Uids crun instances run as, FIRST-LAST: each instance gets the lowest free one, so
    /// per-user kernel limits (inotify instances, message-queue bytes, RLIMIT_NPROC) are its
    /// own. A uid comes back once the instance's processes are gone; a snapshot keeps its
    /// template's uid for its restored instances. Needs as many uids as live instances plus
    /// snapshots, and no other user of them on the host.
    #[arg(long, env = "ICEBOX_UID_RANGE", default_value = "100000-165535")]
    pub uid_range: icebox_sandbox::process::UidRange,

    /// VM backends (vm, vm-shared), for actions whose `icebox.isolation` asks for one: auto
    /// (when this node can run VMs: root, QEMU, the guest image), on (the daemon refuses to
    /// start without them) or off. A node whose --isolation is vm or vm-shared needs them.
    #[arg(long, env = "ICEBOX_VM_BACKENDS", default_value = "auto")]
    pub vm_backends: VmBackends,

    /// The guest image scripts/guest/build.sh writes (default: `.tools/guest` next to the
    /// runtimes directory).
    #[arg(long, env = "ICEBOX_VM_IMAGE")]
    pub vm_image: Option<PathBuf>,

    /// VM accelerator: auto (KVM where a probe VM boots with it, else TCG), kvm or tcg.
    #[arg(long, env = "ICEBOX_VM_ACCEL", default_value = "auto")]
    pub vm_accel: icebox_vm::AccelChoice,

    /// vm-shared (Squeezy's N:1 VMs): partitions per VM, i.e. instances of one action at
    /// once; each brings a vCPU.
    #[arg(long, env = "ICEBOX_VM_PARTITIONS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub vm_partitions: u32,

    /// vm-shared: host memory all N:1 VMs may have plugged into partitions (e.g. 4GiB;
    /// default: no limit). A start past it waits for idle instances' partitions, evicted to
    /// make room, to be unplugged.
    #[arg(long, env = "ICEBOX_VM_MEMORY", value_parser = parse_size)]
    pub vm_memory: Option<u64>,

    /// vm-shared: how partitions get and give back memory: squeezy (a virtio-mem device and
    /// NUMA node per partition), virtio-mem (one device for the VM, instances unbound) or
    /// balloon (the paper's baselines).
    #[arg(long, env = "ICEBOX_VM_SHARED_MODE", default_value = "squeezy")]
    pub vm_shared_mode: icebox_vm::shared::Mode,

    /// Snapshots: on (actions with the `icebox.snapshot` annotation are snapshotted after
    /// /init and restored from it) or off (never).
    #[arg(long, env = "ICEBOX_SNAPSHOTS", default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub snapshots: bool,

    /// The CRIU binary for process snapshots (default: `.tools/criu/criu` beside the runtimes
    /// directory, where setup builds it, then `criu` on PATH; at least 4.1).
    #[arg(long, env = "ICEBOX_CRIU")]
    pub criu: Option<PathBuf>,

    /// How an instance restored from a snapshot gets its memory: faasnap (the recorded loading
    /// set prefetched while it runs), reap (the recorded working set loaded before it runs),
    /// lazy (on demand only) or eager (everything before it runs). An action's
    /// `icebox.snapshot_restore` annotation overrides it.
    #[arg(long, env = "ICEBOX_SNAPSHOT_RESTORE", default_value = "faasnap", value_parser = parse_restore_mode)]
    pub snapshot_restore: RestoreMode,

    /// Process limit per instance (stops fork bombs).
    #[arg(long, env = "ICEBOX_PIDS_MAX", default_value_t = 256)]
    pub pids_max: u64,

    /// Open files per instance process (RLIMIT_NOFILE): auto chooses the most, up to
    /// OpenWhisk's 1024, with which --max-instances instances of --pids-max processes stay
    /// within half of the host's fs.file-max; a number must fit that bound too, or the daemon
    /// refuses to start.
    #[arg(long, env = "ICEBOX_INSTANCE_NOFILE", default_value = "auto")]
    pub instance_nofile: InstanceNofile,

    /// Size of each instance's private /tmp.
    #[arg(long, env = "ICEBOX_TMP_SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub tmp_size: u64,

    /// How often instance memory is measured.
    #[arg(long, env = "ICEBOX_SAMPLE_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,

    /// Activations kept in the registry (the oldest are pruned).
    #[arg(long, env = "ICEBOX_ACTIVATION_RETENTION", default_value_t = 100_000)]
    pub activation_retention: usize,

    /// Activations older than this are pruned.
    #[arg(long, env = "ICEBOX_ACTIVATION_MAX_AGE", default_value = "7d", value_parser = humantime::parse_duration)]
    pub activation_max_age: Duration,

    /// Byte budget of the registry's files (icebox.db and its WAL). Past it the oldest
    /// records' logs are dropped first, then the oldest records.
    #[arg(long, env = "ICEBOX_REGISTRY_MAX_BYTES", default_value = "1GiB", value_parser = parse_registry_budget)]
    pub registry_max_bytes: u64,

    /// Largest invocation body (the parameters of an invoke) and largest result an action may
    /// give (OpenWhisk's payload limit; a result over it is a developer error).
    #[arg(long, env = "ICEBOX_MAX_PAYLOAD", default_value = "5MiB", value_parser = parse_size)]
    pub max_payload: u64,

    /// Largest action code, counted decoded (the zip or jar itself, not its base64; OpenWhisk's
    /// codeSize limit).
    #[arg(long, env = "ICEBOX_MAX_CODE_SIZE", default_value = "48MiB", value_parser = parse_size)]
    pub max_code_size: u64,

    /// Largest request body of any request (OpenWhisk's 50 MB). Without it: 50MiB, or more
    /// when an action of --max-code-size needs more as base64 (65MiB for the default 48MiB).
    #[arg(long, env = "ICEBOX_MAX_BODY", value_parser = parse_size)]
    pub max_body: Option<u64>,

    /// Runtimes started ahead of demand, per kind (KIND=COUNT,…, or `none`): a cold start of
    /// an action of that kind then only pays /init.
    #[arg(long, env = "ICEBOX_PREWARM", default_value = "python:3=1,nodejs:20=1,java:17=1", value_parser = parse_prewarm_flag)]
    pub prewarm: PrewarmSpec,

    /// How frozen garbage of idle instances is handled: vanilla (not at all), eager (a full GC
    /// inside the runtime after every activation), desiccant (reclaim idle frozen instances
    /// when the keep-alive pool fills up). An action's `icebox.reclaim` annotation overrides it.
    #[arg(long, env = "ICEBOX_RECLAIM_MODE", default_value = "desiccant")]
    pub reclaim_mode: icebox_policy::ReclaimMode,

    /// Desiccant: an instance becomes a reclaim candidate after being frozen this long.
    #[arg(long, env = "ICEBOX_RECLAIM_FROZEN_AFTER", default_value = "10s", value_parser = humantime::parse_duration)]
    pub reclaim_frozen_after: Duration,

    /// Desiccant: reclaim threshold (fraction of the budget) right after a budget eviction.
    #[arg(long, env = "ICEBOX_RECLAIM_THRESHOLD_MIN", default_value_t = 0.6)]
    pub reclaim_threshold_min: f64,

    /// Desiccant: highest reclaim threshold, reached by +5% every 2 s without evictions.
    #[arg(long, env = "ICEBOX_RECLAIM_THRESHOLD_MAX", default_value_t = 0.9)]
    pub reclaim_threshold_max: f64,

    /// Desiccant's library unmapping (§4.6) after a reclaim: keep-cached (page out the
    /// instance's private library pages, then read them back into the page cache, unmapped:
    /// its USS drops and its next activation faults them in from memory), evict (page out and
    /// leave them to be re-read from disk), or off.
    #[arg(long, env = "ICEBOX_LIBRARY_PAGEOUT", default_value = "keep-cached")]
    pub library_pageout: icebox_policy::LibraryPageout,

    /// Where offloaded memory goes: none, swap (the swap the operator configured),
    /// zram:SIZE (iceboxd creates its own compressed-RAM swap device, lz4, highest priority),
    /// swapfile:PATH:SIZE (iceboxd creates a swap file at PATH, with the kernel's zswap in front
    /// of it where the kernel has zswap: offloaded pages leave the node's RAM), or
    /// zram:SIZE+swapfile:PATH:SIZE (zram first, the file once zram is full). What iceboxd
    /// creates it removes at exit, or at the next start after a crash; needs root.
    #[arg(long, env = "ICEBOX_OFFLOAD_POOL", default_value = "none")]
    pub offload_pool: icebox_mem::PoolSpec,

    /// How idle instances' memory is offloaded to the pool: none, tmo (a small fraction every
    /// 6 s through the kernel's LRU, backing off under memory pressure) or faasmem (segments,
    /// hot pool, semi-warm). An action's `icebox.offload` annotation overrides it.
    #[arg(long, env = "ICEBOX_OFFLOAD", default_value = "none")]
    pub offload: icebox_policy::OffloadMode,

    /// FaaSMem semi-warm rate once an idle instance has waited past its action's p99 reuse
    /// interval: off, a percentage of its memory per second (1%/s) or an amount (1MiB/s).
    #[arg(long, env = "ICEBOX_SEMIWARM", default_value = "1%/s")]
    pub semiwarm: icebox_policy::SemiWarm,

    /// FaaSMem: how long an idle instance stays fully warm before semi-warm begins while its
    /// action has too few reuses for a p99 of its own.
    #[arg(long, env = "ICEBOX_SEMIWARM_START", default_value = "60s", value_parser = humantime::parse_duration)]
    pub semiwarm_start: Duration,

    /// Node-wide cap on semi-warm offload bandwidth per second (0 = none); every instance
    /// slows down by the same factor when it binds.
    #[arg(long, env = "ICEBOX_OFFLOAD_BANDWIDTH", default_value = "0", value_parser = parse_rate)]
    pub offload_bandwidth: u64,

    /// FaaSMem: pages per probe group (hot/cold detection: one page of each group is
    /// offloaded and watched; the group follows its probe).
    #[arg(long, env = "ICEBOX_FAASMEM_GROUP_PAGES", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub faasmem_group_pages: u64,

    /// TMO baseline: the fraction of an idle instance's memory reclaimed every 6 s (TMO's
    /// 0.05 %).
    #[arg(long, env = "ICEBOX_TMO_FRACTION", default_value_t = 0.0005)]
    pub tmo_fraction: f64,

    /// FaaSMem: least time between two rollbacks of an instance's hot pool.
    #[arg(long, env = "ICEBOX_FAASMEM_ROLLBACK_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub faasmem_rollback_interval: Duration,

    /// Time a client has to send a request's headers; also how long an idle keep-alive
    /// connection stays open (slow or silent clients cannot hold connections forever).
    #[arg(long, env = "ICEBOX_HEADER_TIMEOUT", default_value = "20s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,

    /// Time a client has to send a request's body once its headers are in.
    #[arg(long, env = "ICEBOX_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,

    /// Open client connections at most; beyond it the longest-idle one is closed to make room
    /// (a busy one never is), so authenticated clients keep being served under a flood.
    #[arg(long, env = "ICEBOX_MAX_CONNECTIONS", default_value_t = 2048)]
    pub max_connections: usize,

    /// Request-body bytes held in memory across all connections; beyond it requests wait for
    /// room (up to the body timeout), then get 503.
    #[arg(long, env = "ICEBOX_MAX_BUFFERED", default_value = "256MiB", value_parser = parse_size)]
    pub max_buffered: u64,

    /// Activation output (log lines and /run responses) the daemon may hold at once across all
    /// activations; past it, logs are cut with OpenWhisk's truncation marker and a response
    /// that does not fit fails the activation (whisk internal error).
    #[arg(long, env = "ICEBOX_OUTPUT_BUDGET", default_value = "128MiB", value_parser = parse_size)]
    pub output_budget: u64,

    /// On SIGTERM/SIGINT, how long open requests may finish before their connections are
    /// dropped and every instance is removed.
    #[arg(long, env = "ICEBOX_SHUTDOWN_GRACE", default_value = "3s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,

    /// Join a cluster of icebox nodes sharing this etcd (etcd://HOST:PORT[,HOST:PORT...]):
    /// actions, namespaces and keys are shared, and invocations are placed across the nodes.
    /// Without it the node stands alone with its SQLite registry.
    #[arg(long, env = "ICEBOX_CLUSTER")]
    pub cluster: Option<String>,

    /// This node's id in the cluster (default: the host name).
    #[arg(long, env = "ICEBOX_NODE_ID")]
    pub node_id: Option<String>,

    /// The URL other nodes reach this node's API at (default: http://--listen, which must
    /// then not be a wildcard address).
    #[arg(long, env = "ICEBOX_ADVERTISE")]
    pub advertise: Option<String>,

    /// The cluster's key prefix in etcd: another prefix is another cluster.
    #[arg(long, env = "ICEBOX_CLUSTER_PREFIX", default_value = "/icebox")]
    pub cluster_prefix: String,

    /// How long a node that stops answering etcd stays a member (its lease).
    #[arg(long, env = "ICEBOX_CLUSTER_LEASE", default_value = "3s", value_parser = humantime::parse_duration)]
    pub cluster_lease: Duration,

    /// Where an invocation runs: warm-home (a node with a warm instance, else the action's
    /// home node with room), hash (OpenWhisk's home hash only) or round-robin.
    #[arg(long, env = "ICEBOX_PLACEMENT", default_value = "warm-home")]
    pub placement: icebox_policy::PlacementPolicy,

    /// Log format: text or json.
    #[arg(long, env = "ICEBOX_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
}

pub type PrewarmSpec = Vec<(String, usize)>;

impl Config {
    /// The cluster settings, or `None` for a standalone node.
    pub fn cluster_config(&self) -> anyhow::Result<Option<crate::cluster::ClusterConfig>> {
        let Some(spec) = &self.cluster else {
            return Ok(None);
        };
        let endpoints =
            crate::cluster::ClusterConfig::parse_endpoints(spec).map_err(anyhow::Error::msg)?;
        let node_id = match &self.node_id {
            Some(id) => id.clone(),
            None => rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
        };
        if node_id.is_empty() || node_id.contains('/') || node_id.chars().any(char::is_whitespace) {
            anyhow::bail!("--node-id '{node_id}': use a name without '/' or spaces");
        }
        let advertise = match &self.advertise {
            Some(url) => url.trim_end_matches('/').to_string(),
            None if self.listen.starts_with("unix:")
                || self.listen.starts_with("0.0.0.0:")
                || self.listen.starts_with("[::]:") =>
            {
                anyhow::bail!(
                    "--cluster needs --advertise: other nodes cannot reach --listen {}",
                    self.listen
                )
            }
            None => format!("http://{}", self.listen),
        };
        if self.cluster_lease < Duration::from_secs(1) {
            anyhow::bail!("--cluster-lease must be at least 1s (etcd leases count in seconds)");
        }
        Ok(Some(crate::cluster::ClusterConfig {
            endpoints,
            node_id,
            advertise,
            prefix: self.cluster_prefix.clone(),
            lease: self.cluster_lease,
            placement: self.placement,
            retention: self.activation_max_age,
        }))
    }
}

/// `--instance-nofile`: chosen from the host (open_files.rs) or given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceNofile {
    Auto,
    Fixed(u64),
}

impl std::str::FromStr for InstanceNofile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(InstanceNofile::Auto),
            n => match n.parse::<u64>() {
                Ok(n) if n >= MIN_NOFILE => Ok(InstanceNofile::Fixed(n)),
                _ => Err(format!(
                    "'{n}': expected auto or a number of files of at least {}",
                    MIN_NOFILE
                )),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmBackends {
    Auto,
    On,
    Off,
}

impl std::str::FromStr for VmBackends {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(VmBackends::Auto),
            "on" => Ok(VmBackends::On),
            "off" => Ok(VmBackends::Off),
            other => Err(format!("'{other}': expected auto, on or off")),
        }
    }
}

/// `--isolation`: the process backend's mode and the node's default isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeIsolation {
    Process(IsolationMode),
    Vm,
    VmShared,
}

impl NodeIsolation {
    /// How the process backend runs (always present: actions may ask for process isolation).
    pub fn process_mode(self) -> IsolationMode {
        match self {
            NodeIsolation::Process(mode) => mode,
            NodeIsolation::Vm | NodeIsolation::VmShared => IsolationMode::Auto,
        }
    }

    pub fn default_isolation(self) -> Isolation {
        match self {
            NodeIsolation::Process(_) => Isolation::Process,
            NodeIsolation::Vm => Isolation::Vm,
            NodeIsolation::VmShared => Isolation::VmShared,
        }
    }
}

impl std::str::FromStr for NodeIsolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vm" => Ok(NodeIsolation::Vm),
            "vm-shared" => Ok(NodeIsolation::VmShared),
            other => other
                .parse::<IsolationMode>()
                .map(NodeIsolation::Process)
                .map_err(|_| {
                    format!(
                        "unknown isolation '{other}' (expected auto, crun, none, vm or vm-shared)"
                    )
                }),
        }
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        other => Err(format!("'{other}': expected on or off")),
    }
}

fn parse_restore_mode(s: &str) -> Result<RestoreMode, String> {
    match s.parse::<RestoreMode>()? {
        RestoreMode::Record => Err(
            "record is not a restore mode to choose: icebox records the first restore of every \
             snapshot by itself"
                .into(),
        ),
        mode => Ok(mode),
    }
}

/// `python:3=1,nodejs:20=2` → [(kind, count)]; `none` or empty → nothing.
/// `--techniques`, its values listed in `--help` (the bench harness looks for `auto` there).
fn parse_techniques() -> impl clap::builder::TypedValueParser<Value = crate::pool::TechniquesMode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["default", "auto"])
        .map(|s| s.parse().expect("one of the possible values"))
}

fn parse_prewarm_flag(s: &str) -> Result<PrewarmSpec, String> {
    let s = s.trim();
    if s.is_empty() || s == "none" {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|item| {
            let (kind, n) = item
                .trim()
                .rsplit_once('=')
                .ok_or_else(|| format!("'{item}' is not KIND=COUNT (e.g. python:3=1)"))?;
            let n = n
                .parse::<usize>()
                .map_err(|e| format!("'{item}': bad count: {e}"))?;
            Ok((kind.trim().to_string(), n))
        })
        .collect()
}

/// A size per second: `100MiB/s` or `100MiB`.
fn parse_rate(s: &str) -> Result<u64, String> {
    parse_size(s.trim().trim_end_matches("/s"))
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("invalid size '{s}': {e} (examples: 2GiB, 512MiB, 1073741824)"))
}

/// Below this the budget could not hold a batch of records next to the schema and actions.
const MIN_REGISTRY_BYTES: u64 = 4 * MIB;

fn parse_registry_budget(s: &str) -> Result<u64, String> {
    let bytes = parse_size(s)?;
    if bytes < MIN_REGISTRY_BYTES {
        return Err(format!(
            "{s} is too small for the registry: at least {}MiB",
            MIN_REGISTRY_BYTES / MIB
        ));
    }
    Ok(bytes)
}

/// OpenWhisk's request-body limit (akka-http's max-content-length of its controller).
const OPENWHISK_MAX_BODY: u64 = 50 * MIB;
/// Room for the JSON around an action's base64 code (kind, parameters, annotations).
const ACTION_JSON_ROOM: u64 = MIB;

impl Config {
    /// The request-body limit: as given, else OpenWhisk's 50 MiB, raised to what an action of
    /// the largest code size takes as base64 in its JSON (a limit in decoded bytes is
    /// otherwise out of reach: 48 MiB of zip is 64 MiB of base64).
    pub fn effective_max_body(&self) -> u64 {
        self.max_body.unwrap_or_else(|| {
            let base64 = self.max_code_size.div_ceil(3) * 4;
            OPENWHISK_MAX_BODY.max(base64 + ACTION_JSON_ROOM)
        })
    }

    /// Offload settings, checked against each other.
    pub fn offload_config(&self) -> anyhow::Result<crate::pool::OffloadConfig> {
        use icebox_policy::OffloadMode;
        if self.offload != OffloadMode::None
            && matches!(self.offload_pool, icebox_mem::PoolSpec::None)
        {
            anyhow::bail!(
                "--offload {} needs an offload pool: --offload-pool zram:SIZE (root) or swap",
                self.offload
            );
        }
        let faasmem = icebox_policy::FaasmemConfig {
            rollback_interval_ms: u64::try_from(self.faasmem_rollback_interval.as_millis())
                .unwrap_or(u64::MAX),
            semiwarm: self.semiwarm,
            semiwarm_default_ms: u64::try_from(self.semiwarm_start.as_millis()).unwrap_or(u64::MAX),
            bandwidth_bytes_per_s: self.offload_bandwidth,
            ..Default::default()
        };
        let tmo = icebox_policy::TmoConfig {
            fraction: self.tmo_fraction,
            ..Default::default()
        };
        faasmem
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid FaaSMem settings: {e}"))?;
        tmo.validate()
            .map_err(|e| anyhow::anyhow!("invalid --tmo-fraction: {e}"))?;
        Ok(crate::pool::OffloadConfig {
            mode: self.offload,
            faasmem,
            tmo,
            group_pages: self.faasmem_group_pages,
        })
    }

    /// Whether this node tries to start its VM backends, and whether it must succeed.
    pub fn vm_backends_wanted(&self) -> (bool, bool) {
        let default_vm = matches!(self.isolation, NodeIsolation::Vm | NodeIsolation::VmShared);
        match self.vm_backends {
            VmBackends::Off => (default_vm, default_vm),
            VmBackends::Auto => (true, default_vm),
            VmBackends::On => (true, true),
        }
    }

    /// The guest image directory: explicit, else `.tools/guest` beside the runtimes
    /// directory (a checkout's, where setup builds it).
    pub fn resolve_vm_image(&self, runtimes_dir: &std::path::Path) -> PathBuf {
        self.vm_image.clone().unwrap_or_else(|| {
            runtimes_dir
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(".tools")
                .join("guest")
        })
    }

    /// The runtimes directory: explicit, else `<exe>/../../runtimes` (target/release in a
    /// checkout), else `./runtimes`.
    pub fn resolve_runtimes_dir(&self) -> PathBuf {
        if let Some(dir) = &self.runtimes_dir {
            return dir.clone();
        }
        if let Ok(exe) = std::env::current_exe() {
            for up in exe.ancestors().skip(1).take(4) {
                let candidate = up.join("runtimes");
                if candidate.join("python").is_dir() {
                    return candidate;
                }
            }
        }
        PathBuf::from("runtimes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::GIB;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2GiB").unwrap(), 2 * GIB);
        assert_eq!(parse_size("512MiB").unwrap(), 512 * MIB);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn cluster_settings_come_from_the_flags_and_refuse_what_peers_cannot_reach() {
        let standalone = Config::parse_from(["iceboxd"]);
        assert!(standalone.cluster_config().unwrap().is_none());
        let c = Config::parse_from([
            "iceboxd",
            "--listen",
            "127.0.0.1:9000",
            "--cluster",
            "etcd://a:1,b:2",
            "--node-id",
            "n1",
            "--placement",
            "round-robin",
        ])
        .cluster_config()
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoints, ["a:1", "b:2"]);
        assert_eq!(c.advertise, "http://127.0.0.1:9000");
        assert_eq!(c.prefix, "/icebox");
        assert_eq!(c.placement, icebox_policy::PlacementPolicy::RoundRobin);
        let wildcard = Config::parse_from([
            "iceboxd",
            "--listen",
            "0.0.0.0:9000",
            "--cluster",
            "etcd://a:1",
        ]);
        let err = wildcard.cluster_config().unwrap_err().to_string();
        assert!(err.contains("--advertise"), "{err}");
        let bad_id = Config::parse_from(["iceboxd", "--cluster", "etcd://a:1", "--node-id", "a/b"]);
        assert!(bad_id.cluster_config().is_err());
    }

    #[test]
    fn body_limit_fits_the_largest_code_unless_given() {
        let defaults = Config::parse_from(["iceboxd"]);
        assert_eq!(defaults.max_code_size, 48 * MIB);
        assert_eq!(defaults.max_payload, 5 * MIB);
        assert_eq!(defaults.effective_max_body(), 64 * MIB + MIB);
        let small = Config::parse_from(["iceboxd", "--max-code-size", "1MiB"]);
        assert_eq!(small.effective_max_body(), 50 * MIB, "OpenWhisk's 50 MB");
        let given = Config::parse_from(["iceboxd", "--max-body", "10MiB"]);
        assert_eq!(given.effective_max_body(), 10 * MIB);
    }

    #[test]
    fn prewarm_specs() {
        assert_eq!(
            parse_prewarm_flag("python:3=1,nodejs:20=2").unwrap(),
            vec![("python:3".into(), 1), ("nodejs:20".into(), 2)]
        );
        assert!(parse_prewarm_flag("none").unwrap().is_empty());
        assert!(parse_prewarm_flag("python:3").is_err());
        assert!(parse_prewarm_flag("python:3=x").is_err());
    }

    #[test]
    fn library_pageout_is_a_flag_value() {
        let c = Config::parse_from(["iceboxd", "--library-pageout", "evict"]);
        assert_eq!(c.library_pageout, icebox_policy::LibraryPageout::Evict);
        assert_eq!(
            Config::parse_from(["iceboxd"]).library_pageout,
            icebox_policy::LibraryPageout::KeepCached
        );
        assert!(Config::try_parse_from(["iceboxd", "--library-pageout", "sometimes"]).is_err());
    }

    #[test]
    fn isolation_values() {
        let c = Config::parse_from(["iceboxd", "--isolation", "vm"]);
        assert_eq!(c.isolation, NodeIsolation::Vm);
        assert_eq!(c.isolation.process_mode(), IsolationMode::Auto);
        let c = Config::parse_from(["iceboxd", "--isolation", "none"]);
        assert_eq!(c.isolation.process_mode(), IsolationMode::None);
        assert_eq!(c.isolation.default_isolation(), Isolation::Process);
        assert!(Config::try_parse_from(["iceboxd", "--isolation", "kvm"]).is_err());
    }

    #[test]
    fn uid_range_values() {
        let c = Config::parse_from(["iceboxd"]);
        assert_eq!(c.uid_range.to_string(), "100000-165535");
        let c = Config::parse_from(["iceboxd", "--uid-range", "200000-200009"]);
        assert_eq!(c.uid_range.len(), 10);
        for bad in ["200000", "9-3", "60000-70000"] {
            assert!(Config::try_parse_from(["iceboxd", "--uid-range", bad]).is_err());
        }
    }

    #[test]
    fn vm_shared_flags() {
        let c = Config::parse_from(["iceboxd"]);
        assert_eq!(c.vm_partitions, 4);
        assert_eq!(c.vm_memory, None);
        assert_eq!(c.vm_shared_mode, icebox_vm::shared::Mode::Squeezy);
        let c = Config::parse_from([
            "iceboxd",
            "--isolation",
            "vm-shared",
            "--vm-partitions",
            "2",
            "--vm-memory",
            "3GiB",
            "--vm-shared-mode",
            "balloon",
        ]);
        assert_eq!(c.isolation.default_isolation(), Isolation::VmShared);
        assert_eq!(c.vm_backends_wanted(), (true, true));
        assert_eq!((c.vm_partitions, c.vm_memory), (2, Some(3 * GIB)));
        assert_eq!(c.vm_shared_mode, icebox_vm::shared::Mode::Balloon);
        assert!(Config::try_parse_from(["iceboxd", "--vm-partitions", "0"]).is_err());
        assert!(Config::try_parse_from(["iceboxd", "--vm-shared-mode", "dimm"]).is_err());
    }

    #[test]
    fn snapshot_flags() {
        let c = Config::parse_from(["iceboxd"]);
        assert!(c.snapshots);
        assert_eq!(c.snapshot_restore, RestoreMode::Faasnap);
        let c = Config::parse_from([
            "iceboxd",
            "--snapshots",
            "off",
            "--snapshot-restore",
            "reap",
        ]);
        assert!(!c.snapshots);
        assert_eq!(c.snapshot_restore, RestoreMode::Reap);
        assert!(Config::try_parse_from(["iceboxd", "--snapshot-restore", "record"]).is_err());
    }

    #[test]
    fn techniques_flag() {
        use crate::pool::TechniquesMode;
        let c = Config::parse_from(["iceboxd"]);
        assert_eq!(c.techniques, TechniquesMode::Default);
        let c = Config::parse_from(["iceboxd", "--techniques", "auto"]);
        assert_eq!(c.techniques, TechniquesMode::Auto);
        assert!(Config::try_parse_from(["iceboxd", "--techniques", "all"]).is_err());
    }

    #[test]
    fn defaults_match_the_documentation() {
        let c = Config::parse_from(["iceboxd"]);
        assert_eq!(c.listen, "127.0.0.1:8740");
        assert_eq!(c.pool_memory, 2 * GIB);
        assert_eq!(c.pool_charge, ChargeMode::Uss);
        assert_eq!(c.keep_alive, Duration::from_secs(600));
        assert_eq!(c.pause_grace, Duration::from_millis(50));
    }
}
