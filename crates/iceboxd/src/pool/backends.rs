//! Which sandbox backend runs an action's instances: the node's default isolation, or the
//! action's annotation `icebox.isolation` (`process`, `vm` or `vm-shared`; docs/vm.md). A node
//! always has the process backend (crun, or plain processes); the VM backends exist when the
//! node could start them (root, QEMU, the guest image), and say why not otherwise.

use icebox_core::action::KeyValue;
use icebox_core::ActionSpec;
use icebox_sandbox::SandboxBackend;
use serde_json::Value;
use std::sync::Arc;

const ANNOTATION: &str = "icebox.isolation";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// crun containers (or plain processes without root).
    Process,
    /// One instance per microVM.
    Vm,
    /// Squeezy's N:1 VMs: one memory partition per instance.
    VmShared,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Process => "process",
            Isolation::Vm => "vm",
            Isolation::VmShared => "vm-shared",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "process" => Ok(Isolation::Process),
            "vm" => Ok(Isolation::Vm),
            "vm-shared" => Ok(Isolation::VmShared),
            other => Err(format!(
                "unknown isolation '{other}' (expected process, vm or vm-shared)"
            )),
        }
    }
}

/// A backend, or why this node has none of that kind.
pub enum Slot {
    Ready(Arc<dyn SandboxBackend>),
    Unavailable(String),
}

pub struct Backends {
    pub default: Isolation,
    process: Arc<dyn SandboxBackend>,
    vm: Slot,
    vm_shared: Slot,
}

impl Backends {
    pub fn new(
        default: Isolation,
        process: Arc<dyn SandboxBackend>,
        vm: Slot,
        vm_shared: Slot,
    ) -> Backends {
        Backends {
            default,
            process,
            vm,
            vm_shared,
        }
    }

    /// Only the process backend.
    #[cfg(test)]
    pub fn process_only(process: Arc<dyn SandboxBackend>) -> Backends {
        let why = || Slot::Unavailable("this node was started without VM backends".into());
        Backends::new(Isolation::Process, process, why(), why())
    }

    pub fn process(&self) -> &Arc<dyn SandboxBackend> {
        &self.process
    }

    /// The backend of an isolation, or why there is none.
    pub fn get(&self, isolation: Isolation) -> Result<&Arc<dyn SandboxBackend>, String> {
        let slot = match isolation {
            Isolation::Process => return Ok(&self.process),
            Isolation::Vm => &self.vm,
            Isolation::VmShared => &self.vm_shared,
        };
        match slot {
            Slot::Ready(b) => Ok(b),
            Slot::Unavailable(why) => Err(format!(
                "isolation '{}' is not available on this node: {why}",
                isolation.as_str()
            )),
        }
    }

    /// Every backend this node has, default first.
    pub fn all(&self) -> Vec<&Arc<dyn SandboxBackend>> {
        let mut all = vec![&self.process];
        for slot in [&self.vm, &self.vm_shared] {
            if let Slot::Ready(b) = slot {
                all.push(b);
            }
        }
        all
    }

    /// The names of the isolations this node offers and, for the others, why not.
    pub fn describe(&self) -> Vec<(Isolation, Result<&'static str, String>)> {
        [Isolation::Process, Isolation::Vm, Isolation::VmShared]
            .into_iter()
            .map(|i| (i, self.get(i).map(|b| b.name())))
            .collect()
    }

    /// The action's isolation: its annotation, else the node's default.
    pub fn isolation_of(&self, action: &ActionSpec) -> Isolation {
        annotation(&action.annotations)
            .and_then(Result::ok)
            .unwrap_or(self.default)
    }

    /// Checked at deployment: a bad value, or a backend this node lacks, is a 400 now rather
    /// than a failed cold start later.
    pub fn validate(&self, annotations: &[KeyValue]) -> Result<(), String> {
        match annotation(annotations) {
            None => Ok(()),
            Some(Err(e)) => Err(e),
            Some(Ok(isolation)) => self.get(isolation).map(|_| ()),
        }
    }
}

fn annotation(annotations: &[KeyValue]) -> Option<Result<Isolation, String>> {
    let value = &annotations.iter().find(|kv| kv.key == ANNOTATION)?.value;
    Some(match value {
        Value::String(s) => s
            .parse()
            .map_err(|e| format!("The annotation '{ANNOTATION}': {e}.")),
        _ => Err(format!("The annotation '{ANNOTATION}' must be a string.")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: Value) -> Vec<KeyValue> {
        vec![KeyValue {
            key: key.into(),
            value,
        }]
    }

    #[test]
    fn isolation_names_round_trip() {
        for i in [Isolation::Process, Isolation::Vm, Isolation::VmShared] {
            assert_eq!(i.as_str().parse::<Isolation>().unwrap(), i);
        }
        assert!("container".parse::<Isolation>().is_err());
    }

    #[test]
    fn the_annotation_is_checked() {
        assert!(annotation(&[]).is_none());
        assert_eq!(
            annotation(&kv(ANNOTATION, Value::String("vm".into()))),
            Some(Ok(Isolation::Vm))
        );
        assert!(annotation(&kv(ANNOTATION, Value::Bool(true)))
            .unwrap()
            .unwrap_err()
            .contains("must be a string"));
        assert!(annotation(&kv(ANNOTATION, Value::String("kvm".into())))
            .unwrap()
            .unwrap_err()
            .contains("unknown isolation 'kvm'"));
    }
}
