//! `<state_dir>/offload-pool.json`: the zram device and swap file a daemon of this state dir
//! created (and whether it turned zswap on), so the next start can remove them if that daemon
//! died without closing them.

use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const FILE: &str = "offload-pool.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    /// The zram device's id (a marker of an older daemon always has one).
    #[serde(default)]
    pub device: Option<u32>,
    pub boot_id: String,
    /// What the device's disksize reads once configured: tells our device from a later one
    /// that reused the id.
    #[serde(default)]
    pub disksize: u64,
    #[serde(default)]
    pub swap_file: Option<PathBuf>,
    /// zswap was off and this daemon turned it on.
    #[serde(default)]
    pub zswap_turned_on: bool,
}

pub(crate) fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// Written to a temporary file, synced and renamed: a crash leaves the old marker or the
/// new one, never half of one.
pub(crate) fn write(state_dir: &Path, marker: &Marker) -> io::Result<()> {
    let target = path(state_dir);
    let tmp = state_dir.join(format!(".{FILE}.tmp"));
    let text = serde_json::to_vec(marker).map_err(io::Error::other)?;
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    result.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", target.display())))
}

/// `Ok(None)` when there is no marker; Err when it cannot be read or parsed.
pub(crate) fn read(state_dir: &Path) -> io::Result<Option<Marker>> {
    let target = path(state_dir);
    match std::fs::read(&target) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", target.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("{}: {e}", target.display()),
        )),
    }
}

pub(crate) fn remove(state_dir: &Path) -> io::Result<()> {
    let target = path(state_dir);
    match std::fs::remove_file(&target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("{}: {e}", target.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_absence() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let m = Marker {
            device: Some(3),
            boot_id: "b".into(),
            disksize: 4096,
            swap_file: Some("/var/swap".into()),
            zswap_turned_on: true,
        };
        write(dir.path(), &m).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(m));
        remove(dir.path()).unwrap();
        remove(dir.path()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        // An older daemon's marker (zram only) still reads.
        std::fs::write(
            path(dir.path()),
            r#"{"device":2,"boot_id":"b","disksize":8192}"#,
        )
        .unwrap();
        let old = read(dir.path()).unwrap().unwrap();
        assert_eq!(
            (old.device, old.swap_file, old.zswap_turned_on),
            (Some(2), None, false)
        );
        std::fs::write(path(dir.path()), "{").unwrap();
        assert_eq!(
            read(dir.path()).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }
}
