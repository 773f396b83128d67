//! Reclaim profiles (Desiccant §4.5.2): what earlier reclaims freed and cost, averaged per
//! instance, per action and node-wide, to estimate what reclaiming an instance now would gain.
//!
//! The paper subtracts the runtime's live heap bytes from the instance's heap size. icebox
//! charges instances by their whole-process memory (USS or PSS), which also holds the runtime
//! itself, its libraries and native allocations; subtracting heap live bytes from that would
//! promise memory no reclaim can free, most of all for small instances. So the estimate works
//! in the charged measure throughout: what stays after a reclaim is `memory_before − freed`
//! (the charge the daemon measured after it), and that stays stable per function for the same
//! reason the paper's live bytes do — instances are stateless between activations. The
//! runtime's heap live bytes are kept alongside, for display.

use super::config::DesiccantConfig;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A reclaim costs the node at least a thaw, an HTTP round trip and a freeze, even when the
/// runtime's own CPU clock reports (next to) nothing; this floor also keeps a zero from
/// turning a throughput into infinity.
pub const MIN_RECLAIM_CPU_MS: f64 = 1.0;

/// What one reclaim of one instance achieved, as the daemon measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The instance's charge right before the reclaim: the measure of `Candidate::memory`.
    pub memory_before: u64,
    /// Heap bytes in use right after the collection, as the runtime reported them.
    pub live_bytes: u64,
    /// Node CPU time the reclaim consumed (for a cgroup with a fractional CPU share, elapsed
    /// time weighted by the share, as in the paper).
    pub cpu_ms: f64,
    /// Charged bytes released: `memory_before` minus the charge measured after the reclaim,
    /// library page-out included.
    pub freed: u64,
}

impl Profile {
    /// The charge left after the reclaim.
    pub fn retained(&self) -> u64 {
        self.memory_before.saturating_sub(self.freed)
    }

    /// Unusable as evidence: no memory to compare with, or a CPU time that is not a time.
    fn is_valid(&self) -> bool {
        self.memory_before > 0 && self.cpu_ms.is_finite() && self.cpu_ms >= 0.0
    }
}

/// Where an estimate's numbers come from, most specific first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EstimateSource {
    /// This instance's own earlier reclaims.
    Instance,
    /// Reclaims of other instances of the same action: they share code and live data.
    Action,
    /// Reclaims of any instance on the node.
    Global,
    /// No reclaim measured yet: the configured prior.
    Prior,
}

impl EstimateSource {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The memory expected to survive a reclaim.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retained {
    /// An absolute amount: the same function retains about the same whatever it grew to.
    Bytes(u64),
    /// A share of the current memory: other functions' byte counts say nothing about this
    /// one's size, but the share their reclaims kept transfers roughly, and it makes every
    /// unprofiled instance worth a first reclaim, which gives it a profile of its own.
    Fraction(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub source: EstimateSource,
    /// Profiles averaged into it (0 for the prior).
    pub samples: u64,
    pub retained: Retained,
    /// Mean heap live bytes the runtime reported; `None` unless the profiles are this
    /// function's own.
    pub live_bytes: Option<u64>,
    pub cpu_ms: f64,
}

impl Estimate {
    pub fn prior(cfg: &DesiccantConfig) -> Self {
        Estimate {
            source: EstimateSource::Prior,
            samples: 0,
            retained: Retained::Fraction(cfg.prior_retained_fraction),
            live_bytes: None,
            cpu_ms: cfg.prior_cpu_ms,
        }
    }

    /// Bytes of an instance charged `memory` that a reclaim is expected to keep.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    pub fn retained_bytes(&self, memory: u64) -> u64 {
        match self.retained {
            Retained::Bytes(b) => b.min(memory),
            // `as` saturates (and maps NaN to 0), so the product never escapes 0..=memory.
            Retained::Fraction(f) => ((memory as f64 * f.clamp(0.0, 1.0)) as u64).min(memory),
        }
    }

    /// Bytes a reclaim is expected to release from an instance charged `memory`.
    pub fn reclaimable_bytes(&self, memory: u64) -> u64 {
        memory - self.retained_bytes(memory)
    }

    /// Expected bytes released per millisecond of CPU: the paper's selection key.
    pub fn throughput(&self, memory: u64) -> f64 {
        self.reclaimable_bytes(memory) as f64 / self.cpu_ms.max(MIN_RECLAIM_CPU_MS)
    }
}

/// Running sums of profiles. Only ever added to; removing an instance rebuilds the affected
/// sums from the remaining instances, so floating-point error never piles up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sums {
    count: u64,
    retained: u128,
    live: u128,
    cpu_ms: f64,
    retained_fraction: f64,
}

impl Sums {
    fn add(&mut self, p: &Profile) {
        self.count += 1;
        self.retained += u128::from(p.retained());
        self.live += u128::from(p.live_bytes);
        self.cpu_ms += p.cpu_ms;
        self.retained_fraction += p.retained() as f64 / p.memory_before as f64;
    }

    fn merge(&mut self, other: &Sums) {
        self.count += other.count;
        self.retained += other.retained;
        self.live += other.live;
        self.cpu_ms += other.cpu_ms;
        self.retained_fraction += other.retained_fraction;
    }

    fn mean(total: u128, count: u64) -> u64 {
        // A mean of u64 values fits in u64.
        u64::try_from(total / u128::from(count)).unwrap_or(u64::MAX)
    }

    /// The estimate for the function these profiles came from; `None` without profiles.
    fn own(&self, source: EstimateSource) -> Option<Estimate> {
        (self.count > 0).then(|| Estimate {
            source,
            samples: self.count,
            retained: Retained::Bytes(Self::mean(self.retained, self.count)),
            live_bytes: Some(Self::mean(self.live, self.count)),
            cpu_ms: self.cpu_ms / self.count as f64,
        })
    }

    /// The estimate for an instance of some other function.
    fn foreign(&self) -> Option<Estimate> {
        (self.count > 0).then(|| Estimate {
            source: EstimateSource::Global,
            samples: self.count,
            retained: Retained::Fraction(self.retained_fraction / self.count as f64),
            live_bytes: None,
            cpu_ms: self.cpu_ms / self.count as f64,
        })
    }
}

#[derive(Debug, Clone)]
struct InstanceProfiles {
    action: String,
    sums: Sums,
}

#[derive(Debug, Clone, Default)]
struct ActionProfiles {
    instances: BTreeSet<String>,
    sums: Sums,
}

/// Profiles of the node's live instances. Profiles leave with their instance
/// ([`Self::forget_instance`]), so the store never outgrows the pool.
#[derive(Debug, Clone, Default)]
pub struct ProfileStore {
    instances: BTreeMap<String, InstanceProfiles>,
    actions: BTreeMap<String, ActionProfiles>,
    global: Sums,
}

impl ProfileStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the profile of a finished reclaim. Returns false, recording nothing, for a profile
    /// that cannot be evidence: `memory_before` of 0, or a CPU time that is negative or not
    /// finite. An instance id seen before under another action is taken to be a new instance
    /// that reuses the id: its old profiles are dropped.
    pub fn record(&mut self, instance: &str, action: &str, profile: Profile) -> bool {
        if !profile.is_valid() {
            return false;
        }
        if self
            .instances
            .get(instance)
            .is_some_and(|known| known.action != action)
        {
            self.forget_instance(instance);
        }
        self.instances
            .entry(instance.to_string())
            .or_insert_with(|| InstanceProfiles {
                action: action.to_string(),
                sums: Sums::default(),
            })
            .sums
            .add(&profile);
        let per_action = self.actions.entry(action.to_string()).or_default();
        per_action.instances.insert(instance.to_string());
        per_action.sums.add(&profile);
        self.global.add(&profile);
        true
    }

    /// Drops an instance's profiles (it was evicted or died). Unknown ids are ignored.
    pub fn forget_instance(&mut self, instance: &str) {
        let Some(gone) = self.instances.remove(instance) else {
            return;
        };
        if let Some(per_action) = self.actions.get_mut(&gone.action) {
            per_action.instances.remove(instance);
            if per_action.instances.is_empty() {
                self.actions.remove(&gone.action);
            } else {
                let mut sums = Sums::default();
                for id in &per_action.instances {
                    if let Some(p) = self.instances.get(id) {
                        sums.merge(&p.sums);
                    }
                }
                per_action.sums = sums;
            }
        }
        self.global = self.actions.values().fold(Sums::default(), |mut sums, a| {
            sums.merge(&a.sums);
            sums
        });
    }

    /// The most specific estimate for `instance` of `action`: its own profiles, else its
    /// action's, else the node's. `None` when no instance has been reclaimed yet; callers then
    /// use [`Estimate::prior`].
    pub fn estimate(&self, instance: &str, action: &str) -> Option<Estimate> {
        self.instances
            .get(instance)
            .and_then(|p| p.sums.own(EstimateSource::Instance))
            .or_else(|| {
                self.actions
                    .get(action)
                    .and_then(|a| a.sums.own(EstimateSource::Action))
            })
            .or_else(|| self.global.foreign())
    }

    /// Instances with at least one profile.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    pub fn contains(&self, instance: &str) -> bool {
        self.instances.contains_key(instance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use icebox_core::units::MIB;

    fn profile(memory_mib: u64, freed_mib: u64, live_mib: u64, cpu_ms: f64) -> Profile {
        Profile {
            memory_before: memory_mib * MIB,
            live_bytes: live_mib * MIB,
            cpu_ms,
            freed: freed_mib * MIB,
        }
    }

    #[test]
    fn an_instances_own_profiles_are_averaged() {
        let mut store = ProfileStore::new();
        assert!(store.record("a1", "ns/a", profile(100, 60, 10, 20.0)));
        assert!(store.record("a1", "ns/a", profile(120, 70, 14, 30.0)));
        let e = store.estimate("a1", "ns/a").unwrap();
        assert_eq!(e.source, EstimateSource::Instance);
        assert_eq!(e.samples, 2);
        // Retained 40 and 50 MiB.
        assert_eq!(e.retained, Retained::Bytes(45 * MIB));
        assert_eq!(e.live_bytes, Some(12 * MIB));
        assert_eq!(e.cpu_ms, 25.0);
        assert_eq!(e.reclaimable_bytes(145 * MIB), 100 * MIB);
        assert_eq!(e.throughput(145 * MIB), (100 * MIB) as f64 / 25.0);
        // An instance that shrank below what it usually keeps has nothing to give.
        assert_eq!(e.reclaimable_bytes(30 * MIB), 0);
        assert_eq!(e.throughput(30 * MIB), 0.0);
    }

    #[test]
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "float to integer `as` saturates and maps NaN to 0, and this non-negative figure is meant to be rounded to a whole number"
    )]
    fn falls_back_from_instance_to_action_to_global_to_prior() {
        let cfg = DesiccantConfig::default();
        let mut store = ProfileStore::new();
        assert_eq!(store.estimate("x", "ns/x"), None);
        let prior = Estimate::prior(&cfg);
        assert_eq!(prior.source, EstimateSource::Prior);
        assert_eq!(prior.reclaimable_bytes(100 * MIB), 50 * MIB);
        assert_eq!(prior.throughput(100 * MIB), (50 * MIB) as f64 / 20.0);

        store.record("a1", "ns/a", profile(100, 75, 5, 10.0));
        store.record("a2", "ns/a", profile(200, 155, 5, 30.0));
        store.record("b1", "ns/b", profile(50, 0, 5, 50.0));

        let own = store.estimate("a1", "ns/a").unwrap();
        assert_eq!(
            (own.source, own.retained, own.cpu_ms),
            (EstimateSource::Instance, Retained::Bytes(25 * MIB), 10.0)
        );

        // A new instance of ns/a: the pooled profiles of a1 and a2.
        let sibling = store.estimate("a3", "ns/a").unwrap();
        assert_eq!(sibling.source, EstimateSource::Action);
        assert_eq!(sibling.samples, 2);
        assert_eq!(sibling.retained, Retained::Bytes(35 * MIB));
        assert_eq!(sibling.live_bytes, Some(5 * MIB));
        assert_eq!(sibling.cpu_ms, 20.0);

        // A function never reclaimed: the node-wide shares, not other functions' byte counts.
        // Retained shares 0.25, 0.225 and 1.0; CPU 10, 30 and 50 ms.
        let stranger = store.estimate("c1", "ns/c").unwrap();
        assert_eq!(stranger.source, EstimateSource::Global);
        assert_eq!(stranger.samples, 3);
        assert_eq!(stranger.live_bytes, None);
        assert_eq!(stranger.cpu_ms, 30.0);
        let Retained::Fraction(f) = stranger.retained else {
            panic!("global estimate in bytes: {stranger:?}");
        };
        assert!((f - 1.475 / 3.0).abs() < 1e-12);
        assert_eq!(
            stranger.retained_bytes(300 * MIB),
            (300.0 * MIB as f64 * f) as u64
        );
    }

    #[test]
    fn forgetting_an_instance_drops_its_profiles_everywhere() {
        let mut store = ProfileStore::new();
        store.record("a1", "ns/a", profile(100, 90, 5, 10.0));
        store.record("a2", "ns/a", profile(100, 50, 5, 40.0));
        store.record("b1", "ns/b", profile(100, 20, 5, 70.0));
        assert_eq!(store.len(), 3);

        store.forget_instance("a1");
        assert!(!store.contains("a1"));
        assert_eq!(store.len(), 2);
        // a1 itself and its siblings now only see a2.
        let e = store.estimate("a1", "ns/a").unwrap();
        assert_eq!(e.source, EstimateSource::Action);
        assert_eq!(
            (e.samples, e.retained, e.cpu_ms),
            (1, Retained::Bytes(50 * MIB), 40.0)
        );
        let g = store.estimate("c1", "ns/c").unwrap();
        assert_eq!((g.samples, g.cpu_ms), (2, 55.0));

        store.forget_instance("a2");
        let e = store.estimate("a9", "ns/a").unwrap();
        assert_eq!(
            (e.source, e.samples, e.cpu_ms),
            (EstimateSource::Global, 1, 70.0)
        );
        assert_eq!(e.retained, Retained::Fraction(0.8));

        store.forget_instance("b1");
        store.forget_instance("never-seen");
        assert!(store.is_empty());
        assert_eq!(store.estimate("b1", "ns/b"), None);
    }

    #[test]
    fn a_reused_id_under_another_action_starts_afresh() {
        let mut store = ProfileStore::new();
        store.record("i", "ns/a", profile(100, 90, 5, 10.0));
        store.record("i", "ns/b", profile(100, 20, 5, 70.0));
        let e = store.estimate("i", "ns/b").unwrap();
        assert_eq!((e.source, e.samples), (EstimateSource::Instance, 1));
        assert_eq!(e.retained, Retained::Bytes(80 * MIB));
        // ns/a has no profile left, so its instances fall back to the node's.
        assert_eq!(
            store.estimate("j", "ns/a").unwrap().source,
            EstimateSource::Global
        );
    }

    #[test]
    fn invalid_profiles_are_refused() {
        let mut store = ProfileStore::new();
        for bad in [
            profile(0, 0, 0, 5.0),
            profile(10, 1, 1, -1.0),
            profile(10, 1, 1, f64::NAN),
            profile(10, 1, 1, f64::INFINITY),
        ] {
            assert!(!store.record("a1", "ns/a", bad), "{bad:?}");
        }
        assert!(store.is_empty());
        // Freed more than it had (measurement noise): nothing retained, not an underflow.
        assert!(store.record("a1", "ns/a", profile(10, 12, 1, 0.0)));
        let e = store.estimate("a1", "ns/a").unwrap();
        assert_eq!(e.retained, Retained::Bytes(0));
        // A zero CPU time is floored rather than dividing by zero.
        assert_eq!(e.throughput(4 * MIB), (4 * MIB) as f64 / MIN_RECLAIM_CPU_MS);
    }

    #[test]
    fn fraction_estimates_stay_within_the_memory() {
        let mut e = Estimate::prior(&DesiccantConfig::default());
        for (f, memory, retained) in [
            (0.0, 100, 0),
            (1.0, 100, 100),
            (1.5, 100, 100),
            (-0.5, 100, 0),
            (f64::NAN, 100, 0),
            (0.5, u64::MAX, u64::MAX / 2 + 1),
        ] {
            e.retained = Retained::Fraction(f);
            assert_eq!(e.retained_bytes(memory), retained, "{f} of {memory}");
            assert_eq!(e.reclaimable_bytes(memory), memory - retained);
        }
    }
}
