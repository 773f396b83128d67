//! The mappings of a process: `/proc/PID/smaps` (per-mapping memory counters, one page-table
//! walk per mapping) and `/proc/PID/maps` (identity only, no page-table walk — cheap enough to
//! run over every live instance each time the exclude set of a page-out is built).

use crate::smaps::parse_kb;
use std::collections::HashSet;
use std::io;

/// One mapping of a process, as `/proc/PID/smaps` reports it. Anonymous and special mappings
/// (`[heap]`, `[stack]`, `[vdso]`, …) are included too: their `inode` is 0.
///
/// Memory counters are in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    /// As the kernel prints it: a file's path (with `" (deleted)"` appended once the file is
    /// unlinked), a `[name]` for special mappings, or empty for anonymous memory.
    pub path: String,
    pub inode: u64,
    /// `"major:minor"` in hex, as printed by the kernel. With `inode` it names the file whose
    /// page cache backs the mapping — also for overlayfs, where the kernel prints the
    /// underlying file's device and inode.
    pub dev: String,
    pub offset: u64,
    pub rss: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    pub shared_clean: u64,
    /// Anonymous pages in the mapping: for a private file mapping, its copy-on-write copies.
    pub anonymous: u64,
    /// `"r-xp"`: read, write, execute, then `p` (private) or `s` (shared).
    pub perms: String,
}

const DELETED_SUFFIX: &str = " (deleted)";

impl FileMapping {
    /// Backed by a regular file that still exists: not anonymous, not special, not unlinked.
    pub fn is_live_file(&self) -> bool {
        self.inode != 0 && self.path.starts_with('/') && !self.path.ends_with(DELETED_SUFFIX)
    }

    /// Private (copy-on-write) rather than shared.
    pub fn is_private(&self) -> bool {
        self.perms.ends_with('p')
    }
}

/// Every mapping of `pid`, with its memory counters.
///
/// A process that exited fails with `NotFound` or `ESRCH`, as for `smaps_rollup`.
pub fn file_mappings(pid: u32) -> io::Result<Vec<FileMapping>> {
    parse_smaps(&std::fs::read_to_string(format!("/proc/{pid}/smaps"))?)
}

/// The `(dev, inode)` of every file `pid` maps, from `/proc/PID/maps`.
///
/// Deleted files are included: a process may still use their pages, and over-including only
/// makes a page-out that consults this set more careful.
pub fn mapped_files(pid: u32) -> io::Result<HashSet<(String, u64)>> {
    parse_mapped_files(&std::fs::read_to_string(format!("/proc/{pid}/maps"))?)
}

/// Parses the text of `/proc/PID/smaps`.
pub fn parse_smaps(text: &str) -> io::Result<Vec<FileMapping>> {
    let mut mappings: Vec<FileMapping> = Vec::new();
    for line in text.lines() {
        if let Some(header) = parse_header(line) {
            mappings.push(header?);
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(bad(line));
        };
        let Some(current) = mappings.last_mut() else {
            return Err(bad(line));
        };
        let field = match key {
            "Rss" => &mut current.rss,
            "Private_Clean" => &mut current.private_clean,
            "Private_Dirty" => &mut current.private_dirty,
            "Shared_Clean" => &mut current.shared_clean,
            "Anonymous" => &mut current.anonymous,
            // Other counters, `VmFlags`, `THPeligible`, `ProtectionKey`: not used here, and
            // the last three are not in kB, so they are not parsed at all.
            _ => continue,
        };
        *field = parse_kb(value).ok_or_else(|| bad(line))?;
    }
    Ok(mappings)
}

/// Parses the text of `/proc/PID/maps` into the `(dev, inode)` of each file-backed mapping.
pub fn parse_mapped_files(text: &str) -> io::Result<HashSet<(String, u64)>> {
    let mut files = HashSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mapping = parse_header(line).unwrap_or_else(|| Err(bad(line)))?;
        if mapping.inode != 0 {
            files.insert((mapping.dev, mapping.inode));
        }
    }
    Ok(files)
}

/// A mapping header, `"7f10…-7f10… r-xp 00026000 fe:00 326269     /usr/lib/…/libc.so.6"`.
/// `None` when the line is not a header (a counter line); `Some(Err)` when it looks like one
/// but is malformed.
fn parse_header(line: &str) -> Option<io::Result<FileMapping>> {
    let (range, rest) = split_field(line);
    let (start, end) = range.split_once('-')?;
    // Counter names never contain '-' before their ':', so a '-' means this is a header.
    if range.contains(':') {
        return None;
    }
    Some(parse_header_fields(line, start, end, rest))
}

fn parse_header_fields(line: &str, start: &str, end: &str, rest: &str) -> io::Result<FileMapping> {
    let (perms, rest) = split_field(rest);
    let (offset, rest) = split_field(rest);
    let (dev, rest) = split_field(rest);
    let (inode, rest) = split_field(rest);
    let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad(line));
    if perms.len() != 4 || !dev.contains(':') {
        return Err(bad(line));
    }
    Ok(FileMapping {
        start: hex(start)?,
        end: hex(end)?,
        perms: perms.to_owned(),
        offset: hex(offset)?,
        dev: dev.to_owned(),
        inode: inode.parse().map_err(|_| bad(line))?,
        // The kernel pads before the path and leaves a trailing space after an anonymous
        // mapping's inode; a path's own leading or trailing blanks are not recoverable anyway.
        path: rest.trim().to_owned(),
        ..FileMapping::default()
    })
}

/// First whitespace-separated field of `s`, and what follows it.
fn split_field(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    s.split_once(char::is_whitespace).unwrap_or((s, ""))
}

fn bad(line: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("smaps/maps: malformed line {line:?}"),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Three mappings of `/proc/PID/smaps` as this kernel prints them, trimmed to the
    /// counters that matter; the anonymous one keeps the kernel's trailing space.
    pub(crate) const SMAPS: &str = "\
55dbe473d000-55dbe473f000 r--p 00000000 fe:00 247026                     /usr/bin/cat
Size:                  8 kB
KernelPageSize:        4 kB
Rss:                   8 kB
Pss:                   4 kB
Shared_Clean:          4 kB
Shared_Dirty:          0 kB
Private_Clean:         4 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
THPeligible:           0
VmFlags: rd mr mw me 
560101a86000-560101a96000 rw-p 00000000 00:00 0 
Rss:                  64 kB
Private_Clean:         0 kB
Private_Dirty:        64 kB
Anonymous:            64 kB
VmFlags: rd wr mr mw me ac 
7f103a114000-7f103a16b000 r--p 00000000 fe:00 316526                     /usr/lib/locale/my file (deleted)
Rss:                 348 kB
Private_Clean:       348 kB
ProtectionKey:         0
";

    #[test]
    fn parses_headers_and_counters() {
        let m = parse_smaps(SMAPS).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0],
            FileMapping {
                start: 0x55dbe473d000,
                end: 0x55dbe473f000,
                path: "/usr/bin/cat".into(),
                inode: 247026,
                dev: "fe:00".into(),
                offset: 0,
                rss: 8 * 1024,
                private_clean: 4 * 1024,
                private_dirty: 0,
                shared_clean: 4 * 1024,
                anonymous: 0,
                perms: "r--p".into(),
            }
        );
        assert!(m[0].is_live_file() && m[0].is_private());
        assert_eq!(
            (m[1].path.as_str(), m[1].inode, m[1].anonymous),
            ("", 0, 64 * 1024)
        );
        assert!(!m[1].is_live_file());
        assert_eq!(
            m[2].path, "/usr/lib/locale/my file (deleted)",
            "spaces in a path are kept"
        );
        assert_eq!(m[2].private_clean, 348 * 1024);
        assert!(!m[2].is_live_file(), "a deleted file");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_smaps("").unwrap().is_empty());
        for text in [
            "Rss: 4 kB\n",                                          // counter before a header
            "00400000-00452000 r-xp 00000000 08:02 1 /x\nRss: 4\n", // value without unit
            "00400000-00452000 r-xp 00000000 08:02 x /x\n",         // bad inode
            "0040000g-00452000 r-xp 00000000 08:02 1 /x\n",         // bad hex
            "just words\n",
        ] {
            let err = parse_smaps(text).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{text:?}");
        }
    }

    #[test]
    fn maps_lists_file_identities() {
        let maps = "\
560101a53000-560101a57000 r--p 00000000 fe:00 247260                     /usr/bin/grep
560101a57000-560101a7b000 r-xp 00004000 fe:00 247260                     /usr/bin/grep
560101a86000-560101a96000 rw-p 00000000 00:00 0 
560111718000-56011175c000 rw-p 00000000 00:00 0                          [heap]
7f103a177000-7f103a19d000 r--p 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000000000-7f0000001000 rw-s 00000000 00:01 2049                       /memfd:buf (deleted)
";
        let files = parse_mapped_files(maps).unwrap();
        let expected: HashSet<(String, u64)> =
            [("fe:00", 247260), ("fe:00", 326269), ("00:01", 2049)]
                .into_iter()
                .map(|(d, i)| (d.to_owned(), i))
                .collect();
        assert_eq!(files, expected);
        assert!(
            parse_mapped_files("Rss: 4 kB\n").is_err(),
            "smaps counters are not maps lines"
        );
    }

    #[test]
    fn reads_own_mappings() {
        let me = std::process::id();
        let mappings = file_mappings(me).unwrap();
        let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let exe = exe.to_str().unwrap();
        let text = mappings
            .iter()
            .find(|m| m.path == exe && m.perms.contains('x'));
        let text = text.unwrap_or_else(|| panic!("own executable not among {mappings:#?}"));
        assert!(text.rss > 0 && text.inode != 0, "{text:?}");
        let files = mapped_files(me).unwrap();
        assert!(files.contains(&(text.dev.clone(), text.inode)), "{files:?}");
        assert!(mappings.iter().any(|m| m.path == "[stack]"));
    }

    #[test]
    fn missing_process_is_gone() {
        let err = file_mappings(i32::MAX as u32).unwrap_err();
        assert!(crate::smaps::is_gone(&err), "{err}");
        assert!(crate::smaps::is_gone(
            &mapped_files(i32::MAX as u32).unwrap_err()
        ));
    }
}
