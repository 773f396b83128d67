//! A fingerprint of what a snapshot depends on outside itself (the runtime build: its
//! manifest, binary and proxy files): a restore from a snapshot whose fingerprint differs
//! from the current one is refused, and the caller starts the instance normally.
//! Files count by metadata (size, modification time, inode), not content: cheap enough to
//! compute on every restore, and any reinstall changes it.

use sha2::{Digest, Sha256};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

#[derive(Default)]
pub struct Fingerprint {
    hash: Sha256,
}

impl Fingerprint {
    pub fn new() -> Fingerprint {
        Fingerprint::default()
    }

    pub fn text(&mut self, label: &str, value: &str) -> &mut Self {
        self.hash.update(label.as_bytes());
        self.hash.update([0]);
        self.hash.update(value.as_bytes());
        self.hash.update([0]);
        self
    }

    /// A file (symlinks followed); a missing file counts as missing.
    pub fn file(&mut self, path: &Path) -> &mut Self {
        let seen = match std::fs::metadata(path) {
            Ok(m) => format!("{} {} {} {}", m.len(), m.mtime(), m.mtime_nsec(), m.ino()),
            Err(_) => "missing".into(),
        };
        self.text(&path.to_string_lossy(), &seen)
    }

    /// Every regular file under `dir`, in name order, skipping directories named in `skip`.
    pub fn tree(&mut self, dir: &Path, skip: &[&str]) -> &mut Self {
        let mut entries: Vec<_> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(|e| e.ok()).collect(),
            Err(_) => return self.text(&dir.to_string_lossy(), "unreadable"),
        };
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !skip.contains(&entry.file_name().to_string_lossy().as_ref()) {
                    self.tree(&path, skip);
                }
            } else if kind.is_file() {
                self.file(&path);
            }
        }
        self
    }

    pub fn finish(&self) -> String {
        let digest = self.hash.clone().finalize();
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_when_a_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("packages")).unwrap();
        std::fs::write(dir.path().join("proxy.py"), "a").unwrap();
        std::fs::write(dir.path().join("packages/big.py"), "a").unwrap();
        let take = || {
            Fingerprint::new()
                .text("kind", "python:3")
                .tree(dir.path(), &["packages"])
                .finish()
        };
        let first = take();
        assert_eq!(first, take());
        std::fs::write(dir.path().join("packages/big.py"), "bb").unwrap();
        assert_eq!(first, take(), "skipped directories do not count");
        std::fs::write(dir.path().join("proxy.py"), "bb").unwrap();
        assert_ne!(first, take());
    }
}
