//! The partitions of one N:1 VM and what each holds. Every transition that changes how
//! much memory is plugged happens here under one lock, so the budget is adjusted exactly
//! once per partition whatever races (an unplug finishing while QEMU dies, say).

/// Partitions are numbered 1..=N (in Squeezy mode partition p is guest NUMA node p).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    Free,
    /// Claimed by a start; memory being plugged or already in use by the instance.
    Held {
        instance: String,
        bytes: u64,
    },
    /// The instance has gone; its memory is being unplugged.
    Releasing {
        instance: String,
        bytes: u64,
    },
    /// The unplug did not finish within its timeout: unusable until it does.
    Stuck {
        instance: String,
        bytes: u64,
    },
}

#[derive(Debug)]
pub struct Slots {
    slots: Vec<Slot>,
    /// The VM is gone: nothing to claim or release any more.
    closed: bool,
}

/// What a transition means for the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetChange {
    None,
    BeginRelease(u64),
    Stalled(u64),
    GiveBack { bytes: u64, was_releasing: bool },
}

impl Slots {
    pub fn new(n: u32) -> Slots {
        Slots {
            slots: vec![Slot::Free; n as usize],
            closed: false,
        }
    }

    fn get_mut(&mut self, p: u32) -> &mut Slot {
        &mut self.slots[(p - 1) as usize]
    }

    pub fn get(&self, p: u32) -> &Slot {
        &self.slots[(p - 1) as usize]
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The lowest free partition, now held by `instance`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "partitions per VM: a handful"
    )]
    pub fn claim(&mut self, instance: &str, bytes: u64) -> Option<u32> {
        if self.closed {
            return None;
        }
        let i = self.slots.iter().position(|s| *s == Slot::Free)?;
        self.slots[i] = Slot::Held {
            instance: instance.to_string(),
            bytes,
        };
        Some(i as u32 + 1)
    }

    /// Whether a partition may become free without an instance leaving (one is being
    /// released or is stuck): worth waiting for.
    pub fn any_coming_free(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Releasing { .. } | Slot::Stuck { .. }))
    }

    /// Instances holding a partition (live neighbours).
    pub fn held(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Held { .. }))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(|s| *s == Slot::Free)
    }

    /// Partition `p`'s instance has gone: start unplugging. `None` if it was not held by
    /// `instance` (already released, or the VM is gone).
    pub fn begin_release(&mut self, p: u32, instance: &str) -> Option<(u64, BudgetChange)> {
        if self.closed {
            return None;
        }
        let bytes = match self.get(p) {
            Slot::Held { instance: i, bytes } if i == instance => *bytes,
            _ => return None,
        };
        *self.get_mut(p) = Slot::Releasing {
            instance: instance.to_string(),
            bytes,
        };
        Some((bytes, BudgetChange::BeginRelease(bytes)))
    }

    /// The unplug of partition `p` completed (from `Releasing` or `Stuck`), or a plug failed
    /// and nothing stayed plugged (`Held`).
    pub fn freed(&mut self, p: u32) -> BudgetChange {
        if self.closed {
            return BudgetChange::None;
        }
        let change = match self.get(p) {
            Slot::Free => BudgetChange::None,
            Slot::Held { bytes, .. } | Slot::Stuck { bytes, .. } => BudgetChange::GiveBack {
                bytes: *bytes,
                was_releasing: false,
            },
            Slot::Releasing { bytes, .. } => BudgetChange::GiveBack {
                bytes: *bytes,
                was_releasing: true,
            },
        };
        *self.get_mut(p) = Slot::Free;
        change
    }

    /// The unplug of partition `p` timed out.
    pub fn stuck(&mut self, p: u32) -> BudgetChange {
        if self.closed {
            return BudgetChange::None;
        }
        match self.get(p).clone() {
            Slot::Releasing { instance, bytes } => {
                *self.get_mut(p) = Slot::Stuck { instance, bytes };
                BudgetChange::Stalled(bytes)
            }
            _ => BudgetChange::None,
        }
    }

    /// The VM is gone: every partition's memory went with it.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "partitions per VM: a handful"
    )]
    pub fn close(&mut self) -> Vec<BudgetChange> {
        if self.closed {
            return Vec::new();
        }
        let changes = (1..=self.slots.len() as u32)
            .map(|p| self.freed(p))
            .filter(|c| *c != BudgetChange::None)
            .collect();
        self.closed = true;
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_goes_held_releasing_free() {
        let mut s = Slots::new(2);
        assert_eq!(s.claim("a", 10), Some(1));
        assert_eq!(s.claim("b", 10), Some(2));
        assert_eq!(s.claim("c", 10), None);
        assert!(!s.any_coming_free());
        assert_eq!(s.begin_release(1, "b"), None, "not b's partition");
        assert_eq!(
            s.begin_release(1, "a"),
            Some((10, BudgetChange::BeginRelease(10)))
        );
        assert_eq!(s.begin_release(1, "a"), None, "released once");
        assert!(s.any_coming_free());
        assert_eq!(s.held(), 1);
        assert_eq!(
            s.freed(1),
            BudgetChange::GiveBack {
                bytes: 10,
                was_releasing: true
            }
        );
        assert_eq!(s.claim("c", 10), Some(1));
    }

    #[test]
    fn a_stuck_unplug_keeps_its_partition_until_it_completes() {
        let mut s = Slots::new(1);
        s.claim("a", 10);
        s.begin_release(1, "a");
        assert_eq!(s.stuck(1), BudgetChange::Stalled(10));
        assert_eq!(s.claim("b", 10), None);
        assert_eq!(
            s.freed(1),
            BudgetChange::GiveBack {
                bytes: 10,
                was_releasing: false
            }
        );
        assert_eq!(s.claim("b", 10), Some(1));
    }

    #[test]
    fn closing_gives_everything_back_once() {
        let mut s = Slots::new(3);
        s.claim("a", 10);
        s.claim("b", 20);
        s.begin_release(2, "b");
        let changes = s.close();
        assert_eq!(changes.len(), 2);
        assert!(changes.contains(&BudgetChange::GiveBack {
            bytes: 20,
            was_releasing: true
        }));
        assert!(s.close().is_empty());
        assert_eq!(s.freed(1), BudgetChange::None);
        assert_eq!(s.claim("c", 1), None);
    }
}
