//! Room for a swap file. swapon takes only a file with every block allocated, so the whole
//! size must be free when the pool opens; a filesystem without it refuses the pool at start
//! with the figures rather than a bare ENOSPC. Once allocated, the file's blocks are its own:
//! the filesystem filling up later cannot take them back.

use std::io;
use std::path::Path;

/// Bytes an unprivileged writer could still allocate on the filesystem holding `dir`
/// (statvfs `f_bavail`; root may dip into the reserved blocks, so this is the safe figure).
pub(crate) fn available(dir: &Path) -> io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The error a pool gets when its swap file does not fit.
pub(crate) fn no_room(path: &Path, needed: u64, available: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "{}: no room for the swap file: {} needed, {} available on its filesystem",
            path.display(),
            bytes(needed),
            bytes(available)
        ),
    )
}

fn bytes(n: u64) -> String {
    format!("{n} bytes ({})", bytesize::ByteSize(n).to_string_as(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_path_and_both_figures() {
        let err = no_room(Path::new("/srv/swap"), 256 << 20, 12 << 20);
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(
            err.to_string(),
            "/srv/swap: no room for the swap file: 268435456 bytes (256.0 MiB) needed, \
             12582912 bytes (12.0 MiB) available on its filesystem"
        );
    }

    #[test]
    fn a_real_filesystem_has_a_figure() {
        let dir = tempfile::tempdir().unwrap();
        assert!(available(dir.path()).unwrap() > 0);
        assert!(available(&dir.path().join("missing")).is_err());
    }
}
