//! A uid per instance. The kernel counts inotify instances, POSIX message-queue bytes and
//! RLIMIT_NPROC per uid, whatever the namespaces: instances that shared one uid shared (and
//! could exhaust) those limits. Each crun instance runs as the lowest free uid of a range the
//! daemon owns, and that uid comes back only once the instance's cgroup is empty, so nothing
//! it left running can still hold what the uid counts.
//!
//! A uid is free when this daemon does not use it, no process on the host runs as it (the
//! orphans of a crashed daemon, a user of the range we do not know about) and no other daemon
//! holds its lock file (daemons with other state directories share the host's uids). A
//! snapshot pins its template's uid: criu restores processes with the credentials they were
//! dumped with, so every instance restored from one snapshot runs as that uid, which no other
//! action's instance may get while the snapshot exists.

use crate::cgroup::Cgroup;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Host-wide: every daemon on the host must see the same locks.
const LOCK_DIR: &str = "/run/icebox/uids";
/// The snapshot metadata file a pin is checked against (the backend's `snapshot.json`).
const META_FILE: &str = crate::SNAPSHOT_META_FILE;

/// `--uid-range FIRST-LAST`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

impl UidRange {
    /// Above the uids distributions give accounts (< 60000) and nobody (65534); 65536 uids.
    pub const DEFAULT: UidRange = UidRange {
        first: 100_000,
        last: 165_535,
    };

    pub fn contains(&self, uid: u32) -> bool {
        (self.first..=self.last).contains(&uid)
    }

    pub fn len(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// What on this host already uses uids of the range (accounts, subordinate ranges of
    /// rootless containers): their processes would share the instances' per-user limits.
    pub fn host_overlaps(&self) -> Vec<String> {
        let mut found = Vec::new();
        for line in std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
        {
            let f: Vec<&str> = line.split(':').collect();
            if let Some(uid) = f.get(2).and_then(|u| u.parse::<u32>().ok()) {
                if self.contains(uid) {
                    found.push(format!("account {} has uid {uid}", f[0]));
                }
            }
        }
        for line in std::fs::read_to_string("/etc/subuid")
            .unwrap_or_default()
            .lines()
        {
            let f: Vec<&str> = line.split(':').collect();
            let (Some(start), Some(count)) = (
                f.get(1).and_then(|u| u.parse::<u64>().ok()),
                f.get(2).and_then(|u| u.parse::<u64>().ok()),
            ) else {
                continue;
            };
            if count > 0 && start <= u64::from(self.last) && start + count > u64::from(self.first) {
                found.push(format!(
                    "subordinate uids {start}-{} of {} (/etc/subuid)",
                    start + count - 1,
                    f[0]
                ));
            }
        }
        found
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl std::str::FromStr for UidRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("uid range '{s}': expected FIRST-LAST, e.g. 100000-165535"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|e| format!("uid range '{s}': '{v}' is not a uid ({e})"))
        };
        let range = UidRange {
            first: parse(a)?,
            last: parse(b)?,
        };
        if range.first > range.last {
            return Err(format!("uid range '{s}': the first uid is above the last"));
        }
        // 0 is root, 65534 is nobody (what instances shared before), u32::MAX means "no uid"
        // to the kernel's chown and setresuid.
        for special in [0, 65534, u32::MAX] {
            if range.contains(special) {
                return Err(format!(
                    "uid range '{s}' includes uid {special}, which instances must not run as"
                ));
            }
        }
        Ok(range)
    }
}

/// The uids of one daemon's instances.
pub struct UidPool {
    range: UidRange,
    lock_dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// How many live instances run as each uid (those restored from one snapshot share it).
    users: BTreeMap<u32, u32>,
    /// The host-wide lock of every uid this daemon uses, drains or pins.
    locks: BTreeMap<u32, File>,
    /// Uids of instances that are gone but whose cgroup still held processes.
    draining: Vec<(u32, Cgroup)>,
    pins: BTreeMap<u32, Pin>,
}

/// A snapshot directory (held open: the pool renames it into place after the dump) whose
/// metadata names the uid; `pending` while the dump that writes that metadata runs.
struct Pin {
    dir: OwnedFd,
    pending: bool,
}

impl Pin {
    fn open(dir: &Path, pending: bool) -> std::io::Result<Pin> {
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir)?;
        Ok(Pin {
            dir: OwnedFd::from(dir),
            pending,
        })
    }

    /// Still a snapshot of `uid`: its directory and metadata exist and name it.
    fn holds(&self, uid: u32) -> bool {
        self.pending || snapshot_uid(&self.fd_path()) == Some(uid)
    }

    fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }
}

/// The uid a snapshot's metadata records, if it records one.
pub(super) fn snapshot_uid(dir: &Path) -> Option<u32> {
    #[derive(serde::Deserialize)]
    struct Uid {
        uid: Option<u32>,
    }
    let text = std::fs::read(dir.join(META_FILE)).ok()?;
    serde_json::from_slice::<Uid>(&text).ok()?.uid
}

impl UidPool {
    pub fn new(range: UidRange) -> Arc<UidPool> {
        Self::with_lock_dir(range, PathBuf::from(LOCK_DIR))
    }

    fn with_lock_dir(range: UidRange, lock_dir: PathBuf) -> Arc<UidPool> {
        Arc::new(UidPool {
            range,
            lock_dir,
            state: Mutex::new(State::default()),
        })
    }

    pub fn range(&self) -> UidRange {
        self.range
    }

    /// The lowest free uid, for a new instance.
    pub fn take(self: &Arc<Self>) -> std::io::Result<UidLease> {
        let mut st = self.state.lock().unwrap();
        self.tidy(&mut st);
        let busy = live_uids_in(self.range);
        std::fs::create_dir_all(&self.lock_dir)?;
        for uid in self.range.first..=self.range.last {
            if st.locks.contains_key(&uid) || busy.contains(&uid) {
                continue;
            }
            let Some(lock) = self.try_lock(uid)? else {
                continue;
            };
            st.locks.insert(uid, lock);
            *st.users.entry(uid).or_default() += 1;
            return Ok(self.lease(uid));
        }
        Err(std::io::Error::other(format!(
            "no free uid left in the instance uid range {} ({} uids; {} used by this daemon): \
             widen --uid-range or lower --max-instances",
            self.range,
            self.range.len(),
            st.locks.len()
        )))
    }

    /// The uid of a snapshot, for an instance restored from it.
    pub fn share(self: &Arc<Self>, uid: u32) -> std::io::Result<UidLease> {
        if !self.range.contains(uid) {
            return Err(std::io::Error::other(format!(
                "the snapshot's processes run as uid {uid}, outside the instance uid range {}",
                self.range
            )));
        }
        let mut st = self.state.lock().unwrap();
        if !self.hold(&mut st, uid)? {
            return Err(std::io::Error::other(format!(
                "the snapshot's uid {uid} is in use by another daemon"
            )));
        }
        *st.users.entry(uid).or_default() += 1;
        Ok(self.lease(uid))
    }

    /// Keeps `uid` out of `take` while the snapshot being written into `dir` is dumped (and,
    /// once [`UidPool::pinned`] says it is written, for as long as it exists).
    pub fn pin(&self, uid: u32, dir: &Path) -> std::io::Result<()> {
        let pin = Pin::open(dir, true)?;
        let mut st = self.state.lock().unwrap();
        if !st.locks.contains_key(&uid) {
            // Only a uid this daemon holds can be pinned; the template's lease holds it.
            return Err(std::io::Error::other(format!(
                "uid {uid} is not held by this daemon"
            )));
        }
        st.pins.insert(uid, pin);
        Ok(())
    }

    /// The dump into the pinned directory is over: the pin now lasts as long as the snapshot
    /// names `uid` (`written`) or ends now (the dump failed).
    pub fn pinned(&self, uid: u32, written: bool) {
        let mut st = self.state.lock().unwrap();
        if written {
            if let Some(pin) = st.pins.get_mut(&uid) {
                pin.pending = false;
            }
        } else {
            st.pins.remove(&uid);
            Self::unlock_if_unused(&mut st, uid);
        }
    }

    /// After a restart: pins the uid of every snapshot found under `dir` (this backend's
    /// snapshots live a few levels below the state directory).
    pub fn pin_snapshots_under(&self, dir: &Path, depth: usize) {
        if depth == 0 {
            return;
        }
        if let Some(uid) = snapshot_uid(dir).filter(|u| self.range.contains(*u)) {
            let mut st = self.state.lock().unwrap();
            match self.hold(&mut st, uid) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(uid, snapshot = %dir.display(), "the uid of a snapshot is locked by another daemon; its restores will fall back to normal starts");
                    return;
                }
                Err(e) => {
                    tracing::warn!(uid, "cannot lock the uid of a snapshot: {e}");
                    return;
                }
            }
            if let Ok(pin) = Pin::open(dir, false) {
                st.pins.insert(uid, pin);
            }
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.pin_snapshots_under(&entry.path(), depth - 1);
            }
        }
    }

    /// Keeps `uid` while `cgroup` still holds processes; it is checked again at each `take`.
    fn release(&self, uid: u32, cgroup: Option<Cgroup>) {
        let mut st = self.state.lock().unwrap();
        if let Some(n) = st.users.get_mut(&uid) {
            *n -= 1;
            if *n == 0 {
                st.users.remove(&uid);
            }
        }
        match cgroup {
            Some(cgroup) if !cgroup.pids().is_empty() => {
                tracing::warn!(uid, cgroup = cgroup.rel(), "an instance's cgroup still holds processes: its uid stays taken until they are gone");
                st.draining.push((uid, cgroup));
            }
            _ => Self::unlock_if_unused(&mut st, uid),
        }
    }

    /// Ends drains whose cgroup emptied and pins whose snapshot is gone.
    fn tidy(&self, st: &mut State) {
        let (done, still): (Vec<_>, Vec<_>) = std::mem::take(&mut st.draining)
            .into_iter()
            .partition(|(_, cgroup)| cgroup.pids().is_empty());
        st.draining = still;
        let lapsed: Vec<u32> = st
            .pins
            .iter()
            .filter(|(uid, pin)| !pin.holds(**uid))
            .map(|(uid, _)| *uid)
            .collect();
        for uid in &lapsed {
            st.pins.remove(uid);
        }
        for uid in done.into_iter().map(|(uid, _)| uid).chain(lapsed) {
            Self::unlock_if_unused(st, uid);
        }
    }

    fn unlock_if_unused(st: &mut State, uid: u32) {
        let used = st.users.contains_key(&uid)
            || st.pins.contains_key(&uid)
            || st.draining.iter().any(|(u, _)| *u == uid);
        if !used {
            st.locks.remove(&uid);
        }
    }

    /// Makes sure this daemon holds the lock of `uid`; false when another daemon does.
    fn hold(&self, st: &mut State, uid: u32) -> std::io::Result<bool> {
        if let std::collections::btree_map::Entry::Vacant(slot) = st.locks.entry(uid) {
            std::fs::create_dir_all(&self.lock_dir)?;
            match self.try_lock(uid)? {
                Some(lock) => {
                    slot.insert(lock);
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The lock file of `uid`, held (`flock`, released by the kernel if the daemon dies), or
    /// `None` when another daemon holds it.
    fn try_lock(&self, uid: u32) -> std::io::Result<Option<File>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.lock_dir.join(uid.to_string()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn lease(self: &Arc<Self>, uid: u32) -> UidLease {
        UidLease {
            pool: self.clone(),
            uid,
            cgroup: None,
        }
    }
}

/// One instance's hold on its uid; dropping it gives the uid back once `cgroup` is empty.
pub struct UidLease {
    pool: Arc<UidPool>,
    uid: u32,
    cgroup: Option<Cgroup>,
}

impl UidLease {
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The cgroup whose emptiness frees the uid.
    pub fn watch(&mut self, cgroup: &Cgroup) {
        self.cgroup = Some(cgroup.clone());
    }
}

impl Drop for UidLease {
    fn drop(&mut self) {
        self.pool.release(self.uid, self.cgroup.take());
    }
}

/// The uids of `range` that a live process on the host runs as (the owner of its /proc
/// directory is its effective uid). Zombies are left out: an instance's init is reparented to
/// the host's init when crun exits, and a host init that is slow to reap (some container
/// hosts never do) would otherwise keep its uid forever; a zombie holds no inotify instance
/// or message queue, only one task of RLIMIT_NPROC until it is reaped.
fn live_uids_in(range: UidRange) -> HashSet<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashSet::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
        let uid = e.metadata().ok()?.uid();
        (range.contains(uid) && !is_zombie(pid)).then_some(uid)
    })
    .collect()
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command, which may itself hold ") ".
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_refuse_special_uids() {
        let r: UidRange = "100000-165535".parse().unwrap();
        assert_eq!(r, UidRange::DEFAULT);
        assert_eq!(r.len(), 65536);
        assert_eq!("7-7".parse::<UidRange>().unwrap().len(), 1);
        for bad in [
            "",
            "100000",
            "5-4",
            "0-10",
            "60000-70000",
            "a-b",
            "1-4294967295",
        ] {
            assert!(bad.parse::<UidRange>().is_err(), "{bad}");
        }
    }

    fn pool(first: u32, last: u32) -> (tempfile::TempDir, Arc<UidPool>) {
        let locks = tempfile::tempdir().unwrap();
        let pool = UidPool::with_lock_dir(UidRange { first, last }, locks.path().into());
        (locks, pool)
    }

    #[test]
    fn the_lowest_free_uid_is_taken_and_comes_back() {
        let (_locks, pool) = pool(3_900_000_000, 3_900_000_002);
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert_eq!((a.uid(), b.uid()), (3_900_000_000, 3_900_000_001));
        drop(a);
        assert_eq!(pool.take().unwrap().uid(), 3_900_000_000);
    }

    #[test]
    fn another_pool_on_the_same_locks_skips_held_uids_and_an_exhausted_range_says_so() {
        let (locks, one) = pool(3_900_000_010, 3_900_000_011);
        let other = UidPool::with_lock_dir(one.range(), locks.path().into());
        let a = one.take().unwrap();
        let b = other.take().unwrap();
        assert_ne!(a.uid(), b.uid());
        let err = one.take().err().expect("the range is exhausted");
        assert!(err.to_string().contains("--uid-range"), "{err}");
    }

    #[test]
    fn a_pinned_uid_is_kept_while_its_snapshot_names_it() {
        let (_locks, pool) = pool(3_900_000_020, 3_900_000_021);
        let snap = tempfile::tempdir().unwrap();
        let template = pool.take().unwrap();
        let uid = template.uid();
        pool.pin(uid, snap.path()).unwrap();
        drop(template);
        std::fs::write(snap.path().join(META_FILE), format!(r#"{{"uid": {uid}}}"#)).unwrap();
        pool.pinned(uid, true);
        let other = pool.take().unwrap();
        assert_ne!(other.uid(), uid, "a pinned uid is not handed out");
        let restored = pool.share(uid).unwrap();
        assert_eq!(restored.uid(), uid);
        drop((other, restored));
        std::fs::remove_file(snap.path().join(META_FILE)).unwrap();
        assert_eq!(
            pool.take().unwrap().uid(),
            uid,
            "the pin lapsed with its snapshot"
        );
    }
}
