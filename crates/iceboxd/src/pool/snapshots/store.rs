//! Where snapshots live on disk and what icebox writes beside the backend's files:
//! `<state>/snapshots/<action key>/<isolation>-<version>/` holds `entry.json` (icebox's
//! record) and `image/` (the backend's snapshot, and its loading set once recorded). Entries
//! survive a daemon restart; one whose action is gone or changed is deleted at start-up.
//! Everything here holds actions' memory: directories are 0700 and files 0600, the daemon's
//! user's alone, whatever wrote them (CRIU, QEMU, the loading set writer).

use icebox_core::{LoadingSetInfo, SnapshotInfo};
use icebox_snap::private;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

const ENTRY: &str = "entry.json";
const IMAGE: &str = "image";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEntry {
    pub action: String,
    pub version: String,
    pub isolation: String,
    pub created_ms: u64,
    pub snapshot: SnapshotInfo,
    #[serde(default)]
    pub loading_set: Option<LoadingSetInfo>,
}

pub struct Store {
    root: PathBuf,
}

impl Store {
    pub fn new(state_dir: &Path) -> Store {
        Store {
            root: state_dir.join("snapshots"),
        }
    }

    /// The directory of an action version's snapshot for one isolation.
    pub fn dir(&self, action: &str, isolation: &str, version: &str) -> PathBuf {
        self.root
            .join(action_key(action))
            .join(format!("{isolation}-{}", safe(version)))
    }

    pub fn image_dir(dir: &Path) -> PathBuf {
        dir.join(IMAGE)
    }

    /// A fresh, empty directory to build a snapshot in, next to where it will live, so the
    /// final rename is atomic.
    pub fn scratch(&self, action: &str) -> io::Result<PathBuf> {
        // The root too: one left by an older daemon may be 0755.
        private::create_dir(&self.root)?;
        let parent = self.root.join(action_key(action));
        private::create_dir(&parent)?;
        let dir = parent.join(format!(".building-{:08x}", rand::random::<u32>()));
        private::create_dir(&Self::image_dir(&dir))?;
        Ok(dir)
    }

    /// Moves a built snapshot into place (replacing an older one) and records it.
    pub fn commit(&self, scratch: &Path, entry: &StoredEntry) -> io::Result<PathBuf> {
        write_entry(scratch, entry)?;
        private::restrict_tree(scratch)?;
        let dir = self.dir(&entry.action, &entry.isolation, &entry.version);
        remove(&dir);
        std::fs::rename(scratch, &dir)?;
        Ok(dir)
    }

    pub fn update(&self, dir: &Path, entry: &StoredEntry) -> io::Result<()> {
        write_entry(dir, entry)
    }

    /// Every snapshot directory with a readable entry; unreadable ones and leftovers of
    /// interrupted builds are deleted.
    pub fn load_all(&self) -> Vec<(PathBuf, StoredEntry)> {
        let mut found = Vec::new();
        let Ok(actions) = std::fs::read_dir(&self.root) else {
            return found;
        };
        for action in actions.flatten() {
            let Ok(dirs) = std::fs::read_dir(action.path()) else {
                continue;
            };
            for dir in dirs.flatten() {
                let path = dir.path();
                match read_entry(&path) {
                    Some(entry) if !dir.file_name().to_string_lossy().starts_with('.') => {
                        found.push((path, entry))
                    }
                    _ => {
                        tracing::warn!(dir = %path.display(), "removing an unfinished or unreadable snapshot");
                        remove(&path);
                    }
                }
            }
        }
        found
    }
}

/// Deletes a snapshot directory. Restored instances still reading its files keep them open,
/// so this is safe while they run.
pub fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), "cannot remove a snapshot: {e}");
        }
    }
}

fn write_entry(dir: &Path, entry: &StoredEntry) -> io::Result<()> {
    let tmp = dir.join(".entry.json.tmp");
    private::write_file(&tmp, &serde_json::to_vec_pretty(entry)?)?;
    std::fs::rename(tmp, dir.join(ENTRY))
}

fn read_entry(dir: &Path) -> Option<StoredEntry> {
    serde_json::from_slice(&std::fs::read(dir.join(ENTRY)).ok()?).ok()
}

/// A directory name for an action: readable, and unique even when two names sanitise alike.
fn action_key(action: &str) -> String {
    let hash = action.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    // The low 32 bits name the directory (as they always have: directories persist).
    format!("{}-{:08x}", safe(action), hash & 0xffff_ffff)
}

fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: &str) -> StoredEntry {
        StoredEntry {
            action: "guest/hello".into(),
            version: version.into(),
            isolation: "process".into(),
            created_ms: 1,
            snapshot: SnapshotInfo {
                backend: "crun".into(),
                memory_bytes: 4096,
                took_ms: 50,
            },
            loading_set: None,
        }
    }

    #[test]
    fn a_committed_snapshot_is_found_again() {
        let state = tempfile::tempdir().unwrap();
        let store = Store::new(state.path());
        let scratch = store.scratch("guest/hello").unwrap();
        std::fs::write(Store::image_dir(&scratch).join("pages"), b"x").unwrap();
        let dir = store.commit(&scratch, &entry("0.0.1")).unwrap();
        assert_eq!(dir, store.dir("guest/hello", "process", "0.0.1"));
        assert!(Store::image_dir(&dir).join("pages").exists());
        let found = store.load_all();
        assert_eq!(found, vec![(dir, entry("0.0.1"))]);
    }

    #[test]
    fn a_committed_snapshot_is_its_owner_s_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let state = tempfile::tempdir().unwrap();
        let store = Store::new(state.path());
        // A root left 0755 by an older daemon.
        std::fs::create_dir(state.path().join("snapshots")).unwrap();
        let scratch = store.scratch("guest/hello").unwrap();
        let pages = Store::image_dir(&scratch).join("pages-1.img");
        std::fs::write(&pages, b"memory").unwrap();
        std::fs::set_permissions(&pages, std::fs::Permissions::from_mode(0o644)).unwrap();
        let dir = store.commit(&scratch, &entry("0.0.1")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        for d in [
            state.path().join("snapshots"),
            dir.parent().unwrap().to_path_buf(),
            dir.clone(),
            Store::image_dir(&dir),
        ] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
        for f in [dir.join(ENTRY), Store::image_dir(&dir).join("pages-1.img")] {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
    }

    #[test]
    fn leftovers_of_an_interrupted_build_are_removed() {
        let state = tempfile::tempdir().unwrap();
        let store = Store::new(state.path());
        let scratch = store.scratch("guest/hello").unwrap();
        assert!(store.load_all().is_empty());
        assert!(!scratch.exists());
    }

    #[test]
    fn names_that_sanitise_alike_get_different_directories() {
        assert_ne!(action_key("guest/a b"), action_key("guest/a_b"));
        assert!(!action_key("../../etc").contains('/'));
    }
}
