//! A small real filesystem for the swap-file fault tests: an ext4 image in a temporary
//! directory, loop-mounted (`mount -o loop` sets autoclear: the loop device goes with the last
//! user of the filesystem). Unmounted on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

pub(super) struct LoopFs {
    mnt: PathBuf,
    mounted: bool,
    _dir: tempfile::TempDir,
}

impl LoopFs {
    /// A fresh ext4 of `bytes`, mounted; None (after saying why) where it cannot be made.
    pub fn new(bytes: u64) -> Option<LoopFs> {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let made = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&image)
            .status()
            .is_ok_and(|s| s.success());
        let mounted = made
            && Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(&mnt)
                .status()
                .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipping: cannot make and loop-mount an ext4 image here");
            return None;
        }
        Some(LoopFs {
            mnt,
            mounted: true,
            _dir: dir,
        })
    }

    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// `umount -l`: the filesystem leaves the namespace at once and lives on while in use.
    pub fn detach(&mut self) {
        let ok = Command::new("umount")
            .arg("-l")
            .arg(&self.mnt)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "umount -l {}", self.mnt.display());
        self.mounted = false;
    }

    /// Writes a file until the filesystem is full; returns the bytes written.
    pub fn fill(&self) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(self.mnt.join("filler")).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let mut written = 0;
        while let Ok(n) = f.write(&chunk) {
            if n == 0 {
                break;
            }
            written += n as u64;
        }
        let _ = f.sync_all();
        written
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mnt).status();
        }
    }
}
