//! `snapshot.json`: what a VM snapshot directory holds and what it may be restored on. A
//! restore compares the fingerprint with the VM it would start and checks the files against
//! their recorded sizes (and the device state against its checksum) before QEMU sees them:
//! a different guest image, QEMU, accelerator, memory size or runtime is never restored.

use super::integrity::ChunkSums;
use icebox_core::units::MIB;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

pub use crate::fnv::fnv1a;

pub const META_FILE: &str = icebox_sandbox_api::SNAPSHOT_META_FILE;
/// Guest RAM, sparse: zero pages are holes.
pub const MEMORY_FILE: &str = "memory";
/// QEMU's device state (the migration stream without RAM).
pub const STATE_FILE: &str = "state";
/// 2: the RAM image carries its chunk checksums.
const FORMAT: u32 = 2;

/// Everything a restored VM must share with the VM that was snapshotted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// sha256 of each file of the guest image (its manifest's `sha256`).
    pub image: BTreeMap<String, String>,
    /// First line of `qemu --version`.
    pub qemu: String,
    pub accel: String,
    pub memory_mib: u64,
    pub vcpus: u32,
    /// The runtime's directory name (python, nodejs, java): its files are in the image.
    pub runtime: String,
}

impl Fingerprint {
    /// The first difference that forbids restoring a snapshot taken as `self` as `other`.
    pub fn mismatch(&self, other: &Fingerprint) -> Option<String> {
        if self.image != other.image {
            return Some("it was taken with another guest image".into());
        }
        let fields = [
            ("QEMU", self.qemu.clone(), other.qemu.clone()),
            ("accelerator", self.accel.clone(), other.accel.clone()),
            (
                "VM memory (MiB)",
                self.memory_mib.to_string(),
                other.memory_mib.to_string(),
            ),
            ("vCPUs", self.vcpus.to_string(), other.vcpus.to_string()),
            ("runtime", self.runtime.clone(), other.runtime.clone()),
        ];
        fields
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, a, b)| format!("its {what} is {a}, this VM's would be {b}"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryImage {
    /// Size of the file: the guest's RAM.
    pub bytes: u64,
    /// Pages with data (the rest are holes, read as zeros without touching the disk).
    pub data_pages: u64,
    /// CRC-32 of each 64 KiB chunk with data, checked before QEMU maps the file.
    pub crc32: ChunkSums,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateImage {
    pub bytes: u64,
    /// FNV-1a of the file: QEMU would load a damaged stream into a broken VM.
    pub fnv1a: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub format: u32,
    pub backend: String,
    /// Random, per snapshot: a loading set names the snapshot it was recorded on.
    pub id: String,
    pub fingerprint: Fingerprint,
    /// The instance id the agent in the guest knows the runtime by (the template's).
    pub guest_instance: String,
    pub memory: MemoryImage,
    pub state: StateImage,
    pub created_ms: u64,
    pub took_ms: u64,
}

impl SnapshotMeta {
    pub fn new(
        fingerprint: Fingerprint,
        guest_instance: String,
        memory: MemoryImage,
        state: StateImage,
        took_ms: u64,
    ) -> SnapshotMeta {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        SnapshotMeta {
            format: FORMAT,
            backend: "vm".into(),
            id: icebox_core::ids::random_hex128(),
            fingerprint,
            guest_instance,
            memory,
            state,
            created_ms: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
            took_ms,
        }
    }

    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!(".{META_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(tmp, dir.join(META_FILE))
    }

    /// Reads `dir`'s snapshot and checks it can be restored as `expected`: every file there
    /// with its recorded size, the device state intact, the same fingerprint.
    pub fn open(dir: &Path, expected: &Fingerprint) -> Result<SnapshotMeta, String> {
        let path = dir.join(META_FILE);
        let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let meta: SnapshotMeta = serde_json::from_slice(&text)
            .map_err(|e| format!("{} is not a VM snapshot's record: {e}", path.display()))?;
        if meta.format != FORMAT || meta.backend != "vm" {
            return Err(format!(
                "{} is a {} snapshot of format {}, not a vm snapshot of format {FORMAT}",
                path.display(),
                meta.backend,
                meta.format
            ));
        }
        if let Some(why) = meta.fingerprint.mismatch(expected) {
            return Err(format!("the snapshot does not fit this VM: {why}"));
        }
        let size = |name: &str| {
            std::fs::metadata(dir.join(name))
                .map(|m| m.len())
                .map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        let memory = size(MEMORY_FILE)?;
        if memory != meta.memory.bytes || memory != expected.memory_mib * MIB {
            return Err(format!(
                "the memory image has {memory} bytes, expected {}",
                meta.memory.bytes
            ));
        }
        let state = std::fs::read(dir.join(STATE_FILE))
            .map_err(|e| format!("{}: {e}", dir.join(STATE_FILE).display()))?;
        if state.len() as u64 != meta.state.bytes || fnv1a(&state) != meta.state.fnv1a {
            return Err(format!(
                "the device state is damaged ({} bytes, {} recorded)",
                state.len(),
                meta.state.bytes
            ));
        }
        Ok(meta)
    }
}

/// The first line of `qemu --version`, asked once per binary.
pub fn qemu_version(qemu: &str) -> Result<String, String> {
    static KNOWN: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    if let Some(v) = KNOWN.lock().unwrap().get(qemu) {
        return Ok(v.clone());
    }
    let out = std::process::Command::new(qemu)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {qemu} --version: {e}"))?;
    let version = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if !out.status.success() || version.is_empty() {
        return Err(format!("{qemu} --version said nothing useful"));
    }
    KNOWN
        .lock()
        .unwrap()
        .insert(qemu.to_string(), version.clone());
    Ok(version)
}

/// The sha256s the image's manifest lists for its files.
pub fn image_hashes(manifest: &serde_json::Value) -> BTreeMap<String, String> {
    manifest
        .get("sha256")
        .and_then(|v| v.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp() -> Fingerprint {
        Fingerprint {
            image: [("rootfs.erofs".to_string(), "ab".to_string())].into(),
            qemu: "QEMU emulator version 7.2.22".into(),
            accel: "tcg".into(),
            memory_mib: 1,
            vcpus: 1,
            runtime: "python".into(),
        }
    }

    fn write_snapshot(dir: &Path) -> SnapshotMeta {
        let state = b"QEVM device state".to_vec();
        std::fs::write(dir.join(STATE_FILE), &state).unwrap();
        let mem = std::fs::File::create(dir.join(MEMORY_FILE)).unwrap();
        mem.set_len(MIB).unwrap();
        let meta = SnapshotMeta::new(
            fp(),
            "snap-1".into(),
            MemoryImage {
                bytes: MIB,
                data_pages: 0,
                crc32: Default::default(),
            },
            StateImage {
                bytes: state.len() as u64,
                fnv1a: fnv1a(&state),
            },
            5,
        );
        meta.write(dir).unwrap();
        meta
    }

    #[test]
    fn a_written_snapshot_opens_with_its_own_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let meta = write_snapshot(dir.path());
        assert_eq!(SnapshotMeta::open(dir.path(), &fp()).unwrap(), meta);
    }

    #[test]
    fn another_image_runtime_or_size_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path());
        let mut other = fp();
        other.image.insert("rootfs.erofs".into(), "cd".into());
        let e = SnapshotMeta::open(dir.path(), &other).unwrap_err();
        assert!(e.contains("another guest image"), "{e}");
        let mut other = fp();
        other.runtime = "nodejs".into();
        let e = SnapshotMeta::open(dir.path(), &other).unwrap_err();
        assert!(e.contains("runtime is python"), "{e}");
        let mut other = fp();
        other.qemu = "QEMU emulator version 8.0.0".into();
        assert!(SnapshotMeta::open(dir.path(), &other).is_err());
    }

    #[test]
    fn damaged_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path());
        // Same length, one byte changed.
        std::fs::write(dir.path().join(STATE_FILE), b"QEVM device stat3").unwrap();
        let e = SnapshotMeta::open(dir.path(), &fp()).unwrap_err();
        assert!(e.contains("damaged"), "{e}");

        write_snapshot(dir.path());
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(MEMORY_FILE))
            .unwrap()
            .set_len(4096)
            .unwrap();
        let e = SnapshotMeta::open(dir.path(), &fp()).unwrap_err();
        assert!(e.contains("memory image"), "{e}");

        write_snapshot(dir.path());
        std::fs::write(dir.path().join(META_FILE), b"{not json").unwrap();
        assert!(SnapshotMeta::open(dir.path(), &fp()).is_err());

        write_snapshot(dir.path());
        std::fs::remove_file(dir.path().join(STATE_FILE)).unwrap();
        assert!(SnapshotMeta::open(dir.path(), &fp()).is_err());
    }

    #[test]
    fn image_hashes_come_from_the_manifest() {
        let m = serde_json::json!({"sha256": {"vmlinux": "aa", "rootfs.erofs": "bb"}});
        let h = image_hashes(&m);
        assert_eq!(h.len(), 2);
        assert_eq!(h["vmlinux"], "aa");
        assert!(image_hashes(&serde_json::json!({})).is_empty());
    }
}
