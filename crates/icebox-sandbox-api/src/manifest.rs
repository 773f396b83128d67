//! Runtime kinds, read from `runtimes/<lang>/runtime.json`: how to launch each action proxy.

use anyhow::{bail, Context};
use icebox_core::units::MIB;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
pub struct RuntimeManifest {
    pub kind: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// argv; `{runtime_dir}` stands for wherever the runtime directory is visible to it,
    /// `{memory_mb}` for the instance's memory limit and `{heap_mb}` for the share of it a
    /// managed heap may take (see [`heap_mb`]).
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// More environment for the instances of one sharing profile only (the daemon's
    /// `sharing::profile`: `process`, `shared`, `isolate:v8`, `isolate:worker`), so that a flag
    /// one mode needs costs the others nothing: Node's `--no-node-snapshot`, which isolated-vm
    /// needs and which adds ~30 ms to every start.
    #[serde(default)]
    pub sharing_env: BTreeMap<String, BTreeMap<String, String>>,
    /// Host directory of this runtime (filled in when loading).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// The share of an instance's memory limit a managed heap may grow to: the rest is the
/// runtime's own (code, JIT, young generation, native buffers). A runtime that sizes its heap
/// from the limit it sees at start-up would otherwise grow past the cgroup limit and be
/// OOM-killed before its collector runs (measured: Node 20 in a 256 MiB cgroup sets a 259 MiB
/// heap limit).
pub fn heap_mb(memory_limit_bytes: u64) -> u64 {
    (memory_limit_bytes / MIB) * 3 / 5
}

impl RuntimeManifest {
    /// argv with `{runtime_dir}`, `{memory_mb}` and `{heap_mb}` replaced.
    pub fn argv(&self, runtime_dir: &str, memory_limit_bytes: u64) -> Vec<String> {
        self.command
            .iter()
            .map(|a| expand(a, runtime_dir, memory_limit_bytes))
            .collect()
    }

    /// Environment with the same placeholders replaced, e.g. a PYTHONPATH into the runtime's
    /// own package directory.
    pub fn env_for(&self, runtime_dir: &str, memory_limit_bytes: u64) -> Vec<(String, String)> {
        self.env
            .iter()
            .map(|(k, v)| (k.clone(), expand(v, runtime_dir, memory_limit_bytes)))
            .collect()
    }

    /// The extra environment of a sharing profile (none for a profile it does not name).
    pub fn sharing_env_for(&self, profile: &str) -> Vec<(String, String)> {
        self.sharing_env
            .get(profile)
            .map(|env| env.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    pub fn language(&self) -> &str {
        self.kind.split(':').next().unwrap_or(&self.kind)
    }
}

fn expand(text: &str, runtime_dir: &str, memory_limit_bytes: u64) -> String {
    text.replace("{runtime_dir}", runtime_dir)
        .replace("{memory_mb}", &(memory_limit_bytes / MIB).to_string())
        .replace("{heap_mb}", &heap_mb(memory_limit_bytes).to_string())
}

/// All known kinds, with aliases resolved.
#[derive(Debug, Clone, Default)]
pub struct Runtimes {
    by_kind: BTreeMap<String, RuntimeManifest>,
    aliases: BTreeMap<String, String>,
}

impl Runtimes {
    /// Load every `*/runtime.json` under `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Runtimes> {
        let mut runtimes = Runtimes::default();
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read the runtimes directory {}", dir.display()))?;
        for entry in entries {
            let sub = entry?.path();
            let file = sub.join("runtime.json");
            if !file.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&file)?;
            let mut m: RuntimeManifest = serde_json::from_str(&text)
                .with_context(|| format!("invalid runtime manifest {}", file.display()))?;
            if m.command.is_empty() {
                bail!("{}: empty command", file.display());
            }
            m.dir = sub.canonicalize()?;
            runtimes.insert(m);
        }
        if runtimes.by_kind.is_empty() {
            bail!("no runtime.json found under {}", dir.display());
        }
        Ok(runtimes)
    }

    pub fn insert(&mut self, m: RuntimeManifest) {
        for alias in &m.aliases {
            self.aliases.insert(alias.clone(), m.kind.clone());
        }
        self.by_kind.insert(m.kind.clone(), m);
    }

    /// The canonical kind for a kind or alias.
    pub fn resolve(&self, kind: &str) -> Option<&RuntimeManifest> {
        let canonical = self.aliases.get(kind).map(String::as_str).unwrap_or(kind);
        self.by_kind.get(canonical)
    }

    pub fn kinds(&self) -> Vec<String> {
        self.by_kind
            .keys()
            .chain(self.aliases.keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icebox_core::units::GIB;

    #[test]
    fn loads_manifests_and_resolves_aliases() {
        let dir = tempfile::tempdir().unwrap();
        let py = dir.path().join("python");
        std::fs::create_dir(&py).unwrap();
        std::fs::write(
            py.join("runtime.json"),
            r#"{"kind":"python:3","aliases":["python:default"],"command":["/usr/bin/python3","{runtime_dir}/proxy.py"],"env":{"PYTHONPATH":"{runtime_dir}/packages"}}"#,
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let rt = Runtimes::load(dir.path()).unwrap();
        let m = rt.resolve("python:default").unwrap();
        assert_eq!(m.kind, "python:3");
        assert_eq!(
            m.argv("/opt/r", 256 * MIB),
            vec!["/usr/bin/python3", "/opt/r/proxy.py"]
        );
        assert_eq!(m.language(), "python");
        assert_eq!(
            m.env_for("/opt/r", 256 * MIB),
            vec![("PYTHONPATH".to_string(), "/opt/r/packages".to_string())]
        );
        assert!(rt.resolve("ruby:3").is_none());
        assert!(m.sharing_env_for("isolate:v8").is_empty());
    }

    #[test]
    fn sharing_env_is_per_profile() {
        let m: RuntimeManifest = serde_json::from_str(
            r#"{"kind":"nodejs:20","command":["node"],"sharing_env":{"isolate:v8":{"NODE_OPTIONS":"--no-node-snapshot"}}}"#,
        )
        .unwrap();
        assert_eq!(
            m.sharing_env_for("isolate:v8"),
            vec![("NODE_OPTIONS".to_string(), "--no-node-snapshot".to_string())]
        );
        assert!(m.sharing_env_for("isolate:worker").is_empty());
        assert!(m.sharing_env_for("process").is_empty());
    }

    #[test]
    fn memory_placeholders_follow_the_instance_limit() {
        let m = RuntimeManifest {
            kind: "nodejs:20".into(),
            aliases: vec![],
            command: vec![
                "node".into(),
                "--max-old-space-size={heap_mb}".into(),
                "{runtime_dir}/proxy.js".into(),
            ],
            env: BTreeMap::from([("LIMIT".to_string(), "{memory_mb}".to_string())]),
            sharing_env: BTreeMap::new(),
            dir: PathBuf::new(),
        };
        assert_eq!(
            m.argv("/r", 256 * MIB),
            vec!["node", "--max-old-space-size=153", "/r/proxy.js"]
        );
        assert_eq!(m.argv("/r", GIB)[1], "--max-old-space-size=614");
        assert_eq!(
            m.env_for("/r", 512 * MIB),
            vec![("LIMIT".to_string(), "512".to_string())]
        );
    }

    #[test]
    fn empty_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Runtimes::load(dir.path()).is_err());
    }
}
