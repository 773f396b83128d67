//! Memory as the guest sees it: per process (smaps_rollup), per cgroup, per NUMA node.

use icebox_guest::protocol::NumaNode;
use std::collections::BTreeMap;
use std::path::Path;

/// `Key: value [kB]` lines into bytes (kB values times 1024).
fn kv_bytes(text: &str, strip_prefix: Option<&str>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = match strip_prefix {
            // Node meminfo lines read "Node 0 MemTotal:  123 kB".
            Some(_) => line
                .split_whitespace()
                .skip(2)
                .collect::<Vec<_>>()
                .join(" "),
            None => line.to_string(),
        };
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let Some(Ok(value)) = parts.next().map(str::parse::<u64>) else {
            continue;
        };
        let bytes = if parts.next() == Some("kB") {
            value * 1024
        } else {
            value
        };
        out.insert(key.trim().to_string(), bytes);
    }
    out
}

pub fn meminfo() -> BTreeMap<String, u64> {
    kv_bytes(
        &std::fs::read_to_string("/proc/meminfo").unwrap_or_default(),
        None,
    )
}

fn node_ids() -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

pub fn node_meminfo() -> BTreeMap<u32, BTreeMap<String, u64>> {
    node_ids()
        .into_iter()
        .map(|id| {
            let text =
                std::fs::read_to_string(format!("/sys/devices/system/node/node{id}/meminfo"))
                    .unwrap_or_default();
            (id, kv_bytes(&text, Some("Node")))
        })
        .collect()
}

fn cpulist(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus
}

pub fn numa_nodes() -> Vec<NumaNode> {
    let mem = node_meminfo();
    node_ids()
        .into_iter()
        .map(|id| {
            let m = mem.get(&id);
            NumaNode {
                id,
                memory_total_bytes: m.and_then(|m| m.get("MemTotal").copied()).unwrap_or(0),
                memory_free_bytes: m.and_then(|m| m.get("MemFree").copied()).unwrap_or(0),
                cpus: cpulist(
                    &std::fs::read_to_string(format!("/sys/devices/system/node/node{id}/cpulist"))
                        .unwrap_or_default(),
                ),
            }
        })
        .collect()
}

/// Page migration and compaction counters of /proc/vmstat.
pub fn vmstat() -> BTreeMap<String, u64> {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            let wanted = [
                "pgmigrate",
                "compact_",
                "numa_",
                "thp_migration",
                "pgalloc",
                "pgfree",
            ]
            .iter()
            .any(|p| k.starts_with(p));
            wanted.then(|| Some((k.to_string(), v.trim().parse().ok()?)))?
        })
        .collect()
}

/// USS, PSS and RSS of one process in bytes.
pub fn smaps_rollup(pid: u32) -> Option<(u64, u64, u64)> {
    let m = kv_bytes(
        &std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?,
        None,
    );
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    Some((g("Private_Clean") + g("Private_Dirty"), g("Pss"), g("Rss")))
}

pub fn read_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A `key value` line of a cgroup file (memory.events, cgroup.events).
pub fn cgroup_key(path: &Path, key: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_meminfo_in_bytes_and_cpulists() {
        let m = kv_bytes("MemTotal:  1000 kB\nHugePages_Total:   2\n", None);
        assert_eq!(m["MemTotal"], 1_024_000);
        assert_eq!(m["HugePages_Total"], 2);
        let n = kv_bytes("Node 1 MemFree:  4 kB\n", Some("Node"));
        assert_eq!(n["MemFree"], 4096);
        assert_eq!(cpulist("0-2,5\n"), vec![0, 1, 2, 5]);
    }
}
