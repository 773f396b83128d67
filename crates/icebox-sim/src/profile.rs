//! Function profiles (what one instance costs and how long it takes, per sharing mode) and the
//! mapping of trace functions onto them.

use crate::trace::Trace;
use crate::units::{mib_to_bytes, stable_hash};
use anyhow::{anyhow, bail, Result};
use icebox_policy::{DesiccantConfig, MemoryProfile, SharingMode};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ProfileFile {
    pub version: u32,
    #[serde(default)]
    pub source: String,
    pub functions: BTreeMap<String, FunctionProfile>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FunctionProfile {
    pub cold_start_ms: f64,
    pub warm_ms: f64,
    pub sharing: HashMap<SharingMode, ModeProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_mb: Option<IdleMb>,
    /// Cores one activation uses (only with `--node-cores`). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The action's declared memory limit: what placement checks against a node's free
    /// keep-alive memory, as iceboxd does. Default: what a new instance takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_mb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ModeProfile {
    pub base_mb: f64,
    pub increment_mb: f64,
    /// Activations `base_mb` was measured with: 0 (default) when it is an idle instance's
    /// memory, as icebox-bench measures; 1 for the thesis' Base (memory with one activation,
    /// memory(n) = base + (n − 1) × increment).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub base_activations: u32,
    /// Overrides the function's value in this mode (the thesis measured a faster cold start
    /// for the isolate proxy than for Photons).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_ms: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct IdleMb {
    pub none: f64,
    pub desiccant: f64,
}

impl ProfileFile {
    /// Reads and checks a profile file; errors name the file and the JSON path.
    pub fn load(path: &Path) -> Result<ProfileFile> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<ProfileFile> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: ProfileFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            anyhow!(
                "at {path} (line {}, column {}): {inner}",
                inner.line(),
                inner.column()
            )
        })?;
        file.validate()?;
        Ok(file)
    }

    fn validate(&self) -> Result<()> {
        if self.version != 1 {
            bail!(
                "at version: unsupported version {} (expected 1)",
                self.version
            );
        }
        if self.functions.is_empty() {
            bail!("at functions: no functions");
        }
        for (name, f) in &self.functions {
            let check = |field: String, v: f64| -> Result<()> {
                if !(v.is_finite() && v >= 0.0) {
                    bail!("at functions.{name}.{field}: {v} is not a non-negative number");
                }
                Ok(())
            };
            check("cold_start_ms".into(), f.cold_start_ms)?;
            check("warm_ms".into(), f.warm_ms)?;
            for (mode, m) in &f.sharing {
                check(format!("sharing.{mode}.base_mb"), m.base_mb)?;
                check(format!("sharing.{mode}.increment_mb"), m.increment_mb)?;
                if let Some(c) = m.cold_start_ms {
                    check(format!("sharing.{mode}.cold_start_ms"), c)?;
                }
                if let Some(w) = m.warm_ms {
                    check(format!("sharing.{mode}.warm_ms"), w)?;
                }
            }
            if let Some(i) = &f.idle_mb {
                check("idle_mb.none".into(), i.none)?;
                check("idle_mb.desiccant".into(), i.desiccant)?;
            }
        }
        Ok(())
    }
}

/// One profile resolved for a sharing mode: what the simulator needs per activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub memory: MemoryProfile,
    pub cold_start_ms: u64,
    pub warm_ms: u64,
    /// Share of an idle instance's memory left after a Desiccant reclaim.
    pub retained: f64,
    pub cpu: u32,
    /// Bytes placement asks a node to have free for a new instance (`limit_mb`).
    pub placement_need: Option<u64>,
}

impl Resolved {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn resolve(
        name: &str,
        f: &FunctionProfile,
        mode: SharingMode,
        desiccant: &DesiccantConfig,
    ) -> Result<Resolved> {
        let m = f
            .sharing
            .get(&mode)
            .ok_or_else(|| anyhow!("profile functions.{name}.sharing has no '{mode}' entry"))?;
        // A measured idle size with and without Desiccant gives the share a reclaim keeps;
        // without one, the Desiccant configuration's prior.
        let retained = match &f.idle_mb {
            Some(i) if i.none > 0.0 => (i.desiccant / i.none).clamp(0.0, 1.0),
            _ => desiccant.prior_retained_fraction,
        };
        Ok(Resolved {
            memory: MemoryProfile {
                base_bytes: mib_to_bytes(m.base_mb),
                increment_bytes: mib_to_bytes(m.increment_mb),
                base_activations: m.base_activations,
            },
            cold_start_ms: m.cold_start_ms.unwrap_or(f.cold_start_ms).round() as u64,
            warm_ms: m.warm_ms.unwrap_or(f.warm_ms).round() as u64,
            retained,
            cpu: f.cpu.unwrap_or(1).max(1),
            placement_need: f.limit_mb.map(mib_to_bytes),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Each trace function gets a profile drawn at random (seeded by --seed and its name).
    Random,
    /// Trace functions in order of first appearance take the profiles in turn.
    RoundRobin,
}

/// The profile index of every trace function.
#[expect(
    clippy::cast_possible_truncation,
    reason = "indices and counts of a simulated cluster (functions, instances, nodes, queued calls) stay far below 2^32"
)]
pub fn map_functions(trace: &Trace, profiles: usize, mapping: Mapping, seed: u64) -> Vec<u32> {
    trace
        .functions
        .iter()
        .enumerate()
        .map(|(i, name)| match mapping {
            Mapping::RoundRobin => (i % profiles) as u32,
            Mapping::Random => {
                let mut rng = Pcg64::seed_from_u64(seed ^ stable_hash(name));
                rng.gen_range(0..profiles) as u32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"version": 1, "source": "t", "functions": {
      "filehash": {"cold_start_ms": 180.0, "warm_ms": 12.0,
        "sharing": {"process": {"base_mb": 40.0, "increment_mb": 0.0},
                    "shared":  {"base_mb": 42.0, "increment_mb": 3.0},
                    "isolate": {"base_mb": 30.0, "increment_mb": 9.0, "cold_start_ms": 90}},
        "idle_mb": {"none": 40.0, "desiccant": 10.0}, "runs": 10}}}"#;

    #[test]
    fn resolves_a_mode_with_overrides_and_the_desiccant_share() {
        let f = ProfileFile::parse(GOOD).unwrap();
        let d = DesiccantConfig::default();
        let fh = &f.functions["filehash"];
        let iso = Resolved::resolve("filehash", fh, SharingMode::Isolate, &d).unwrap();
        assert_eq!(iso.memory.charge(2), mib_to_bytes(48.0));
        assert_eq!((iso.cold_start_ms, iso.warm_ms, iso.cpu), (90, 12, 1));
        assert_eq!(iso.retained, 0.25);
        let shared = Resolved::resolve("filehash", fh, SharingMode::Shared, &d).unwrap();
        assert_eq!(shared.cold_start_ms, 180);
    }

    #[test]
    fn errors_name_the_json_path() {
        let bad_type = GOOD.replace("\"warm_ms\": 12.0", "\"warm_ms\": \"fast\"");
        let err = ProfileFile::parse(&bad_type).unwrap_err().to_string();
        assert!(err.contains("at functions.filehash.warm_ms"), "{err}");
        let negative = GOOD.replace("\"base_mb\": 42.0", "\"base_mb\": -1");
        let err = ProfileFile::parse(&negative).unwrap_err().to_string();
        assert!(
            err.contains("at functions.filehash.sharing.shared.base_mb"),
            "{err}"
        );
        let bad_mode = GOOD.replace("\"shared\":", "\"threads\":");
        let err = ProfileFile::parse(&bad_mode).unwrap_err().to_string();
        assert!(err.contains("functions.filehash.sharing"), "{err}");
        let v2 = GOOD.replace("\"version\": 1", "\"version\": 2");
        assert!(ProfileFile::parse(&v2)
            .unwrap_err()
            .to_string()
            .contains("at version"));
        let missing = GOOD.replace(",\n                    \"isolate\": {\"base_mb\": 30.0, \"increment_mb\": 9.0, \"cold_start_ms\": 90}", "");
        let f = ProfileFile::parse(&missing).unwrap();
        let err = Resolved::resolve(
            "filehash",
            &f.functions["filehash"],
            SharingMode::Isolate,
            &DesiccantConfig::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no 'isolate' entry"), "{err}");
    }

    #[test]
    fn the_thesis_profile_file_parses() {
        let text = include_str!("../profiles/thesis-table-4.1.json");
        let f = ProfileFile::parse(text).unwrap();
        assert_eq!(f.functions.len(), 4);
        let mem = &f.functions["memalloc"].sharing[&SharingMode::Shared];
        assert_eq!((mem.base_mb, mem.increment_mb), (119.0, 195.0));
        // The thesis' formula: Base + (n - 1) x Increment, so one Photons activation of the
        // memory allocator needs its Base, not Base + 195 MB.
        let photons = Resolved::resolve(
            "memalloc",
            &f.functions["memalloc"],
            SharingMode::Shared,
            &DesiccantConfig::default(),
        )
        .unwrap();
        assert_eq!(photons.memory.charge(1), mib_to_bytes(119.0));
        assert_eq!(photons.memory.charge(2), mib_to_bytes(119.0 + 195.0));
    }

    #[test]
    fn mapping_is_deterministic_and_covers_the_profiles() {
        let t = Trace {
            functions: (0..40).map(|i| format!("fn{i}")).collect(),
            ..Trace::default()
        };
        let a = map_functions(&t, 4, Mapping::Random, 3);
        assert_eq!(a, map_functions(&t, 4, Mapping::Random, 3));
        assert_ne!(a, map_functions(&t, 4, Mapping::Random, 4));
        assert!((0..4).all(|p| a.contains(&p)));
        assert_eq!(
            &map_functions(&t, 4, Mapping::RoundRobin, 3)[..5],
            [0, 1, 2, 3, 0]
        );
    }
}
