//! Checks on uploaded zip/jar archives before they are stored: an archive must open, and no
//! entry may escape the directory it is extracted to.

use std::io::{Read, Seek};

/// Reads the archive's central directory (from a file in the code store: seeks, not a copy).
pub fn validate(reader: impl Read + Seek, what: &str) -> Result<usize, String> {
    let mut archive =
        zip::ZipArchive::new(reader).map_err(|e| format!("the {what} cannot be read: {e}"))?;
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|e| format!("the {what} is damaged: {e}"))?;
        let name = entry.name();
        if unsafe_entry(name) {
            return Err(format!("the {what} contains the entry '{name}', which points outside the archive; remove absolute paths and '..' from it"));
        }
    }
    Ok(archive.len())
}

fn unsafe_entry(name: &str) -> bool {
    name.starts_with('/')
        || name.starts_with('\\')
        || name.split(['/', '\\']).any(|part| part == "..")
        || name.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn zip_with(names: &[&str]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for n in names {
            w.start_file(*n, zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(b"x").unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn accepts_normal_archives_and_rejects_escapes() {
        assert_eq!(
            validate(
                Cursor::new(zip_with(&["__main__.py", "lib/util.py"])),
                "zip"
            ),
            Ok(2)
        );
        for bad in ["../evil.py", "a/../../evil", "/etc/passwd", "C:evil"] {
            let err = validate(Cursor::new(zip_with(&["ok.py", bad])), "zip").unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(validate(Cursor::new(b"not a zip"), "jar")
            .unwrap_err()
            .contains("cannot be read"));
    }
}
