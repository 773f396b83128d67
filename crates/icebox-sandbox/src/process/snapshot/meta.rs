//! `snapshot.json`: what a restore needs besides CRIU's images (the pipes to replace, the
//! external mounts and their host paths) and what must not have changed since the dump (the
//! runtime build, the instance's shape, CRIU, the kernel), plus the size and the CRC-32 of
//! every 64 KiB of every image file, so a truncated, missing or damaged one is refused before
//! its bytes are restored.

use crate::manifest::RuntimeManifest;
use crate::InstanceSpec;
use icebox_snap::checksum::{self, FileSums};
use icebox_snap::compact::CompactStats;
use icebox_snap::fingerprint::{kernel_release, Fingerprint};
use icebox_snap::mounts::ExternalMount;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const META_FILE: &str = crate::SNAPSHOT_META_FILE;
/// CRIU's images, inside the snapshot directory.
pub const IMAGES_DIR: &str = "criu";
/// 2: checksums of the image files and the template's uid (format 1 snapshots had neither
/// and ran as the shared uid 65534: they are refused, then rebuilt).
const FORMAT: u32 = 2;

/// A pipe the dumped root task wrote to (its stdout or stderr): the restore gives it a new one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DumpedPipe {
    pub fd: i32,
    pub inode: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub format: u32,
    pub backend: String,
    pub criu_version: String,
    pub kernel: String,
    /// Runtime build (manifest, binary, proxy files).
    pub runtime_fingerprint: String,
    /// What the instance was started with (memory limit, network, environment…): the dumped
    /// process carries it (heap sizes, mounts, variables), so a restore must ask for the same.
    pub shape: String,
    pub runtime_kind: String,
    pub pipes: Vec<DumpedPipe>,
    pub externals: Vec<ExternalMount>,
    /// Dumped with `--empty-ns net` (the namespace held only a loopback device), and whether
    /// that loopback was up.
    pub empty_net_ns: bool,
    pub loopback_up: bool,
    /// Size and chunk checksums of every file of the images directory.
    pub files: BTreeMap<String, FileSums>,
    pub memory_bytes: u64,
    pub compaction: CompactStats,
    pub dump_ms: u64,
    /// The template's uid: criu restores its processes with it (uids.rs pins it).
    pub uid: Option<u32>,
}

/// Directories of a runtime that are not its build (function packages, tests, caches).
const NOT_BUILD: &[&str] = &[
    "packages",
    "node_modules",
    "__pycache__",
    "tests",
    "test",
    "testlib",
    ".pytest_cache",
    "src",
    "tools",
];

pub fn runtime_fingerprint(runtime: &RuntimeManifest) -> String {
    let dir = runtime.dir.to_string_lossy();
    let mut fp = Fingerprint::new();
    fp.text("kind", &runtime.kind)
        .text("command", &runtime.command.join("\u{1}"));
    for (k, v) in &runtime.env {
        fp.text(k, v);
    }
    // The interpreter and any file the command names (jar, class-data archive).
    for arg in runtime.argv(&dir, 0) {
        let path = arg.rsplit_once('=').map_or(arg.as_str(), |(_, p)| p);
        if path.starts_with('/') {
            fp.file(Path::new(path));
            if let Ok(real) = std::fs::canonicalize(path) {
                fp.file(&real);
            }
        }
    }
    fp.tree(&runtime.dir, NOT_BUILD);
    fp.finish()
}

pub fn shape(spec: &InstanceSpec) -> String {
    let mut fp = Fingerprint::new();
    fp.text("runtime", &spec.runtime.kind)
        .text("runtime_dir", &spec.runtime.dir.to_string_lossy())
        .text("memory", &spec.memory_limit_bytes.to_string())
        .text("tmp", &spec.tmp_bytes.to_string())
        .text("concurrency", &spec.concurrency.to_string())
        .text("network", &spec.network.to_string());
    // What the restore hands the runtime anew must not tell two instances apart.
    for (k, v) in spec
        .env
        .iter()
        .filter(|(k, _)| !crate::RESTORE_ENV.contains(&k.as_str()))
    {
        fp.text(k, v);
    }
    fp.finish()
}

impl SnapshotMeta {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: &InstanceSpec,
        criu_version: &str,
        pipes: Vec<DumpedPipe>,
        externals: Vec<ExternalMount>,
        net: (bool, bool),
        images: &Path,
        compaction: CompactStats,
        dump_ms: u64,
    ) -> std::io::Result<SnapshotMeta> {
        let files = checksum::of_dir(images)?;
        let memory_bytes = files
            .iter()
            .filter(|(name, _)| name.starts_with("pages-"))
            .map(|(_, sums)| sums.bytes)
            .sum();
        Ok(SnapshotMeta {
            format: FORMAT,
            backend: "crun".into(),
            criu_version: criu_version.into(),
            kernel: kernel_release(),
            runtime_fingerprint: runtime_fingerprint(&spec.runtime),
            shape: shape(spec),
            runtime_kind: spec.runtime.kind.clone(),
            pipes,
            externals,
            empty_net_ns: net.0,
            loopback_up: net.1,
            files,
            memory_bytes,
            compaction,
            dump_ms,
            uid: None,
        })
    }

    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        icebox_snap::private::write_file(&tmp, &serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(tmp, dir.join(META_FILE))
    }

    /// Reads the metadata of the snapshot in `dir` and checks it can be restored as `spec`
    /// with this criu; the error says why not.
    pub fn load_for(
        dir: &Path,
        spec: &InstanceSpec,
        criu_version: &str,
    ) -> Result<SnapshotMeta, String> {
        let text = std::fs::read(dir.join(META_FILE))
            .map_err(|e| format!("no readable {META_FILE}: {e}"))?;
        let meta: SnapshotMeta =
            serde_json::from_slice(&text).map_err(|e| format!("corrupt {META_FILE}: {e}"))?;
        if meta.format != FORMAT || meta.backend != "crun" {
            return Err(format!(
                "written by another backend or format ({} v{})",
                meta.backend, meta.format
            ));
        }
        if meta.criu_version != criu_version {
            return Err(format!(
                "taken with criu {}, this is criu {criu_version}",
                meta.criu_version
            ));
        }
        let kernel = kernel_release();
        if meta.kernel != kernel {
            return Err(format!("taken on kernel {}, this is {kernel}", meta.kernel));
        }
        if meta.runtime_fingerprint != runtime_fingerprint(&spec.runtime) {
            return Err(format!("the runtime {} changed since", spec.runtime.kind));
        }
        if meta.shape != shape(spec) {
            return Err(
                "taken of an instance started differently (memory limit, /tmp size, concurrency, network or environment)"
                    .into(),
            );
        }
        let images = dir.join(IMAGES_DIR);
        for (name, sums) in &meta.files {
            match std::fs::metadata(images.join(name)) {
                Ok(m) if m.len() == sums.bytes && sums.consistent() => {}
                Ok(m) => {
                    return Err(format!(
                        "{name} holds {} bytes, {} were written",
                        m.len(),
                        sums.bytes
                    ))
                }
                Err(e) => return Err(format!("{name}: {e}")),
            }
        }
        icebox_snap::mounts::check_hosts(&meta.externals).map_err(|e| e.to_string())?;
        Ok(meta)
    }

    /// Checks the image files against their checksums before anything of them is restored:
    /// all of them, except, when `pager` serves the memory, the pages files (the pager checks
    /// those itself, each chunk before its first page is installed).
    pub fn verify(&self, dir: &Path, pager: bool) -> std::io::Result<()> {
        let images = dir.join(IMAGES_DIR);
        for (name, sums) in &self.files {
            if pager && name.starts_with("pages-") {
                continue;
            }
            checksum::verify_file(&images.join(name), name, sums)?;
        }
        Ok(())
    }
}
