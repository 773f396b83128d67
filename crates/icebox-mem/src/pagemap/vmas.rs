//! The mappings of a process (`/proc/PID/maps`) by what their pages can be.
//!
//! Telling an anonymous page from a file page costs the scan a look at every page's struct
//! page (4× the walk of a GiB here); only private file mappings need it: in an anonymous
//! mapping every page is anonymous (or the zero page, which the scan reports anyway), and the
//! pages of shared mappings are never anonymous.

use super::explain;
use crate::pageset::PageSet;
use std::io;

/// What a mapping's pages can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VmaKind {
    /// Private, not backed by a file: only anonymous pages.
    Anon,
    /// Private file mapping (or a special one such as [vdso]): file pages, and anonymous
    /// copies of those written.
    FilePrivate,
    /// Shared mappings and the kernel's own pages: no anonymous pages.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Vma {
    pub start: u64,
    pub end: u64,
    pub kind: VmaKind,
    /// Not PROT_NONE (a reservation).
    pub accessible: bool,
}

/// The private mappings of `pid`: anonymous ones, and file-backed ones.
pub(super) fn private_mappings(pid: u32) -> io::Result<(PageSet, PageSet)> {
    let vmas = read_vmas(pid)?;
    let of = |kind| {
        PageSet::from_ranges(
            vmas.iter()
                .filter(|v| v.kind == kind)
                .map(|v| (v.start, v.end)),
        )
    };
    Ok((of(VmaKind::Anon), of(VmaKind::FilePrivate)))
}

pub(super) fn read_vmas(pid: u32) -> io::Result<Vec<Vma>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|err| explain(err, pid, "reading maps"))?;
    Ok(parse_vmas(&maps))
}

pub(super) fn parse_vmas(maps: &str) -> Vec<Vma> {
    maps.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Vma> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let inode = fields.nth(2)?;
    let name = fields.next().unwrap_or("");
    let shared = perms.as_bytes().get(3) != Some(&b'p');
    let kernel = matches!(name, "[vvar]" | "[vvar_vclock]" | "[vsyscall]");
    let anon = inode == "0"
        && (name.is_empty()
            || matches!(name, "[heap]" | "[stack]")
            || name.starts_with("[anon:")
            || name.starts_with("[stack:"));
    let kind = if shared || kernel {
        VmaKind::None
    } else if anon {
        VmaKind::Anon
    } else {
        VmaKind::FilePrivate
    };
    Some(Vma {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        kind,
        accessible: !perms.starts_with("---"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_classified_by_what_their_pages_can_be() {
        let maps = "\
55d0a0000000-55d0a0002000 r--p 00000000 fe:01 123 /usr/bin/python3
55d0a1000000-55d0a1021000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000100000 rw-s 00000000 00:01 44 /dev/zero (deleted)
7f0000200000-7f0000300000 ---p 00000000 00:00 0
7f0000400000-7f0000500000 rw-p 00000000 00:00 0
7f0000600000-7f0000700000 rw-p 00000000 00:00 0 [anon:v8 heap]
7f0000800000-7f0000900000 rw-p 00000000 00:01 77 /memfd:jit (deleted)
7ffd00000000-7ffd00004000 r--p 00000000 00:00 0 [vvar]
7ffd00004000-7ffd00006000 r-xp 00000000 00:00 0 [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";
        let kinds: Vec<(VmaKind, bool)> = parse_vmas(maps)
            .iter()
            .map(|v| (v.kind, v.accessible))
            .collect();
        use VmaKind::*;
        assert_eq!(
            kinds,
            vec![
                (FilePrivate, true),
                (Anon, true),
                (None, true),
                (Anon, false),
                (Anon, true),
                (Anon, true),
                (FilePrivate, true),
                (None, true),
                (FilePrivate, true),
                (None, true),
            ]
        );
        assert_eq!(parse_vmas(maps)[1].start, 0x55d0_a100_0000);
        assert_eq!(parse_vmas(maps)[1].end, 0x55d0_a102_1000);
    }
}
