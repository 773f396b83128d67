//! The host's view of a partition: what QEMU has resident of its virtio-mem device's RAM
//! region. QEMU does not say where a RAM block is in its address space, so the region is
//! recognised by its size, which the layout makes unique per partition.

/// Resident bytes of the one private read-write mapping of exactly `size` bytes in an smaps
/// text; `None` if there is none or more than one.
pub fn region_rss(smaps: &str, size: u64) -> Option<u64> {
    let mut found = None;
    let mut in_match = false;
    for line in smaps.lines() {
        if let Some((range, rest)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                    in_match = b - a == size && rest.starts_with("rw-p");
                    if in_match {
                        if found.is_some() {
                            return None;
                        }
                        found = Some(0);
                    }
                    continue;
                }
            }
        }
        if in_match {
            if let Some(kb) = line.strip_prefix("Rss:") {
                let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
                found = Some(kb * 1024);
            }
        }
    }
    found
}

/// [`region_rss`] of a live process.
pub fn process_region_rss(pid: u32, size: u64) -> Option<u64> {
    region_rss(
        &std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?,
        size,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::{GIB, MIB};

    const SMAPS: &str = "\
7f03f3800000-7f0413a00000 rw-p 00000000 00:00 0 
Size:             526336 kB
Rss:                2048 kB
VmFlags: rd wr mr mw me dc ac hg mg
7f0413c00000-7f0433c00000 rw-p 00000000 00:00 0 
Size:             524288 kB
Rss:               65536 kB
VmFlags: rd wr mr mw me dc ac hg mg
7f0440000000-7f0460000000 rwxp 00000000 00:00 0 
Size:             524288 kB
Rss:                 100 kB
";

    #[test]
    fn the_region_of_a_size_is_found_and_executable_ones_are_not_guest_ram() {
        assert_eq!(region_rss(SMAPS, 512 * MIB), Some(64 * MIB));
        assert_eq!(region_rss(SMAPS, 514 * MIB), Some(2 * MIB));
        assert_eq!(region_rss(SMAPS, GIB), None);
    }

    #[test]
    fn two_regions_of_one_size_are_ambiguous() {
        let doubled = SMAPS.replace("7f03f3800000-7f0413a00000", "7f03f3a00000-7f0413a00000");
        assert_eq!(region_rss(&doubled, 512 * MIB), None);
    }
}
