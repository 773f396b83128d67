//! Zip and jar action code, decoded, one file per content in `<state_dir>/code/<sha256>`.
//!
//! An upload's base64 is decoded straight into a file (the daemon never holds the decoded
//! archive, nor a second copy of the base64), and the registry row and the in-memory action
//! keep only the digest. Content addressing makes an update with the same archive, or two
//! actions with the same one, share one file. Runtimes still receive base64 at /init: it is
//! encoded from the file when an instance starts, and dropped once sent.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use icebox_core::units::KIB_USIZE;
use icebox_core::Exec;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const DIR: &str = "code";
/// A temporary upload file: ignored by the store, removed by `collect` once stale.
const PARTIAL_PREFIX: &str = ".upload-";

#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    /// Decoded size, and the limit it exceeds.
    #[error("exec larger than allowed: {0} > {1} bytes.")]
    TooLarge(u64, u64),
    #[error("exec.binary is true but exec.code is not base64: {0}")]
    NotBase64(String),
    #[error("{0}")]
    BadArchive(String),
    #[error("cannot store the action code: {0}")]
    Io(#[from] std::io::Error),
}

pub struct CodeStore {
    dir: PathBuf,
    /// Read-held from an upload's file being named until its action is in the cache,
    /// write-held around `collect`: a collection never removes a file whose action is about
    /// to appear.
    pub naming: tokio::sync::RwLock<()>,
    usage: Mutex<Usage>,
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Usage {
    pub files: u64,
    pub bytes: u64,
}

/// What an upload became: the digest its file is named by.
#[derive(Debug, Clone)]
pub struct Stored {
    pub sha256: String,
}

impl CodeStore {
    pub fn open(state_dir: &Path) -> std::io::Result<CodeStore> {
        let dir = state_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        let store = CodeStore {
            dir,
            naming: tokio::sync::RwLock::new(()),
            usage: Mutex::new(Usage::default()),
        };
        store.recount();
        Ok(store)
    }

    /// Decodes `b64` into the store, refusing more than `max` decoded bytes before decoding
    /// any, and checks the archive with `validate` (reading it from the file).
    pub fn put_base64(
        &self,
        b64: &str,
        max: u64,
        validate: impl FnOnce(&mut std::fs::File) -> Result<(), String>,
    ) -> Result<Stored, CodeError> {
        let b64 = b64.trim();
        let size = decoded_len(b64);
        if size > max {
            return Err(CodeError::TooLarge(size, max));
        }
        let mut partial = tempfile::Builder::new()
            .prefix(PARTIAL_PREFIX)
            .tempfile_in(&self.dir)?;
        let mut hasher = Sha256::new();
        let mut decoder = base64::read::DecoderReader::new(b64.as_bytes(), &STANDARD);
        let mut buf = vec![0u8; 256 * KIB_USIZE];
        let mut written = 0u64;
        loop {
            let n = match decoder.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err(CodeError::NotBase64(
                        e.into_inner()
                            .map_or("invalid data".into(), |i| i.to_string()),
                    ))
                }
                Err(e) => return Err(e.into()),
            };
            hasher.update(&buf[..n]);
            partial.write_all(&buf[..n])?;
            written += n as u64;
        }
        drop(buf);
        let file = partial.as_file_mut();
        file.flush()?;
        file.rewind()?;
        validate(file).map_err(CodeError::BadArchive)?;
        file.sync_all()?;
        let sha256 = hex(&hasher.finalize());
        let path = self.dir.join(&sha256);
        if path.exists() {
            // The same content is already stored: the temporary file goes.
            drop(partial);
        } else {
            partial.persist(&path).map_err(|e| e.error)?;
            let mut usage = self.usage.lock().unwrap();
            usage.files += 1;
            usage.bytes += written;
        }
        Ok(Stored { sha256 })
    }

    /// The code as a runtime's /init and a GET take it: base64 of the stored file, or the
    /// inline code of a text action (and of zips stored before the code store existed).
    pub fn code_of(&self, exec: &Exec) -> std::io::Result<String> {
        match &exec.sha256 {
            None => Ok(exec.code.clone()),
            Some(sha256) => load_base64(&self.dir, sha256),
        }
    }

    /// The stored archive of this digest, to read.
    pub fn open_archive(&self, sha256: &str) -> std::io::Result<std::fs::File> {
        std::fs::File::open(self.dir.join(sha256))
    }

    /// Removes the files no action in `keep` names, and stale partial uploads.
    pub fn collect(&self, keep: &HashSet<String>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale_partial = name.starts_with(PARTIAL_PREFIX)
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > std::time::Duration::from_secs(3600));
            let unused = !name.starts_with(PARTIAL_PREFIX) && !keep.contains(&name);
            if stale_partial || unused {
                if let Err(e) = std::fs::remove_file(entry.path()) {
                    tracing::warn!("cannot remove unused action code {name}: {e}");
                }
            }
        }
        self.recount();
    }

    pub fn usage(&self) -> Usage {
        *self.usage.lock().unwrap()
    }

    fn recount(&self) {
        let mut usage = Usage::default();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(PARTIAL_PREFIX)
                {
                    continue;
                }
                if let Ok(meta) = entry.metadata() {
                    usage.files += 1;
                    usage.bytes += meta.len();
                }
            }
        }
        *self.usage.lock().unwrap() = usage;
    }
}

/// The code an instance's /init sends, for the pool (which knows the state directory, not
/// the store).
pub fn init_code(state_dir: &Path, exec: &Exec) -> std::io::Result<String> {
    match &exec.sha256 {
        None => Ok(exec.code.clone()),
        Some(sha256) => load_base64(&state_dir.join(DIR), sha256),
    }
}

fn load_base64(dir: &Path, sha256: &str) -> std::io::Result<String> {
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the stored code digest {sha256:?} is not a sha256"),
        ));
    }
    let raw = std::fs::read(dir.join(sha256)).map_err(|e| {
        std::io::Error::new(e.kind(), format!("reading the action code {sha256}: {e}"))
    })?;
    Ok(STANDARD.encode(raw))
}

/// Bytes the base64 text decodes to (padding counted out), without decoding it.
pub fn decoded_len(b64: &str) -> u64 {
    let len = b64.len() as u64;
    let padding = b64.bytes().rev().take_while(|&b| b == b'=').count().min(2) as u64;
    (len / 4 * 3 + (len % 4).saturating_sub(1)).saturating_sub(padding)
}

/// OpenWhisk's test for code that is an archive: not empty, a multiple of 4 long (trimmed),
/// the base64 alphabet with at most two `=` at the end.
pub fn is_base64(code: &str) -> bool {
    let t = code.trim().as_bytes();
    if t.is_empty() || !t.len().is_multiple_of(4) {
        return false;
    }
    let body = t
        .strip_suffix(b"==")
        .or_else(|| t.strip_suffix(b"="))
        .unwrap_or(t);
    body.iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::MIB;

    fn exec_of(stored: &Stored) -> Exec {
        Exec {
            kind: "python:3".into(),
            code: String::new(),
            binary: true,
            main: None,
            sha256: Some(stored.sha256.clone()),
        }
    }

    #[test]
    fn base64_is_told_from_source_code() {
        assert!(is_base64(&STANDARD.encode(b"PK\x03\x04 a zip")));
        assert!(is_base64("UEsD\n"));
        for source in ["", "def main(args): return args", "abc", "ab=c", "a==="] {
            assert!(!is_base64(source), "{source:?}");
        }
    }

    #[test]
    fn decoded_length_matches_decoding() {
        for n in 0..20u8 {
            let raw: Vec<u8> = (0..n).collect();
            let b64 = STANDARD.encode(&raw);
            assert_eq!(decoded_len(&b64), u64::from(n), "{b64}");
        }
    }

    #[test]
    fn stores_once_per_content_and_collects_unused() {
        let dir = tempfile::tempdir().unwrap();
        let store = CodeStore::open(dir.path()).unwrap();
        let raw = vec![7u8; 300_000];
        let b64 = STANDARD.encode(&raw);
        let a = store.put_base64(&b64, MIB, |_| Ok(())).unwrap();
        let b = store.put_base64(&b64, MIB, |_| Ok(())).unwrap();
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(store.usage().files, 1);
        assert_eq!(store.usage().bytes, 300_000);
        assert_eq!(store.code_of(&exec_of(&a)).unwrap(), b64);
        assert_eq!(init_code(dir.path(), &exec_of(&a)).unwrap(), b64);

        store.collect(&HashSet::from([a.sha256.clone()]));
        assert_eq!(store.usage().files, 1);
        store.collect(&HashSet::new());
        assert_eq!(store.usage().files, 0);
        assert!(store.code_of(&exec_of(&a)).is_err());
    }

    #[test]
    fn refuses_too_large_bad_base64_and_bad_archives_leaving_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = CodeStore::open(dir.path()).unwrap();
        let b64 = STANDARD.encode(vec![1u8; 1001]);
        assert!(matches!(
            store.put_base64(&b64, 1000, |_| Ok(())),
            Err(CodeError::TooLarge(1001, 1000))
        ));
        assert!(matches!(
            store.put_base64("not*base64", 1000, |_| Ok(())),
            Err(CodeError::NotBase64(_))
        ));
        let refused = store.put_base64(&b64, 2000, |file| {
            let mut head = [0u8; 4];
            file.read_exact(&mut head).unwrap();
            Err(format!("head {head:?}"))
        });
        assert!(matches!(refused, Err(CodeError::BadArchive(m)) if m == "head [1, 1, 1, 1]"));
        assert_eq!(std::fs::read_dir(dir.path().join(DIR)).unwrap().count(), 0);
    }
}
