//! The offload pool: the kernel swap that pages icebox offloads go to. Either a zram device
//! icebox creates for itself (compressed, in RAM, used before any other swap), the operator's
//! own swap, or none.

mod marker;
mod psi;
mod spec;
mod stats;
mod swaps;
mod vmstat;
mod zram;

#[cfg(test)]
mod tests;

pub use psi::{memory_pressure, PressureLine, Psi};
pub use spec::PoolSpec;
pub use stats::PoolStats;
pub use vmstat::pages_swapped_in;

use stats::{zram_mm_stat, MmStat};
use std::io;
use std::path::{Path, PathBuf};
use swaps::read_swaps;
use zram::Zram;

use icebox_core::units::PAGE;

/// An open offload pool. A zram pool is torn down by [`OffloadPool::close`], or on drop when
/// not closed; a process that dies first leaves a marker for [`OffloadPool::cleanup_stale`].
#[derive(Debug)]
pub struct OffloadPool {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    None,
    Swap,
    Zram {
        zram: Zram,
        state_dir: PathBuf,
        /// Set once torn down (or tried): drop must not try again.
        closed: bool,
    },
}

impl OffloadPool {
    /// Zram: hot_add a device, lz4, disksize, mkswap, swapon with the highest priority. The
    /// marker in `state_dir` is written right after hot_add, so a crash at any later point
    /// leaves a record. On failure everything done so far is undone.
    pub fn open(spec: &PoolSpec, state_dir: &Path) -> io::Result<OffloadPool> {
        let kind = match *spec {
            PoolSpec::None => Kind::None,
            PoolSpec::Swap => {
                if read_swaps()?.is_empty() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "--offload-pool swap: no swap is configured; use zram:SIZE or configure swap",
                    ));
                }
                Kind::Swap
            }
            PoolSpec::Zram { bytes } => Kind::Zram {
                zram: open_zram(bytes, state_dir)?,
                state_dir: state_dir.to_path_buf(),
                closed: false,
            },
        };
        Ok(OffloadPool { kind })
    }

    /// Removes the zram device a crashed daemon of this state dir left behind: when the
    /// marker is from this boot and the device still has the recorded disksize (or none yet:
    /// the crash came before it was configured), swapoff if swapped on, reset, hot_remove.
    /// The marker is removed in every case. Returns whether a device was removed.
    pub fn cleanup_stale(state_dir: &Path) -> io::Result<bool> {
        let found = match marker::read(state_dir) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an unreadable offload pool marker");
                marker::remove(state_dir)?;
                return Ok(false);
            }
        };
        let Some(found) = found else {
            return Ok(false);
        };
        let zram = Zram { id: found.device };
        let ours = found.boot_id == zram::boot_id()?
            && zram.exists()
            && matches!(zram.disksize(), Ok(size) if size == found.disksize || size == 0);
        let result = if ours { zram.teardown() } else { Ok(()) };
        marker::remove(state_dir)?;
        result.map(|()| ours)
    }

    pub fn spec(&self) -> PoolSpec {
        match &self.kind {
            Kind::None => PoolSpec::None,
            Kind::Swap => PoolSpec::Swap,
            Kind::Zram { zram, .. } => PoolSpec::Zram {
                bytes: zram.disksize().unwrap_or(0),
            },
        }
    }

    /// `/dev/zramN` for icebox's own device.
    pub fn device(&self) -> Option<String> {
        match &self.kind {
            Kind::Zram { zram, .. } => Some(zram.dev_path()),
            _ => None,
        }
    }

    /// A snapshot; what cannot be read counts as zero.
    pub fn stats(&self) -> PoolStats {
        let areas = match &self.kind {
            Kind::None => Vec::new(),
            _ => read_swaps().unwrap_or_default(),
        };
        match &self.kind {
            Kind::None => PoolStats {
                kind: "none",
                ..PoolStats::default()
            },
            Kind::Swap => {
                let mut mm = MmStat::default();
                for area in &areas {
                    mm.add(zram_mm_stat(&area.path).unwrap_or_default());
                }
                PoolStats {
                    kind: "swap",
                    device: None,
                    capacity_bytes: areas.iter().map(|a| a.size_bytes).sum(),
                    stored_bytes: areas.iter().map(|a| a.used_bytes).sum(),
                    memory_bytes: mm.mem_used_total,
                    compressed_bytes: mm.compr_data_size,
                    compression_ratio: mm.compression_ratio(),
                }
            }
            Kind::Zram { zram, .. } => {
                let dev = zram.dev_path();
                let area = areas.iter().find(|a| a.path == dev);
                let mm = zram_mm_stat(&dev).unwrap_or_default();
                PoolStats {
                    kind: "zram",
                    capacity_bytes: area.map_or(0, |a| a.size_bytes),
                    stored_bytes: area.map_or(0, |a| a.used_bytes),
                    memory_bytes: mm.mem_used_total,
                    compressed_bytes: mm.compr_data_size,
                    compression_ratio: mm.compression_ratio(),
                    device: Some(dev),
                }
            }
        }
    }

    /// Compacts icebox's zram device: pages freed in it (instances that exited, pages that came
    /// back) leave its allocator's pages partly empty, RAM counted as local memory until
    /// compacted. Nothing to do for the operator's swap.
    pub fn compact(&self) -> io::Result<()> {
        match &self.kind {
            Kind::Zram { zram, .. } => zram.compact(),
            _ => Ok(()),
        }
    }

    /// Whether pages can still be offloaded: Err with the reason when there is no pool, the
    /// swap is gone, or icebox's device was swapped off or removed by someone else.
    pub fn check(&self) -> Result<(), String> {
        match &self.kind {
            Kind::None => Err("no offload pool".to_string()),
            Kind::Swap => match read_swaps() {
                Ok(areas) if areas.is_empty() => {
                    Err("offload pool swap: no swap is configured any more".to_string())
                }
                Ok(_) => Ok(()),
                Err(e) => Err(format!("offload pool swap: /proc/swaps: {e}")),
            },
            Kind::Zram { zram, closed, .. } => {
                let dev = zram.dev_path();
                if *closed || !zram.exists() {
                    return Err(format!("offload pool {dev} was removed"));
                }
                match zram.is_swapped_on() {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(format!(
                        "offload pool {dev} is no longer swapped on (swapoff by someone else?)"
                    )),
                    Err(e) => Err(format!("offload pool {dev}: /proc/swaps: {e}")),
                }
            }
        }
    }

    /// Zram: swapoff (which moves every page it holds back into RAM), reset, hot_remove, and
    /// the marker removed. On failure the marker stays, for a later
    /// [`OffloadPool::cleanup_stale`]. Other kinds: nothing to do.
    pub fn close(mut self) -> io::Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> io::Result<()> {
        let Kind::Zram {
            zram,
            state_dir,
            closed,
        } = &mut self.kind
        else {
            return Ok(());
        };
        if std::mem::replace(closed, true) {
            return Ok(());
        }
        zram.teardown()?;
        marker::remove(state_dir)
    }
}

impl Drop for OffloadPool {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::error!(error = %e, "cannot remove the offload pool's zram device");
        }
    }
}

fn open_zram(bytes: u64, state_dir: &Path) -> io::Result<Zram> {
    let root = rustix::process::geteuid().is_root();
    if !root || !Path::new(zram::CONTROL).join("hot_add").exists() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "--offload-pool zram needs root and the zram module (/sys/class/zram-control)",
        ));
    }
    let boot_id = zram::boot_id()?;
    let zram = Zram::hot_add()?;
    let configured = (|| {
        let disksize = zram::page_aligned(bytes);
        let record = |disksize| {
            marker::write(
                state_dir,
                &marker::Marker {
                    device: zram.id,
                    boot_id: boot_id.clone(),
                    disksize,
                },
            )
        };
        record(disksize)?;
        zram.set_comp_algorithm()?;
        zram.set_disksize(bytes)?;
        let actual = zram.disksize()?;
        if actual != disksize {
            record(actual)?;
        }
        zram.mkswap()?;
        zram.swapon()
    })();
    if let Err(err) = configured {
        match zram.teardown() {
            Ok(()) => marker::remove(state_dir)?,
            Err(cleanup) => {
                tracing::error!(error = %cleanup, "cannot remove a half-configured zram device")
            }
        }
        return Err(err);
    }
    tracing::info!(
        device = %zram.dev_path(),
        bytes,
        priority = zram::PRIORITY,
        "offload pool: zram swap on"
    );
    Ok(zram)
}
