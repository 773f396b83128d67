//! Cgroups of instance sandboxes, on cgroup v1 (one hierarchy per controller, including
//! hybrid hosts) and cgroup v2. An instance's cgroup gives it memory / pids / cpu limits,
//! a memory counter, OOM and fork-bomb evidence, freezing, and a reliable way to kill every
//! process it ever started.
//!
//! Cgroups are named by a relative path such as `icebox-<tag>/<instance-id>`, the same in
//! every hierarchy.

mod fs;
mod join;
mod mounts;
mod reclaim;
mod v1;
mod v2;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests_v1;
#[cfg(test)]
mod tests_v2;

pub use join::join_self_in_child;

use rustix::process::{kill_process, Pid, Signal};
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long freezing may take before it is reported as failed. Freezing normally takes
/// ~0.1 ms; only a task stuck in the kernel (e.g. on a hung network file system) takes longer.
pub(crate) const FREEZE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long killed processes get to exit before the next kill round.
const KILL_WAIT: Duration = Duration::from_millis(500);
const KILL_ROUNDS: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// `v1` or `v2`, as the health endpoint reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Limits of one instance; `None` leaves the kernel default (unlimited / default weight).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    pub memory_bytes: Option<u64>,
    pub pids_max: Option<u64>,
    /// CPU weight with v2 semantics: 1..=10000, default 100. Mapped to cpu.shares on v1.
    pub cpu_weight: Option<u64>,
}

/// A limit that could not be applied because its controller is not available there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Memory,
    Pids,
    Cpu,
}

/// Where a cgroup (or a hierarchy root) lives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    /// Boxed: four paths would make every `Cgroup` (held per instance) ~200 bytes.
    V1(Box<v1::Dirs>),
    V2(PathBuf),
}

impl Location {
    fn join(&self, rel: &str) -> Location {
        match self {
            Location::V1(d) => Location::V1(Box::new(d.join(rel))),
            Location::V2(d) => Location::V2(d.join(rel)),
        }
    }

    fn all(&self) -> Vec<&Path> {
        match self {
            Location::V1(d) => d.all(),
            Location::V2(d) => vec![d.as_path()],
        }
    }

    fn version(&self) -> CgroupVersion {
        match self {
            Location::V1(_) => CgroupVersion::V1,
            Location::V2(_) => CgroupVersion::V2,
        }
    }
}

/// The cgroup hierarchies icebox creates instance cgroups in.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    location: Location,
    /// On v1: a cgroup2 mount beside the v1 hierarchies (hybrid layout).
    unified: Option<PathBuf>,
}

impl CgroupRoot {
    /// The host's cgroup layout, from /sys/fs/cgroup: v2 when it is a cgroup2 mount; v1
    /// when the memory and freezer controllers are mounted as v1 hierarchies. `None` when
    /// not running as root or when no usable hierarchy is writable.
    pub fn detect() -> io::Result<Option<CgroupRoot>> {
        if !rustix::process::geteuid().is_root() {
            return Ok(None);
        }
        let base = Path::new("/sys/fs/cgroup");
        let magic = match mounts::fs_magic(base) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fs::with_path(e, base)),
        };
        if magic == mounts::CGROUP2_MAGIC {
            return Ok(mounts::writable(base).then(|| CgroupRoot::v2_at(base)));
        }
        let text = fs::read(Path::new("/proc/self/mountinfo"))?;
        let found = mounts::parse_mountinfo(&text);
        let Some(dirs) = v1::Dirs::from_mounts(&found, base) else {
            return Ok(None);
        };
        if !dirs.all().iter().all(|d| mounts::writable(d)) {
            return Ok(None);
        }
        Ok(Some(CgroupRoot {
            location: Location::V1(Box::new(dirs)),
            unified: mounts::unified_mount(&found, base),
        }))
    }

    /// A cgroup2 hierarchy mounted at `path` (e.g. the `unified` mount of a hybrid host).
    /// Nothing is checked here; operations report what does not work.
    pub fn v2_at(path: &Path) -> CgroupRoot {
        CgroupRoot {
            location: Location::V2(path.to_path_buf()),
            unified: None,
        }
    }

    pub fn version(&self) -> CgroupVersion {
        self.location.version()
    }

    /// v1 with a cgroup2 mount beside it (systemd's hybrid layout). crun refuses to manage
    /// cgroups there, so instances must join cgroups made by icebox instead.
    pub fn is_hybrid(&self) -> bool {
        self.version() == CgroupVersion::V1 && self.unified.is_some()
    }

    /// The cgroup2 mount of a hybrid host, for [`CgroupRoot::v2_at`].
    pub fn unified_mount(&self) -> Option<&Path> {
        self.unified.as_deref()
    }

    /// Creates the cgroup `rel` (and missing parents) in every hierarchy and applies
    /// `limits`. An existing cgroup is reused and gets the limits again. Limits whose
    /// controller is unavailable are skipped, logged, and listed by
    /// [`Cgroup::unapplied_limits`]; other failures are returned, after removing the cgroup
    /// if this call created it.
    pub fn create(&self, rel: &str, limits: &CgroupLimits) -> io::Result<Cgroup> {
        validate_rel(rel)?;
        validate_limits(limits)?;
        // A pre-existing cgroup may hold live processes: never remove it on failure.
        let existed = self.location.join(rel).all().iter().any(|d| d.exists());
        let location = match &self.location {
            Location::V1(root) => Location::V1(Box::new(v1::create(root, rel)?)),
            Location::V2(root) => {
                // Memory and pids are wanted even without limits: they give the usage
                // counter and OOM / fork-bomb evidence.
                let mut wanted = vec!["memory", "pids"];
                if limits.cpu_weight.is_some() {
                    wanted.push("cpu");
                }
                Location::V2(v2::create(root, rel, &wanted)?)
            }
        };
        let mut cgroup = Cgroup {
            rel: rel.to_string(),
            location,
            unapplied: Vec::new(),
        };
        match cgroup.set_limits(limits) {
            Ok(unapplied) => {
                if !unapplied.is_empty() {
                    tracing::warn!(
                        cgroup = rel,
                        ?unapplied,
                        "cgroup limits without an available controller"
                    );
                }
                cgroup.unapplied = unapplied;
                Ok(cgroup)
            }
            Err(err) if existed => Err(err),
            Err(err) => {
                if let Err(cleanup) = cgroup.remove() {
                    tracing::warn!(cgroup = rel, error = %cleanup, "cannot remove half-created cgroup");
                }
                Err(err)
            }
        }
    }

    /// Handle on the cgroup `rel`, which may or may not exist (e.g. left by a previous run).
    ///
    /// # Panics
    /// If `rel` is not a relative path of plain names: an empty or `..` path would make
    /// [`Cgroup::kill_all`] act on a hierarchy root, so this is treated as a bug.
    pub fn open(&self, rel: &str) -> Cgroup {
        if let Err(err) = validate_rel(rel) {
            panic!("{err}");
        }
        Cgroup {
            rel: rel.to_string(),
            location: self.location.join(rel),
            unapplied: Vec::new(),
        }
    }

    /// Names of the child cgroups of `rel` (of the hierarchy roots when `rel` is empty), in
    /// any hierarchy, sorted. Used to find instances left behind by a previous run.
    pub fn children(&self, rel: &str) -> Vec<String> {
        if !rel.is_empty() && validate_rel(rel).is_err() {
            return Vec::new();
        }
        let mut names: Vec<String> = self
            .location
            .join(rel)
            .all()
            .into_iter()
            .flat_map(fs::subdirs)
            .filter_map(|d| d.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Rejects anything but `name(/name)*`, so a cgroup can never be a hierarchy root or lie
/// outside it.
fn validate_rel(rel: &str) -> io::Result<()> {
    let ok = !rel.is_empty()
        && rel
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid cgroup name {rel:?}"),
        ))
    }
}

fn validate_limits(limits: &CgroupLimits) -> io::Result<()> {
    match limits.cpu_weight {
        Some(w) if !(1..=10_000).contains(&w) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu weight {w} is outside 1..=10000"),
        )),
        _ => Ok(()),
    }
}

/// One instance's cgroup (a directory per hierarchy on v1, one directory on v2).
#[derive(Debug, Clone)]
pub struct Cgroup {
    rel: String,
    location: Location,
    unapplied: Vec<Limit>,
}

impl Cgroup {
    pub fn rel(&self) -> &str {
        &self.rel
    }

    pub fn version(&self) -> CgroupVersion {
        self.location.version()
    }

    /// Limits requested at creation that could not be applied (controller unavailable).
    pub fn unapplied_limits(&self) -> &[Limit] {
        &self.unapplied
    }

    /// The cgroup's directory in every hierarchy.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.location
            .all()
            .into_iter()
            .map(Path::to_path_buf)
            .collect()
    }

    /// Applies limits to an existing cgroup (e.g. lowering memory to push an idle instance
    /// into swap). Returns the limits whose controller is unavailable.
    pub fn set_limits(&self, limits: &CgroupLimits) -> io::Result<Vec<Limit>> {
        validate_limits(limits)?;
        match &self.location {
            Location::V1(d) => v1::set_limits(d, limits),
            Location::V2(d) => v2::set_limits(d, limits),
        }
    }

    /// Every `cgroup.procs` a process must be written to in order to be in this cgroup, for
    /// [`join_self_in_child`].
    pub fn procs_files(&self) -> Vec<CString> {
        self.location
            .all()
            .into_iter()
            .map(|d| {
                let path = d.join("cgroup.procs");
                CString::new(path.as_os_str().as_bytes())
                    .expect("validated cgroup paths have no NUL")
            })
            .collect()
    }

    /// PIDs of every process in the cgroup and its descendants, sorted.
    pub fn pids(&self) -> Vec<u32> {
        fs::pids_recursive(self.procs_dir())
    }

    /// The directory whose membership is authoritative: on v1 the freezer's, since that is
    /// the hierarchy freezing and killing act on.
    fn procs_dir(&self) -> &Path {
        match &self.location {
            Location::V1(d) => &d.freezer,
            Location::V2(d) => d,
        }
    }

    /// Stops every process and returns once all are stopped (FREEZING is waited out).
    pub fn freeze(&self) -> io::Result<()> {
        match &self.location {
            Location::V1(d) => v1::freeze(&d.freezer),
            Location::V2(d) => v2::freeze(d),
        }
    }

    pub fn thaw(&self) -> io::Result<()> {
        match &self.location {
            Location::V1(d) => v1::thaw(&d.freezer),
            Location::V2(d) => v2::thaw(d),
        }
    }

    pub fn is_frozen(&self) -> bool {
        match &self.location {
            Location::V1(d) => v1::is_frozen(&d.freezer),
            Location::V2(d) => v2::is_frozen(d),
        }
    }

    /// SIGKILLs every process in the cgroup and its descendants and waits until none is
    /// left. Uses v2 `cgroup.kill` when there is one; otherwise freezes (so nothing can fork
    /// between listing and killing), signals every PID, thaws (v1 frozen tasks die only
    /// once thawed), and repeats until the cgroup is empty. A missing cgroup is empty.
    pub fn kill_all(&self) -> io::Result<()> {
        if let Location::V2(d) = &self.location {
            if v2::kill(d)?
                && fs::wait_until(KILL_WAIT * KILL_ROUNDS, || Ok(self.pids().is_empty()))?
            {
                return Ok(());
            }
        }
        for _ in 0..KILL_ROUNDS {
            // Freezing is best effort: a task stuck in the kernel must not stop the kill.
            let frozen = self.freeze();
            let pids = self.pids();
            for &pid in &pids {
                // cgroup.procs never lists 0, but kill(0) would hit our own process group.
                if let Some(pid) = i32::try_from(pid)
                    .ok()
                    .filter(|&p| p > 0)
                    .and_then(Pid::from_raw)
                {
                    // ESRCH (already gone) is fine.
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            // Thaw even after a failed freeze: tasks stuck in FREEZING are partly frozen.
            if let Err(err) = self.thaw() {
                tracing::debug!(cgroup = self.rel, error = %err, froze = frozen.is_ok(), "thaw during kill");
            }
            if pids.is_empty() || fs::wait_until(KILL_WAIT, || Ok(self.pids().is_empty()))? {
                return Ok(());
            }
        }
        let left = self.pids();
        if left.is_empty() {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("cgroup {}: processes {left:?} survive SIGKILL", self.rel),
        ))
    }

    /// The cgroup's memory counter: v1 memory.usage_in_bytes, v2 memory.current. `None`
    /// without a memory controller or once removed.
    pub fn memory_usage(&self) -> Option<u64> {
        match &self.location {
            Location::V1(d) => fs::read_u64(&d.memory.join("memory.usage_in_bytes")),
            Location::V2(d) => fs::read_u64(&d.join("memory.current")),
        }
    }

    /// How many processes the kernel OOM-killed in this cgroup because of its limit.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = match &self.location {
            Location::V1(d) => (d.memory.join("memory.oom_control"), "oom_kill"),
            Location::V2(d) => (d.join("memory.events"), "oom_kill"),
        };
        fs::read_keyed(&file, key).unwrap_or(0)
    }

    /// How many forks failed because of pids.max: non-zero tells a fork bomb apart from
    /// other deaths.
    pub fn pids_max_events(&self) -> u64 {
        let file = match &self.location {
            Location::V1(d) => match &d.pids {
                Some(p) => p.join("pids.events"),
                None => return 0,
            },
            Location::V2(d) => d.join("pids.events"),
        };
        fs::read_keyed(&file, "max").unwrap_or(0)
    }

    /// Kills every process, then removes the cgroup (and any descendants) from every
    /// hierarchy. Removing a cgroup that does not exist succeeds.
    pub fn remove(&self) -> io::Result<()> {
        let killed = self.kill_all();
        let mut result = Ok(());
        for dir in self.location.all() {
            if let Err(err) = fs::rmdir_tree(dir) {
                if result.is_ok() {
                    result = Err(err);
                }
            }
        }
        if let (Err(kill_err), Err(_)) = (&killed, &result) {
            tracing::warn!(cgroup = self.rel, error = %kill_err, "kill before cgroup removal failed");
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_plain_relative_paths() {
        let root = CgroupRoot::v2_at(Path::new("/nonexistent-cgroup-root"));
        for bad in ["", "/abs", "a/../b", "..", "a//b", "a/", "./a", "a\0b"] {
            let err = root.create(bad, &CgroupLimits::default()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(validate_rel("icebox-x/inst-1").is_ok());
        assert!(root.children("..").is_empty());
    }

    #[test]
    #[should_panic(expected = "invalid cgroup name")]
    fn opening_a_root_is_refused() {
        CgroupRoot::v2_at(Path::new("/nonexistent-cgroup-root")).open("");
    }

    #[test]
    fn cpu_weight_outside_v2_range_is_refused() {
        let root = CgroupRoot::v2_at(Path::new("/nonexistent-cgroup-root"));
        let limits = CgroupLimits {
            cpu_weight: Some(0),
            ..Default::default()
        };
        assert_eq!(
            root.create("a", &limits).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn procs_files_cover_every_hierarchy() {
        let root = CgroupRoot {
            location: Location::V1(Box::new(v1::Dirs {
                memory: "/cg/memory".into(),
                freezer: "/cg/freezer".into(),
                cpu: Some("/cg/cpu,cpuacct".into()),
                pids: None,
            })),
            unified: Some("/cg/unified".into()),
        };
        assert!(root.is_hybrid());
        let files = root.open("icebox-t/i1").procs_files();
        let files: Vec<&str> = files.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(
            files,
            [
                "/cg/freezer/icebox-t/i1/cgroup.procs",
                "/cg/memory/icebox-t/i1/cgroup.procs",
                "/cg/cpu,cpuacct/icebox-t/i1/cgroup.procs",
            ]
        );
        let v2 = CgroupRoot::v2_at(Path::new("/cg2"));
        assert!(!v2.is_hybrid());
        assert_eq!(
            v2.open("a/b").procs_files(),
            [CString::new("/cg2/a/b/cgroup.procs").unwrap()]
        );
    }

    #[test]
    fn detect_matches_the_host() {
        let detected = CgroupRoot::detect().unwrap();
        if !rustix::process::geteuid().is_root() {
            assert!(detected.is_none());
            return;
        }
        let magic = mounts::fs_magic(Path::new("/sys/fs/cgroup"));
        match (detected, magic) {
            (Some(root), Ok(m)) if m == mounts::CGROUP2_MAGIC => {
                assert_eq!(root.version(), CgroupVersion::V2)
            }
            (Some(root), Ok(_)) => assert_eq!(root.version(), CgroupVersion::V1),
            (None, _) => eprintln!("no writable cgroup hierarchy on this host"),
            (Some(_), Err(e)) => panic!("detected a hierarchy but statfs fails: {e}"),
        }
    }
}
