//! What the pool holds and what it costs: from /proc/swaps and zram's mm_stat.

use std::path::Path;

/// A snapshot of the offload pool.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct PoolStats {
    /// `none`, `swap` or `zram`.
    pub kind: &'static str,
    /// The swap device icebox created (`/dev/zram1`); `None` for the operator's swap.
    pub device: Option<String>,
    pub capacity_bytes: u64,
    /// Data swapped into the pool (uncompressed size).
    pub stored_bytes: u64,
    /// RAM the pool itself uses: zram's mem_used_total (0 for disk swap).
    pub memory_bytes: u64,
    /// zram's compr_data_size: what the stored pages compress to. `memory_bytes` above it is
    /// the allocator's fragmentation, which compaction gives back.
    pub compressed_bytes: u64,
    /// orig_data_size / compr_data_size of the zram devices; 0 when nothing is compressed.
    pub compression_ratio: f64,
}

impl PoolStats {
    /// RAM cost of `swapped` bytes held in this pool: their proportional share of the pool's
    /// memory on zram, nothing on disk swap.
    pub fn local_cost(&self, swapped: u64) -> u64 {
        if self.stored_bytes == 0 || self.memory_bytes == 0 {
            return 0;
        }
        u64::try_from(
            u128::from(swapped) * u128::from(self.memory_bytes) / u128::from(self.stored_bytes),
        )
        .unwrap_or(u64::MAX)
    }

    pub fn free_bytes(&self) -> u64 {
        self.capacity_bytes.saturating_sub(self.stored_bytes)
    }
}

/// The first fields of /sys/block/zramN/mm_stat (Documentation/admin-guide/blockdev/zram.rst).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MmStat {
    pub orig_data_size: u64,
    pub compr_data_size: u64,
    pub mem_used_total: u64,
}

impl MmStat {
    pub(crate) fn add(&mut self, other: MmStat) {
        self.orig_data_size += other.orig_data_size;
        self.compr_data_size += other.compr_data_size;
        self.mem_used_total += other.mem_used_total;
    }

    pub(crate) fn compression_ratio(&self) -> f64 {
        if self.compr_data_size == 0 {
            0.0
        } else {
            self.orig_data_size as f64 / self.compr_data_size as f64
        }
    }
}

pub(crate) fn parse_mm_stat(text: &str) -> Option<MmStat> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some(MmStat {
        orig_data_size: fields.next()?.ok()?,
        compr_data_size: fields.next()?.ok()?,
        mem_used_total: fields.next()?.ok()?,
    })
}

/// mm_stat of `/dev/zramN` (the swap area's path); `None` for anything that is not a zram
/// device or cannot be read.
pub(crate) fn zram_mm_stat(device_path: &str) -> Option<MmStat> {
    let name = device_path.strip_prefix("/dev/")?;
    let id = name.strip_prefix("zram")?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let text = std::fs::read_to_string(Path::new("/sys/block").join(name).join("mm_stat")).ok()?;
    parse_mm_stat(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mm_stat() {
        let text = "  4194304    1048576    1310720        0  1310720        3        0        0        0\n";
        assert_eq!(
            parse_mm_stat(text),
            Some(MmStat {
                orig_data_size: 4194304,
                compr_data_size: 1048576,
                mem_used_total: 1310720
            })
        );
        assert_eq!(parse_mm_stat("1 2"), None);
        assert_eq!(parse_mm_stat("a b c"), None);
        assert_eq!(parse_mm_stat(text).unwrap().compression_ratio(), 4.0);
        assert_eq!(MmStat::default().compression_ratio(), 0.0);
    }

    #[test]
    fn local_cost_is_a_proportional_share_of_pool_memory() {
        let zram = PoolStats {
            kind: "zram",
            device: Some("/dev/zram1".into()),
            capacity_bytes: 64 << 20,
            stored_bytes: 8 << 20,
            memory_bytes: 2 << 20,
            compressed_bytes: 2 << 20,
            compression_ratio: 4.0,
        };
        assert_eq!(zram.local_cost(4 << 20), 1 << 20);
        assert_eq!(zram.local_cost(0), 0);
        assert_eq!(zram.free_bytes(), 56 << 20);
        let empty = PoolStats {
            stored_bytes: 0,
            memory_bytes: 0,
            ..zram.clone()
        };
        assert_eq!(empty.local_cost(4 << 20), 0);
        let disk = PoolStats {
            kind: "swap",
            device: None,
            memory_bytes: 0,
            ..zram
        };
        assert_eq!(disk.local_cost(4 << 20), 0);
        let over = PoolStats {
            stored_bytes: 10,
            capacity_bytes: 5,
            ..disk
        };
        assert_eq!(over.free_bytes(), 0);
    }

    #[test]
    fn only_zram_devices_have_mm_stat() {
        assert_eq!(zram_mm_stat("/var/swapfile"), None);
        assert_eq!(zram_mm_stat("/dev/zram"), None);
        assert_eq!(zram_mm_stat("/dev/zram1/../vda"), None);
    }
}
