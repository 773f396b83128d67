//! How many files each instance process may open. An instance has at most `--pids-max`
//! processes and each at most RLIMIT_NOFILE open files, so `--max-instances` full instances
//! can take `max_instances × pids_max × nofile` entries of the host's file table: that product
//! must stay within half of `fs.file-max`, the other half being the host's.

use crate::config::{Config, InstanceNofile, MIN_NOFILE};

/// The share of fs.file-max all instances together may take: 1/2.
const SHARE_DIVISOR: u64 = 2;
/// Most chosen by `auto`: OpenWhisk's fixed `--ulimit nofile=1024`.
pub const MAX_AUTO_NOFILE: u64 = icebox_sandbox::process::DEFAULT_NOFILE;

/// The host's fs.file-max.
pub fn host_file_max() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/sys/fs/file-max")
        .map_err(|e| anyhow::anyhow!("cannot read /proc/sys/fs/file-max: {e}"))?;
    text.trim()
        .parse()
        .map_err(|e| anyhow::anyhow!("/proc/sys/fs/file-max holds '{}': {e}", text.trim()))
}

/// RLIMIT_NOFILE for instance processes under `cfg` on a host whose fs.file-max is
/// `file_max`, or why no limit fits.
pub fn instance_nofile(cfg: &Config, file_max: u64) -> anyhow::Result<u64> {
    let share = file_max / SHARE_DIVISOR;
    let instances = cfg.max_instances.max(1) as u64;
    let pids = cfg.pids_max.max(1);
    let per_process = share / instances / pids;
    let too_many = |nofile: u64| {
        let largest_pids = share / instances / nofile;
        anyhow::anyhow!(
            "--max-instances {instances} × --pids-max {pids} × {nofile} open files per process \
             = {} files could be held by instances, more than half of this host's fs.file-max \
             ({file_max}); lower --pids-max (at most {largest_pids} fits) or --max-instances, \
             or raise fs.file-max (sysctl fs.file-max)",
            instances.saturating_mul(pids).saturating_mul(nofile),
        )
    };
    match cfg.instance_nofile {
        InstanceNofile::Auto if per_process < MIN_NOFILE => {
            Err(too_many(MIN_NOFILE).context(format!(
                "--instance-nofile auto: fewer than {MIN_NOFILE} open files per process would fit"
            )))
        }
        InstanceNofile::Auto => Ok(per_process.min(MAX_AUTO_NOFILE)),
        InstanceNofile::Fixed(n) if n > per_process => {
            Err(too_many(n).context(format!("--instance-nofile {n} does not fit")))
        }
        InstanceNofile::Fixed(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cfg(args: &[&str]) -> Config {
        Config::parse_from(std::iter::once("iceboxd").chain(args.iter().copied()))
    }

    #[test]
    fn auto_fits_every_instance_in_half_of_file_max() {
        // The campaign's host: fs.file-max 2,466,165, 64 instances of 256 processes.
        let nofile = instance_nofile(&cfg(&[]), 2_466_165).unwrap();
        assert_eq!(nofile, 75);
        assert!(64 * 256 * nofile <= 2_466_165 / 2);
        // A host with a huge fs.file-max (systemd sets LONG_MAX) gets OpenWhisk's 1024.
        assert_eq!(instance_nofile(&cfg(&[]), i64::MAX as u64).unwrap(), 1024);
    }

    #[test]
    fn a_configuration_that_cannot_fit_is_refused_naming_the_flags() {
        let e = instance_nofile(&cfg(&["--max-instances", "256"]), 2_466_165).unwrap_err();
        let text = format!("{e:#}");
        for flag in [
            "--max-instances 256",
            "--pids-max 256",
            "fs.file-max",
            "75 fits",
        ] {
            assert!(text.contains(flag), "{text}");
        }
        let e = instance_nofile(&cfg(&["--instance-nofile", "4096"]), 2_466_165).unwrap_err();
        assert!(format!("{e:#}").contains("--instance-nofile 4096"), "{e:#}");
        assert_eq!(
            instance_nofile(&cfg(&["--instance-nofile", "70"]), 2_466_165).unwrap(),
            70
        );
        assert!(Config::try_parse_from(["iceboxd", "--instance-nofile", "50"]).is_err());
    }
}
