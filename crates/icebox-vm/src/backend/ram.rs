//! Where VMs keep their guest RAM so that any of them can be snapshotted: the daemon cannot
//! say in advance which instance will be a snapshot's template, so every VM's RAM is a file
//! on a tmpfs mapped shared, `/dev/shm/icebox-vm-<tag>-<instance>` (the tag derived from the
//! state directory, so two daemons never touch each other's files; no directory of its own,
//! so nothing is left when the last VM goes). A snapshot copies the file; the file goes with
//! its VM, and at start-up with the orphans of an earlier run.

use std::path::{Path, PathBuf};

const SHM: &str = "/dev/shm";

/// `/dev/shm` where this host has one, else none (anonymous RAM, no snapshots).
pub fn default_dir() -> Option<PathBuf> {
    Path::new(SHM).is_dir().then(|| PathBuf::from(SHM))
}

/// The name every RAM file of the daemon with this state directory starts with.
pub fn prefix(state_dir: &Path) -> String {
    let state = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let tag = &crate::fnv::fnv1a(state.as_os_str().as_encoded_bytes())[..10];
    format!("icebox-vm-{tag}-")
}

/// The RAM files in `dir` whose names start with `prefix`.
pub fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect()
}

/// Removes them (VMs of an earlier run, all gone).
pub fn remove_all(dir: &Path, prefix: &str) {
    for file in files(dir, prefix) {
        if let Err(e) = std::fs::remove_file(&file) {
            tracing::warn!(file = %file.display(), "cannot remove an orphaned VM's RAM: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_directory_has_its_own_prefix() {
        let a = prefix(Path::new("/var/lib/icebox"));
        assert_ne!(a, prefix(Path::new("/var/lib/icebox2")));
        assert_eq!(a, prefix(Path::new("/var/lib/icebox")));
        assert!(a.starts_with("icebox-vm-") && a.ends_with('-'));
    }

    #[test]
    fn only_this_daemons_ram_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mine = prefix(Path::new("/a"));
        let theirs = prefix(Path::new("/b"));
        for name in [
            format!("{mine}vm1"),
            format!("{mine}vm2"),
            format!("{theirs}vm1"),
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(files(dir.path(), &mine).len(), 2);
        remove_all(dir.path(), &mine);
        assert!(files(dir.path(), &mine).is_empty());
        assert_eq!(files(dir.path(), &theirs).len(), 1);
    }
}
