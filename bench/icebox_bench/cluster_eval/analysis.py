"""The `cluster` recipe's figures, from what the live replay and icebox-sim left behind.

- A live activation is cold when its record has the `initTime` annotation (invocations.jsonl's
  `init_ms`): the daemon ran /init for it.
- Memory·time per node: the node's instance memory (GET /icebox/v1/memory `total.<measure>`)
  sampled every second, held until the next sample, integrated over the replay's horizon.
- icebox-sim hashes the trace function's name for the home node and the daemon hashes the
  action's `namespace/name`: the events and profiles the simulator gets carry that name, and its
  nodes are `n1` … `nN` as the live ones, so both place with the same homes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import stats

POLICIES = ("warm-home", "hash", "round-robin")
# The targets: simulated cold starts within 10 % of the live cluster's, and warm-aware
# placement at least 2x fewer cold starts than round robin.
TARGET_SIM_DIFFERENCE = 0.10
TARGET_WARM_HOME_GAIN = 2.0
MIB = 1024.0 * 1024.0
# An action's memory limit when its manifest gives none (OpenWhisk's and iceboxd's default).
DEFAULT_LIMIT_MB = 256


def node_ids(count: int) -> list[str]:
    """The live nodes' --node-id, the ids icebox-sim gives its nodes."""
    return [f"n{k}" for k in range(1, count + 1)]


def placement_name(namespace: str, action: str) -> str:
    """The name the daemon hashes for an action's home node."""
    return f"{namespace}/{action}"


def sim_events(events: list[dict], namespace: str) -> list[dict]:
    """The replay's events with the function named as the daemon hashes it."""
    return [{**e, "function": placement_name(namespace, e["function"])} for e in events]


def sim_profiles(profiles: dict, namespace: str, limits_mb: dict[str, int | None]) -> dict:
    """The per-action profile file keyed by the hashed names, each with the action's declared
    memory limit (`limit_mb`: the daemon checks that against a node's free keep-alive memory).
    The prefix keeps the names' order, so icebox-sim's `--mapping round-robin` still gives
    every action its own profile."""
    return {
        **profiles,
        "functions": {
            placement_name(namespace, a): {**p, "limit_mb": limits_mb.get(a) or DEFAULT_LIMIT_MB}
            for a, p in profiles["functions"].items()
        },
    }


def entry_nodes(count: int, nodes: int) -> list[int]:
    """Which node receives the k-th invocation: a plain round-robin load balancer."""
    if nodes < 1:
        raise ValueError("a cluster has at least one node")
    return [k % nodes for k in range(count)]


def is_cold(record: dict) -> bool:
    return record.get("init_ms") is not None


def live_summary(records: list[dict]) -> dict:
    """Cold starts and client-side latency of the successful activations of one replay."""
    ok = [r for r in records if r.get("status") == "success"]
    cold = sum(1 for r in ok if is_cold(r))
    latencies = [float(r["latency_ms"]) for r in ok if r.get("latency_ms") is not None]
    return {
        "invocations": len(records),
        "succeeded": len(ok),
        "cold_starts": cold,
        "cold_fraction": round(cold / len(ok), 4) if ok else None,
        "latency_ms": stats.percentiles(latencies, (50, 99)),
    }


def memory_time(samples: Sequence[tuple[float, float]], start_s: float, end_s: float) -> dict:
    """{"mib_s", "avg_mib"} of a node from (t s, bytes) samples over [start_s, end_s]."""
    pts = sorted(p for p in samples if p[0] < end_s)
    if not pts or end_s <= start_s:
        return {"mib_s": None, "avg_mib": None}
    integral = stats.step_integral([t for t, _ in pts], [b / MIB for _, b in pts], start_s, end_s)
    covered = end_s - max(start_s, pts[0][0])
    return {
        "mib_s": round(integral, 3),
        "avg_mib": round(integral / covered, 3) if covered > 0 else None,
    }


def relative(sim: float | None, live: float | None) -> float | None:
    if sim is None or live in (None, 0):
        return None
    return round((sim - live) / live, 4)


def gain(baseline: float | None, ours: float | None) -> float | None:
    """How many times fewer cold starts `ours` has than `baseline` (None without both)."""
    if baseline is None or ours is None:
        return None
    if ours == 0:
        return float("inf") if baseline > 0 else None
    return round(baseline / ours, 3)


def compare(live: dict[str, dict], sim: dict[str, dict]) -> dict:
    """`live` and `sim`: {policy: {"cold_starts", ...}} (a side may lack a policy that failed).
    The simulator against the cluster per policy, warm-home against round robin on each side,
    and the targets."""
    per_policy = {}
    for policy in POLICIES:
        lc = (live.get(policy) or {}).get("cold_starts")
        sc = (sim.get(policy) or {}).get("cold_starts")
        per_policy[policy] = {"live": lc, "sim": sc, "difference": relative(sc, lc)}
    gains = {
        side: gain(
            (data.get("round-robin") or {}).get("cold_starts"),
            (data.get("warm-home") or {}).get("cold_starts"),
        )
        for side, data in (("live", live), ("sim", sim))
    }
    targets = []
    for policy, row in per_policy.items():
        if row["difference"] is not None:
            targets.append(
                {
                    "target": f"{policy}: simulated cold starts within {TARGET_SIM_DIFFERENCE:.0%} of the cluster's",
                    "value": row["difference"],
                    "met": abs(row["difference"]) <= TARGET_SIM_DIFFERENCE,
                }
            )
    for side, g in gains.items():
        if g is not None:
            targets.append(
                {
                    "target": f"{side}: warm-home >= {TARGET_WARM_HOME_GAIN:g}x fewer cold starts than round-robin",
                    "value": g,
                    "met": g >= TARGET_WARM_HOME_GAIN,
                }
            )
    return {"sim_vs_live": per_policy, "warm_home_vs_round_robin": gains, "targets": targets}
