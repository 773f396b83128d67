//! CRC-32 of snapshot files in 64 KiB chunks, taken when a file is written and checked before
//! its bytes go into a restored process. Chunks rather than one sum per file: a pager can
//! check only the part of a pages image it is about to install, so a lazy restore still reads
//! only what it uses.

use icebox_core::units::KIB;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes per checksummed chunk (a multiple of the page size, so a page never straddles two).
pub const CHUNK: u64 = 64 * KIB;

/// A file's size and the CRC-32 of each of its chunks (the last one may be short).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSums {
    pub bytes: u64,
    pub crc32: Vec<u32>,
}

impl FileSums {
    /// Whether the list of sums fits the size (a damaged record is refused before use).
    pub fn consistent(&self) -> bool {
        self.crc32.len() as u64 == self.bytes.div_ceil(CHUNK)
    }
}

/// Sums of a buffer holding a whole file.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn of_bytes(data: &[u8]) -> FileSums {
    FileSums {
        bytes: data.len() as u64,
        crc32: data.chunks(CHUNK as usize).map(crc32fast::hash).collect(),
    }
}

/// Sums of a file, read once.
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn of_file(path: &Path) -> io::Result<FileSums> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut sums = FileSums {
        bytes: 0,
        crc32: Vec::new(),
    };
    loop {
        let n = read_full(&mut file, &mut buf)?;
        if n == 0 {
            return Ok(sums);
        }
        sums.bytes += n as u64;
        sums.crc32.push(crc32fast::hash(&buf[..n]));
        if n < buf.len() {
            return Ok(sums);
        }
    }
}

/// Sums of every regular file directly in `dir`, by name.
pub fn of_dir(dir: &Path) -> io::Result<BTreeMap<String, FileSums>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.insert(
                entry.file_name().to_string_lossy().into_owned(),
                of_file(&entry.path())?,
            );
        }
    }
    Ok(files)
}

/// The error a damaged file gives: which file and which bytes.
pub fn mismatch(name: &str, chunk: usize, bytes: u64) -> io::Error {
    let start = chunk as u64 * CHUNK;
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{name}: bytes {start}..{} fail their checksum (the file is damaged)",
            (start + CHUNK).min(bytes)
        ),
    )
}

/// Checks chunk `chunk` of a file whose bytes are `data` (the chunk's own bytes).
pub fn check_chunk(name: &str, sums: &FileSums, chunk: usize, data: &[u8]) -> io::Result<()> {
    match sums.crc32.get(chunk) {
        Some(crc) if *crc == crc32fast::hash(data) => Ok(()),
        _ => Err(mismatch(name, chunk, sums.bytes)),
    }
}

/// Checks a whole file against its sums.
pub fn verify_file(path: &Path, name: &str, sums: &FileSums) -> io::Result<()> {
    verify_chunks(path, name, sums, 0..sums.crc32.len())
}

/// Checks some chunks of a file (in any order; each read once).
#[expect(
    clippy::cast_possible_truncation,
    reason = "u64 to usize is lossless on the 64-bit targets icebox builds for"
)]
pub fn verify_chunks(
    path: &Path,
    name: &str,
    sums: &FileSums,
    chunks: impl IntoIterator<Item = usize>,
) -> io::Result<()> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len != sums.bytes || !sums.consistent() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} holds {len} bytes, {} were written", sums.bytes),
        ));
    }
    let mut buf = vec![0u8; CHUNK as usize];
    for chunk in chunks {
        let start = chunk as u64 * CHUNK;
        let n = (sums.bytes.saturating_sub(start)).min(CHUNK) as usize;
        file.read_exact_at(&mut buf[..n], start)?;
        check_chunk(name, sums, chunk, &buf[..n])?;
    }
    Ok(())
}

/// The chunks that bytes `offset..offset + len` fall in.
pub fn chunks_of(offset: u64, len: u64) -> std::ops::Range<usize> {
    if len == 0 {
        return 0..0;
    }
    (offset / CHUNK) as usize..((offset + len - 1) / CHUNK) as usize + 1
}

fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_byte_is_found_in_its_chunk_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages-1.img");
        let data: Vec<u8> = (0..(3 * CHUNK + 100)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let sums = of_file(&path).unwrap();
        assert_eq!(sums, of_bytes(&data));
        assert_eq!(sums.crc32.len(), 4);
        verify_file(&path, "pages-1.img", &sums).unwrap();

        let at = 2 * CHUNK + 7;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all_at(b"garbage", at)
            .unwrap();
        let err = verify_file(&path, "pages-1.img", &sums).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("bytes 131072..196608"), "{err}");
        // The other chunks still check out.
        verify_chunks(&path, "pages-1.img", &sums, [0, 1, 3]).unwrap();
        assert!(verify_chunks(&path, "pages-1.img", &sums, [2]).is_err());
    }

    #[test]
    fn a_file_of_another_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 5000]).unwrap();
        let sums = of_file(&path).unwrap();
        std::fs::write(&path, vec![1u8; 4999]).unwrap();
        assert!(verify_file(&path, "f", &sums).is_err());
    }

    #[test]
    fn ranges_map_to_their_chunks() {
        assert_eq!(chunks_of(0, 4096), 0..1);
        assert_eq!(chunks_of(CHUNK - 4096, 8192), 0..2);
        assert_eq!(chunks_of(CHUNK, CHUNK), 1..2);
        assert_eq!(chunks_of(5, 0), 0..0);
    }
}
