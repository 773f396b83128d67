//! The registry's files in the state directory: the database (private to the daemon's user)
//! and a marker naming the registry that belongs there, so a deleted or swapped database is
//! refused instead of silently starting an empty node.

use super::Registry;
use anyhow::{bail, Context};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const DB_FILE: &str = "icebox.db";
pub const ID_MARKER: &str = "registry-id";

/// Action code and default parameters (often secrets) live in these files.
const PRIVATE: u32 = 0o600;

/// Opens `<state_dir>/icebox.db`, checking it against the marker file:
/// - no database and no marker: a first start, a new registry;
/// - a database and no marker: a state directory from before the marker existed, adopted;
/// - a marker but no database, or a database with another id: refused, unless
///   `accept_empty` (--init-registry) says the operator means it.
pub fn open_in_state_dir(state_dir: &Path, accept_empty: bool) -> anyhow::Result<Registry> {
    let db = state_dir.join(DB_FILE);
    let marker_path = state_dir.join(ID_MARKER);
    let marker = read_marker(&marker_path)?;
    let db_exists = std::fs::symlink_metadata(&db).is_ok();
    if !db_exists {
        if let Some(expected) = &marker {
            if !accept_empty {
                bail!(
                    "the registry {} is missing, but {} says this state directory has registry {expected}: \
                     refusing to start with an empty registry (every action would be gone). Restore the \
                     file, or start once with --init-registry (ICEBOX_INIT_REGISTRY=true) to begin with \
                     an empty registry on purpose",
                    db.display(),
                    marker_path.display()
                );
            }
            tracing::warn!(
                "--init-registry: starting with an EMPTY registry; registry {expected} of {} is gone",
                state_dir.display()
            );
            // A journal left from the lost database must not be replayed into the new one.
            for leftover in [wal_path(&db, "-wal"), wal_path(&db, "-shm")] {
                let _ = std::fs::remove_file(leftover);
            }
        }
    }
    let registry = Registry::open(&db)?;
    let id = registry
        .id()
        .with_context(|| format!("reading the id of registry {}", db.display()))?;
    match marker.as_deref() {
        Some(expected) if expected == id => {}
        Some(expected) if db_exists && !accept_empty => bail!(
            "the registry {} is registry {id}, but {} says this state directory has registry {expected}: \
             refusing to use a registry from elsewhere. Put the right file back, or start once with \
             --init-registry (ICEBOX_INIT_REGISTRY=true) to adopt this one",
            db.display(),
            marker_path.display()
        ),
        _ => {
            write_marker(&marker_path, &id)?;
            if marker.is_none() && db_exists {
                tracing::info!("registry {id} recorded in {}", marker_path.display());
            }
        }
    }
    Ok(registry)
}

fn read_marker(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let id = text.trim();
            if id.is_empty() {
                bail!(
                    "{} is empty: it should name the registry of this state directory",
                    path.display()
                );
            }
            Ok(Some(id.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaced whole (write then rename), so a crash never leaves a torn marker behind.
fn write_marker(path: &Path, id: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE)
            .open(&tmp)?;
        writeln!(f, "{id}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// Creates the database file private before SQLite creates it with the umask's mode; SQLite
/// gives its -wal and -shm files the database file's mode.
pub(super) fn create_private(db: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE)
        .open(db)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Narrows the database and its journal files to the daemon's user (files created readable by
/// everyone before this fix).
pub(super) fn make_private(db: &Path) -> std::io::Result<()> {
    for path in [db.to_path_buf(), wal_path(db, "-wal"), wal_path(db, "-shm")] {
        match std::fs::metadata(&path) {
            Ok(meta) if meta.permissions().mode() & 0o777 != PRIVATE => {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(PRIVATE))?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn wal_path(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::testutil::spec;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn database_and_journal_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let reg = open_in_state_dir(dir.path(), false).unwrap();
        reg.put_action(spec("guest", "a"), false).unwrap();
        for f in [DB_FILE, "icebox.db-wal", "icebox.db-shm", ID_MARKER] {
            assert_eq!(mode(&dir.path().join(f)), 0o600, "{f}");
        }
    }

    #[test]
    fn existing_world_readable_files_are_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        drop(open_in_state_dir(dir.path(), false).unwrap());
        let db = dir.path().join(DB_FILE);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(open_in_state_dir(dir.path(), false).unwrap());
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn first_start_and_restart_just_work() {
        let dir = tempfile::tempdir().unwrap();
        let first = open_in_state_dir(dir.path(), false).unwrap().id().unwrap();
        let again = open_in_state_dir(dir.path(), false).unwrap().id().unwrap();
        assert_eq!(first, again);
        assert_eq!(
            read_marker(&dir.path().join(ID_MARKER)).unwrap().as_deref(),
            Some(first.as_str())
        );
    }

    #[test]
    fn pre_marker_state_dir_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(&dir.path().join(DB_FILE)).unwrap();
        reg.put_action(spec("guest", "a"), false).unwrap();
        drop(reg);
        let reg = open_in_state_dir(dir.path(), false).unwrap();
        assert_eq!(reg.all_actions().unwrap().len(), 1);
        assert!(dir.path().join(ID_MARKER).exists());
    }

    #[test]
    fn missing_database_is_refused_unless_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let reg = open_in_state_dir(dir.path(), false).unwrap();
        reg.put_action(spec("guest", "a"), false).unwrap();
        drop(reg);
        std::fs::remove_file(dir.path().join(DB_FILE)).unwrap();
        let msg = format!(
            "{:#}",
            open_in_state_dir(dir.path(), false)
                .err()
                .expect("must refuse")
        );
        assert!(
            msg.contains("is missing") && msg.contains("--init-registry"),
            "{msg}"
        );
        assert!(
            !dir.path().join(DB_FILE).exists(),
            "a refused start creates nothing"
        );
        let reg = open_in_state_dir(dir.path(), true).unwrap();
        assert!(reg.all_actions().unwrap().is_empty());
        drop(reg);
        // The new registry is now the one the marker names.
        open_in_state_dir(dir.path(), false).unwrap();
    }

    #[test]
    fn database_from_elsewhere_is_refused() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        drop(open_in_state_dir(a.path(), false).unwrap());
        drop(open_in_state_dir(b.path(), false).unwrap());
        std::fs::copy(b.path().join(DB_FILE), a.path().join(DB_FILE)).unwrap();
        let msg = format!(
            "{:#}",
            open_in_state_dir(a.path(), false)
                .err()
                .expect("must refuse")
        );
        assert!(msg.contains("from elsewhere"), "{msg}");
        open_in_state_dir(a.path(), true).unwrap();
        open_in_state_dir(a.path(), false).unwrap();
    }
}
