//! Snapshot files hold an action's memory (its secrets, its tenants' data): only the daemon's
//! user may read them. Files are 0600, directories 0700, whoever wrote them (CRIU creates its
//! images with the process umask).

use std::fs::{OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const FILE_MODE: u32 = 0o600;
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents as 0700, and makes `dir` itself 0700 if it existed.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
}

/// Opens a new file for writing (truncating an old one) readable by its owner only.
pub fn create_file(path: &Path) -> io::Result<std::fs::File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    // An existing file keeps its mode through open: set it.
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Writes a whole file readable by its owner only.
pub fn write_file(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = create_file(path)?;
    file.write_all(data)?;
    file.sync_all()
}

/// Makes every directory under `dir` (and `dir`) 0700 and every other entry 0600; symlinks
/// are left alone (their mode means nothing).
pub fn restrict_tree(dir: &Path) -> io::Result<()> {
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            restrict_tree(&entry.path())?;
        } else if !kind.is_symlink() {
            std::fs::set_permissions(entry.path(), Permissions::from_mode(FILE_MODE))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_tree_is_made_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pages-1.img"), b"x").unwrap();
        std::fs::set_permissions(dir.join("pages-1.img"), Permissions::from_mode(0o644)).unwrap();
        restrict_tree(&root.path().join("a")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&root.path().join("a")), DIR_MODE);
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&dir.join("pages-1.img")), FILE_MODE);
    }

    #[test]
    fn new_files_and_directories_are_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("x/y");
        create_dir(&dir).unwrap();
        write_file(&dir.join("f"), b"data").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&root.path().join("x")), DIR_MODE);
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&dir.join("f")), FILE_MODE);
    }
}
