//! The offload pool: the kernel swap that pages icebox offloads go to. Either swap areas icebox
//! creates for itself — a zram device (compressed, in RAM, used before any other swap), a swap
//! file (on disk, with zswap in front of it: pages really leave the node's RAM), or both tiers
//! — the operator's own swap, or none.

mod marker;
mod psi;
mod space;
mod spec;
mod stats;
mod swapfile;
mod swaps;
mod vmstat;
mod zram;

#[cfg(test)]
mod loopfs;
#[cfg(test)]
mod swapfile_fault_tests;
#[cfg(test)]
mod swapfile_tests;
#[cfg(test)]
mod tests;

pub use psi::{memory_pressure, PressureLine, Psi};
pub use spec::PoolSpec;
pub use stats::PoolStats;
pub use vmstat::pages_swapped_in;

use stats::{zram_mm_stat, MmStat};
use std::io;
use std::path::{Path, PathBuf};
use swapfile::{zswap, SwapFile};
use swaps::read_swaps;
use zram::Zram;

use icebox_core::units::PAGE;

/// An open offload pool. What icebox created for it is torn down by [`OffloadPool::close`], or
/// on drop when not closed; a process that dies first leaves a marker for
/// [`OffloadPool::cleanup_stale`].
#[derive(Debug)]
pub struct OffloadPool {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    None,
    Swap,
    /// Swap areas icebox created: the zram device, the swap file, or both.
    Own {
        spec: PoolSpec,
        zram: Option<Zram>,
        file: Option<SwapFile>,
        /// zswap was off and icebox turned it on for the swap file: turned off at close.
        zswap_turned_on: bool,
        state_dir: PathBuf,
        /// Set once torn down (or tried): drop must not try again.
        closed: bool,
    },
}

impl OffloadPool {
    /// Zram: hot_add a device, lz4, disksize, mkswap, swapon with the highest priority. Swap
    /// file: allocate, mkswap, swapon just below, and zswap on where the kernel has it. The
    /// marker in `state_dir` names each piece before it is made, so a crash at any later point
    /// leaves a record. On failure everything done so far is undone.
    pub fn open(spec: &PoolSpec, state_dir: &Path) -> io::Result<OffloadPool> {
        let kind = match spec {
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
            own => open_own(own, state_dir)?,
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
        let mut removed = false;
        let mut result = Ok(());
        if let Some(id) = found.device {
            let zram = Zram { id };
            let ours = found.boot_id == zram::boot_id()?
                && zram.exists()
                && matches!(zram.disksize(), Ok(size) if size == found.disksize || size == 0);
            if ours {
                result = zram.teardown();
                removed = true;
            }
        }
        // A swap file outlives a reboot; its label says it is still icebox's.
        if let Some(path) = found.swap_file.filter(|p| SwapFile::is_ours(p)) {
            let file = SwapFile::at(&path);
            result = result.and(file.teardown());
            removed = true;
        }
        if found.zswap_turned_on && found.boot_id == zram::boot_id()? {
            if let Err(e) = zswap::set(false) {
                tracing::warn!(error = %e, "cannot turn zswap off again");
            }
        }
        marker::remove(state_dir)?;
        result.map(|()| removed)
    }

    pub fn spec(&self) -> PoolSpec {
        match &self.kind {
            Kind::None => PoolSpec::None,
            Kind::Swap => PoolSpec::Swap,
            Kind::Own { spec, .. } => spec.clone(),
        }
    }

    /// `/dev/zramN` for icebox's own device, else its swap file.
    pub fn device(&self) -> Option<String> {
        match &self.kind {
            Kind::Own { zram: Some(z), .. } => Some(z.dev_path()),
            Kind::Own { file: Some(f), .. } => Some(f.path.display().to_string()),
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
            Kind::Own { zram, file, .. } => {
                let mut paths = Vec::new();
                let mut mm = MmStat::default();
                if let Some(z) = zram {
                    let dev = z.dev_path();
                    mm.add(zram_mm_stat(&dev).unwrap_or_default());
                    paths.push(dev);
                }
                if let Some(f) = file {
                    paths.push(f.name());
                    // zswap's pool is RAM in front of the file: count it like zram's.
                    let (pool_ram, held) = zswap::usage();
                    mm.add(MmStat {
                        orig_data_size: held,
                        compr_data_size: pool_ram,
                        mem_used_total: pool_ram,
                    });
                }
                let ours: Vec<_> = areas.iter().filter(|a| paths.contains(&a.path)).collect();
                PoolStats {
                    kind: match (zram.is_some(), file.is_some()) {
                        (true, true) => "zram+swapfile",
                        (false, true) => "swapfile",
                        _ => "zram",
                    },
                    capacity_bytes: ours.iter().map(|a| a.size_bytes).sum(),
                    stored_bytes: ours.iter().map(|a| a.used_bytes).sum(),
                    memory_bytes: mm.mem_used_total,
                    compressed_bytes: mm.compr_data_size,
                    compression_ratio: mm.compression_ratio(),
                    device: self.device(),
                }
            }
        }
    }

    /// Compacts icebox's zram device: pages freed in it (instances that exited, pages that came
    /// back) leave its allocator's pages partly empty, RAM counted as local memory until
    /// compacted. Nothing to do for the operator's swap.
    pub fn compact(&self) -> io::Result<()> {
        match &self.kind {
            Kind::Own { zram: Some(z), .. } => z.compact(),
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
            Kind::Own {
                zram, file, closed, ..
            } => {
                if let Some(z) = zram {
                    let dev = z.dev_path();
                    if *closed || !z.exists() {
                        return Err(format!("offload pool {dev} was removed"));
                    }
                    swapped_on(&dev, z.is_swapped_on())?;
                }
                if let Some(f) = file {
                    let path = f.path.display().to_string();
                    if *closed {
                        return Err(format!("offload pool {path} was removed"));
                    }
                    // A file whose path went elsewhere is still swapped on, and still ours.
                    let _ = f.moved();
                    swapped_on(&path, f.is_swapped_on())?;
                }
                Ok(())
            }
        }
    }

    /// Icebox's own areas: swapoff (which moves every page they hold back into RAM), the zram
    /// device reset and removed, the swap file deleted, zswap off again if icebox turned it on,
    /// and the marker removed. On failure the marker stays, for a later
    /// [`OffloadPool::cleanup_stale`]. Other kinds: nothing to do.
    pub fn close(mut self) -> io::Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> io::Result<()> {
        let Kind::Own {
            zram,
            file,
            zswap_turned_on,
            state_dir,
            closed,
            ..
        } = &mut self.kind
        else {
            return Ok(());
        };
        if std::mem::replace(closed, true) {
            return Ok(());
        }
        // The file first: its pages come back to RAM (zram, being in RAM, costs nothing to
        // bring back).
        if let Some(f) = file {
            f.teardown()?;
        }
        if *zswap_turned_on {
            zswap::set(false)?;
        }
        if let Some(z) = zram {
            z.teardown()?;
        }
        marker::remove(state_dir)
    }
}

impl Drop for OffloadPool {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::error!(error = %e, "cannot remove the offload pool's swap areas");
        }
    }
}

fn swapped_on(name: &str, on: io::Result<bool>) -> Result<(), String> {
    match on {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "offload pool {name} is no longer swapped on (swapoff by someone else?)"
        )),
        Err(e) => Err(format!("offload pool {name}: /proc/swaps: {e}")),
    }
}

/// Icebox's own tiers: zram first (if asked), then the swap file and zswap. On failure
/// everything made so far is undone.
fn open_own(spec: &PoolSpec, state_dir: &Path) -> io::Result<Kind> {
    if !rustix::process::geteuid().is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("--offload-pool {spec} needs root (it creates swap areas)"),
        ));
    }
    let mut record = marker::Marker {
        device: None,
        boot_id: zram::boot_id()?,
        disksize: 0,
        swap_file: None,
        zswap_turned_on: false,
    };
    let zram = match spec.zram_bytes() {
        Some(bytes) => Some(open_zram(bytes, state_dir, &mut record)?),
        None => None,
    };
    let mut kind = Kind::Own {
        spec: spec.clone(),
        zram,
        file: None,
        zswap_turned_on: false,
        state_dir: state_dir.to_path_buf(),
        closed: false,
    };
    if let Some((path, bytes)) = spec.swap_file() {
        let made = (|| {
            record.swap_file = Some(path.to_path_buf());
            marker::write(state_dir, &record)?;
            let file = SwapFile::create(path, bytes)?;
            tracing::info!(path = %path.display(), bytes, priority = swapfile::PRIORITY, "offload pool: swap file on");
            // Not with a zram tier: zswap would compress pages on their way to zram too.
            let zswap_on = spec.zram_bytes().is_none() && zswap::available() && !zswap::enabled()?;
            if zswap_on {
                record.zswap_turned_on = true;
                marker::write(state_dir, &record)?;
                zswap::set(true)?;
                tracing::info!("offload pool: zswap turned on in front of the swap file");
            }
            Ok::<_, io::Error>((file, zswap_on))
        })();
        match made {
            Ok((f, on)) => {
                if let Kind::Own {
                    file,
                    zswap_turned_on,
                    ..
                } = &mut kind
                {
                    *file = Some(f);
                    *zswap_turned_on = on;
                }
            }
            Err(e) => {
                if record.zswap_turned_on {
                    let _ = zswap::set(false);
                }
                // Dropping the pool tears down the zram tier and removes the marker.
                drop(OffloadPool { kind });
                let _ = marker::remove(state_dir);
                return Err(e);
            }
        }
    }
    Ok(kind)
}

fn open_zram(bytes: u64, state_dir: &Path, record: &mut marker::Marker) -> io::Result<Zram> {
    if !Path::new(zram::CONTROL).join("hot_add").exists() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "--offload-pool zram needs the zram module (/sys/class/zram-control)",
        ));
    }
    let zram = Zram::hot_add()?;
    let configured = (|| {
        let disksize = zram::page_aligned(bytes);
        record.device = Some(zram.id);
        record.disksize = disksize;
        marker::write(state_dir, record)?;
        zram.set_comp_algorithm()?;
        zram.set_disksize(bytes)?;
        let actual = zram.disksize()?;
        if actual != disksize {
            record.disksize = actual;
            marker::write(state_dir, record)?;
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
