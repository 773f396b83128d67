//! The guest image scripts/guest/build.sh writes (docs/vm.md, "The guest").

use anyhow::Context;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct GuestImage {
    pub dir: PathBuf,
    /// The decompressed ELF kernel (`vmlinux`): QEMU boots it through its PVH entry point,
    /// seconds faster under TCG than the bzImage (`vmlinuz`, kept for reference).
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub rootfs: PathBuf,
    /// manifest.json as written by the build (kernel version, hashes, runtimes).
    pub manifest: serde_json::Value,
}

impl GuestImage {
    /// `<repo>/.tools/guest`, where setup builds it.
    pub fn default_dir(repo: &Path) -> PathBuf {
        repo.join(".tools").join("guest")
    }

    pub fn open(dir: &Path) -> anyhow::Result<GuestImage> {
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path).with_context(|| {
            format!(
                "no guest image at {} (build it with scripts/guest/build.sh)",
                dir.display()
            )
        })?;
        let manifest: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("bad {}", manifest_path.display()))?;
        let image = GuestImage {
            dir: dir.to_path_buf(),
            kernel: dir.join("vmlinux"),
            initrd: dir.join("initramfs.cpio.gz"),
            rootfs: dir.join("rootfs.erofs"),
            manifest,
        };
        for f in [&image.kernel, &image.initrd, &image.rootfs] {
            anyhow::ensure!(
                f.is_file(),
                "guest image incomplete: {} is missing",
                f.display()
            );
        }
        Ok(image)
    }

    /// Where the runtime whose host directory is named `name` (python, nodejs, java) is in
    /// the guest, if the image has it.
    pub fn runtime_dir(&self, name: &str) -> Option<String> {
        self.manifest
            .get("runtimes")?
            .get(name)?
            .as_str()
            .map(str::to_string)
    }

    pub fn kernel_release(&self) -> &str {
        self.manifest
            .pointer("/kernel/release")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }
}
