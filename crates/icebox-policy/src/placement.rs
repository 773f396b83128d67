//! Which node of a cluster runs an invocation: the node that receives it asks this module for
//! an ordered list of candidates, runs or forwards to the first, and falls back to the next
//! when a forward finds the target gone. The daemon and the simulator's multi-node runs call
//! the same function, so a placement policy measured in simulation is the one deployed.
//!
//! The home-node hash follows OpenWhisk's `ShardingContainerPoolBalancer`: every action has a
//! home node and a step co-prime with the node count, so the probe sequence visits every node
//! once and different actions overflow to different nodes.

use serde::{Deserialize, Serialize};
use std::str::FromStr;

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PlacementPolicy {
    /// A node holding a warm or frozen instance of the action first, then the home-node
    /// probe sequence checked against each node's free keep-alive memory (ours).
    #[default]
    WarmHome,
    /// OpenWhisk's hash placement: the probe sequence with the memory check, blind to where
    /// warm instances are.
    Hash,
    /// Each invocation to the next node in turn, the baseline a plain load balancer gives.
    RoundRobin,
}

impl PlacementPolicy {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown placement policy '{0}' (expected warm-home, hash or round-robin)")]
pub struct ParsePlacementPolicyError(pub String);

impl FromStr for PlacementPolicy {
    type Err = ParsePlacementPolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlacementPolicy::ALL
            .iter()
            .copied()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParsePlacementPolicyError(s.to_string()))
    }
}

/// Why a candidate is where it is in the list (a metric label).
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
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PlacementReason {
    /// The node holds an idle (warm or frozen) instance of the action.
    Warm,
    /// The action's home node, with room.
    Home,
    /// A later node of the probe sequence, or any node once none has room.
    Overflow,
    /// Round robin's turn.
    RoundRobin,
}

impl PlacementReason {
    pub const ALL: &'static [Self] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What placement needs to know about one live node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView<'a> {
    /// Stable across the cluster: the order of the home hash is the order of ids, so every
    /// node computes the same home for an action whatever order it learnt the members in.
    pub id: &'a str,
    /// It holds an idle instance of this action (it would be a warm start there).
    pub warm: bool,
    /// Keep-alive memory it can still give without evicting (measured, not declared).
    pub free_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Index into the `nodes` slice given to [`candidates`].
    pub node: usize,
    pub reason: PlacementReason,
}

/// Every node once, best first. `need_bytes` is what a new instance of the action takes;
/// `turn` only matters for round robin (the caller's invocation counter).
pub fn candidates(
    policy: PlacementPolicy,
    action: &str,
    nodes: &[NodeView<'_>],
    need_bytes: u64,
    turn: u64,
) -> Vec<Candidate> {
    let mut by_id: Vec<usize> = (0..nodes.len()).collect();
    by_id.sort_by(|&a, &b| nodes[a].id.cmp(nodes[b].id));
    match policy {
        PlacementPolicy::RoundRobin => round_robin(&by_id, turn),
        PlacementPolicy::Hash => probe(action, nodes, &by_id, need_bytes, false),
        PlacementPolicy::WarmHome => probe(action, nodes, &by_id, need_bytes, true),
    }
}

fn round_robin(by_id: &[usize], turn: u64) -> Vec<Candidate> {
    let Some(len) = u64::try_from(by_id.len()).ok().filter(|&l| l > 0) else {
        return Vec::new();
    };
    (0..len)
        .map(|k| Candidate {
            node: by_id[index((turn % len + k) % len)],
            reason: PlacementReason::RoundRobin,
        })
        .collect()
}

fn probe(
    action: &str,
    nodes: &[NodeView<'_>],
    by_id: &[usize],
    need_bytes: u64,
    warm_first: bool,
) -> Vec<Candidate> {
    let sequence = probe_sequence(action, by_id.len());
    let mut out: Vec<Candidate> = Vec::with_capacity(by_id.len());
    let push = |out: &mut Vec<Candidate>, node: usize, reason: PlacementReason| {
        if !out.iter().any(|c| c.node == node) {
            out.push(Candidate { node, reason });
        }
    };
    if warm_first {
        for &k in &sequence {
            let node = by_id[k];
            if nodes[node].warm {
                push(&mut out, node, PlacementReason::Warm);
            }
        }
    }
    for (i, &k) in sequence.iter().enumerate() {
        let node = by_id[k];
        if nodes[node].free_bytes >= need_bytes {
            let reason = if i == 0 {
                PlacementReason::Home
            } else {
                PlacementReason::Overflow
            };
            push(&mut out, node, reason);
        }
    }
    // No node has room: they all come, in probe order; the one chosen evicts to make room.
    for &k in &sequence {
        push(&mut out, by_id[k], PlacementReason::Overflow);
    }
    out
}

/// Positions (into the id-ordered nodes) in the order an action probes them: home first, then
/// home + step, home + 2·step, … with the step co-prime with `n`, so every node comes once.
pub fn probe_sequence(action: &str, n: usize) -> Vec<usize> {
    let Some(count) = u64::try_from(n).ok().filter(|&c| c > 0) else {
        return Vec::new();
    };
    let hash = stable_hash(action);
    let home = hash % count;
    let steps = coprime_steps(count);
    let step = steps[index((hash >> 32) % u64::try_from(steps.len()).unwrap_or(1))];
    (0..count)
        .map(|k| index((home + k * step) % count))
        .collect()
}

/// The steps co-prime with `n` (1 for a single node), ascending.
pub fn coprime_steps(n: u64) -> Vec<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let n = n.max(1);
    (1..=n).filter(|&s| gcd(s, n) == 1).collect()
}

/// FNV-1a: the same on every node, every build and every Rust version (std's hashers promise
/// none of that).
pub fn stable_hash(text: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    text.bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// A position below a slice length that came from a `u64` modulo that length.
fn index(position: u64) -> usize {
    usize::try_from(position).expect("a position below a slice length fits in usize")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn view(id: &str, warm: bool, free_bytes: u64) -> NodeView<'_> {
        NodeView {
            id,
            warm,
            free_bytes,
        }
    }

    fn ids<'a>(nodes: &[NodeView<'a>], list: &[Candidate]) -> Vec<&'a str> {
        list.iter().map(|c| nodes[c.node].id).collect()
    }

    #[test]
    fn every_policy_lists_every_node_once() {
        let nodes = [
            view("a", false, GIB),
            view("b", true, 0),
            view("c", false, 0),
        ];
        for &policy in PlacementPolicy::ALL {
            for turn in 0..5 {
                let mut got = ids(&nodes, &candidates(policy, "ns/f", &nodes, 1, turn));
                got.sort_unstable();
                assert_eq!(got, ["a", "b", "c"], "{policy}");
            }
        }
        assert!(candidates(PlacementPolicy::WarmHome, "ns/f", &[], 1, 0).is_empty());
    }

    #[test]
    fn the_home_node_does_not_depend_on_the_order_nodes_were_learnt_in() {
        let forward = [
            view("n1", false, GIB),
            view("n2", false, GIB),
            view("n3", false, GIB),
        ];
        let backward = [forward[2].clone(), forward[1].clone(), forward[0].clone()];
        for action in ["guest/a", "guest/b", "other/hello", "x/y"] {
            let f = ids(
                &forward,
                &candidates(PlacementPolicy::Hash, action, &forward, 1, 0),
            );
            let b = ids(
                &backward,
                &candidates(PlacementPolicy::Hash, action, &backward, 1, 0),
            );
            assert_eq!(f, b, "{action}");
        }
    }

    #[test]
    fn a_warm_node_comes_before_home_only_for_warm_home() {
        let cold = [
            view("n1", false, GIB),
            view("n2", false, GIB),
            view("n3", false, GIB),
        ];
        let home = candidates(PlacementPolicy::Hash, "guest/f", &cold, 1, 0)[0];
        assert_eq!(home.reason, PlacementReason::Home);
        // Make another node warm: warm-home goes there, hash stays home.
        let warm_at = (home.node + 1) % 3;
        let mut nodes = cold.clone();
        nodes[warm_at].warm = true;
        let ours = candidates(PlacementPolicy::WarmHome, "guest/f", &nodes, 1, 0);
        assert_eq!(ours[0].node, warm_at);
        assert_eq!(ours[0].reason, PlacementReason::Warm);
        assert_eq!(ours[1].node, home.node);
        let theirs = candidates(PlacementPolicy::Hash, "guest/f", &nodes, 1, 0);
        assert_eq!(theirs[0].node, home.node);
    }

    #[test]
    fn a_full_home_overflows_along_the_probe_sequence() {
        let mut nodes = vec![
            view("n1", false, GIB),
            view("n2", false, GIB),
            view("n3", false, GIB),
        ];
        let sequence = probe_sequence("guest/f", 3);
        let by_id = [0, 1, 2]; // the ids above are already in order
        nodes[by_id[sequence[0]]].free_bytes = 0;
        let list = candidates(PlacementPolicy::Hash, "guest/f", &nodes, GIB, 0);
        assert_eq!(list[0].node, by_id[sequence[1]]);
        assert_eq!(list[0].reason, PlacementReason::Overflow);
        // The full home still comes, last: it can evict if every other node fails.
        assert_eq!(list[2].node, by_id[sequence[0]]);
    }

    #[test]
    fn no_room_anywhere_falls_back_to_the_probe_order() {
        let nodes = [
            view("n1", false, 0),
            view("n2", false, 0),
            view("n3", false, 0),
        ];
        let sequence = probe_sequence("guest/f", 3);
        let list = candidates(PlacementPolicy::WarmHome, "guest/f", &nodes, GIB, 0);
        assert_eq!(list.iter().map(|c| c.node).collect::<Vec<_>>(), sequence);
        assert!(list.iter().all(|c| c.reason == PlacementReason::Overflow));
    }

    #[test]
    fn round_robin_turns() {
        let nodes = [
            view("b", true, GIB),
            view("a", false, GIB),
            view("c", false, GIB),
        ];
        let first: Vec<&str> = (0..4)
            .map(|t| nodes[candidates(PlacementPolicy::RoundRobin, "f", &nodes, 1, t)[0].node].id)
            .collect();
        assert_eq!(first, ["a", "b", "c", "a"]);
    }

    #[test]
    fn probe_sequences_visit_every_node_and_spread_homes() {
        for n in 1..12 {
            for f in 0..50 {
                let mut s = probe_sequence(&format!("ns/f{f}"), n);
                s.sort_unstable();
                assert_eq!(s, (0..n).collect::<Vec<_>>());
            }
        }
        let homes: std::collections::HashSet<usize> = (0..100)
            .map(|f| probe_sequence(&format!("ns/f{f}"), 3)[0])
            .collect();
        assert_eq!(homes.len(), 3, "100 actions have homes on all 3 nodes");
    }

    #[test]
    fn the_hash_is_fixed() {
        // FNV-1a's published test vectors: a change here moves every action's home.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn names_parse_case_insensitively() {
        for &p in PlacementPolicy::ALL {
            assert_eq!(p.as_str().parse::<PlacementPolicy>(), Ok(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
        }
        assert_eq!(
            "Round-Robin".parse::<PlacementPolicy>(),
            Ok(PlacementPolicy::RoundRobin)
        );
        assert!("nearest".parse::<PlacementPolicy>().is_err());
    }
}
