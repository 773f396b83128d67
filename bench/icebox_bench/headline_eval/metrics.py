"""The headline run's numbers per mode, pure: from the memory samples and the invocation
records of one mode's replay.

Definitions (docs/headline.md says the same):
- *warm instances held* at a sample: the instances of the replayed actions kept warm between
  requests: state idle or frozen (offloaded and semi-warm instances are idle or frozen too), so
  a request to one is a warm start. Busy instances (`running`: demand, not what the keep-alive
  pool holds; under a slow node they pile up in every mode alike) are counted apart
  (`busy_instances_mean`); stem cells (`prewarmed`, bound to no action) and instances still
  starting are not counted.
- *local memory* at a sample: what stays in this node's RAM for instances: the USS of every
  instance the daemon holds (stem cells and busy ones included) plus the RAM the offload pool
  takes (zram's mem_used_total and zswap's pool in front of the swap file:
  /icebox/v1/memory's pool.memory_bytes). The swap file's blocks on disk are not counted.
- Means are over the replay's horizon (first send to the end of the tail), each sample held
  until the next (stats.step_integral); peaks are the largest sample.
- *instances per GiB*: mean warm instances held per GiB of the node's instance budget
  (--pool-memory, the same in every mode); `instances_per_local_gib` divides by the mean local
  memory instead.
- *cold-start fraction*: cold starts / invocations answered with an activation record.
- latency: the client's end-to-end time of successful invocations.
- *memory·time*: ∫ local memory dt over the horizon, GiB·s.
"""

from __future__ import annotations

from ..stats import percentiles, step_integral
from ..units import GIB, MIB

WARM_STATES = ("idle", "frozen")
# The states of the memory plot's stack, bottom to top (creating/initializing are "starting").
PLOT_STATES = ("running", "starting", "idle", "frozen", "prewarmed")


def plot_state(state: str | None) -> str:
    return "starting" if state in ("creating", "initializing") else (state or "starting")


def held(sample: dict, actions: set[str]) -> int:
    return sum(
        1
        for row in sample.get("instances") or []
        if row.get("state") in WARM_STATES and (row.get("action") or "").rsplit("/", 1)[-1] in actions
    )


def busy(sample: dict, actions: set[str]) -> int:
    return sum(
        1
        for row in sample.get("instances") or []
        if row.get("state") == "running" and (row.get("action") or "").rsplit("/", 1)[-1] in actions
    )


def pool_ram(sample: dict) -> int:
    return int((sample.get("pool") or {}).get("memory_bytes") or 0)


def local_bytes(sample: dict) -> int:
    return sum(int(row.get("uss") or 0) for row in sample.get("instances") or []) + pool_ram(sample)


def by_state(sample: dict) -> dict[str, int]:
    """USS per plot state, plus the pool's RAM as `pool RAM`."""
    out = dict.fromkeys(PLOT_STATES, 0)
    for row in sample.get("instances") or []:
        out[plot_state(row.get("state"))] = out.get(plot_state(row.get("state")), 0) + int(row.get("uss") or 0)
    out["pool RAM"] = pool_ram(sample)
    return out


def _series(samples: list[dict], f) -> tuple[list[float], list[float]]:
    pts = sorted((s["t_s"], f(s)) for s in samples if s.get("t_s") is not None)
    return [t for t, _ in pts], [v for _, v in pts]


def time_mean(samples: list[dict], f, horizon_s: float) -> float | None:
    times, values = _series(samples, f)
    inside = [(t, v) for t, v in zip(times, values, strict=True) if t < horizon_s]
    if not inside or horizon_s <= 0:
        return None
    start = max(0.0, inside[0][0])
    if horizon_s <= start:
        return None
    return step_integral([t for t, _ in inside], [v for _, v in inside], start, horizon_s) / (horizon_s - start)


def _peak(samples: list[dict], f) -> float | None:
    values = [f(s) for s in samples]
    return max(values) if values else None


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def summarize(samples: list[dict], records: list[dict], actions: set[str], budget_bytes: int, horizon_s: float) -> dict:
    """The mode's figures (see the module doc)."""
    mean_held = time_mean(samples, lambda s: held(s, actions), horizon_s)
    mean_local = time_mean(samples, local_bytes, horizon_s)
    answered = [r for r in records if r.get("start_kind") in ("cold", "warm")]
    cold = sum(1 for r in answered if r["start_kind"] == "cold")
    ok = [float(r["latency_ms"]) for r in records if r.get("status") == "success" and r.get("latency_ms") is not None]
    lat = percentiles(ok, (50, 95, 99))
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.get("status", "?")] = statuses.get(r.get("status", "?"), 0) + 1
    tiers = {}
    for tier in ("zram", "file"):
        tiers[tier] = {
            "mean_mib": _r(
                (time_mean(samples, lambda s, t=tier: (s.get("swaps") or {}).get(t, 0), horizon_s) or 0) / MIB
            ),
            "peak_mib": _r((_peak(samples, lambda s, t=tier: (s.get("swaps") or {}).get(t, 0)) or 0) / MIB),
        }
    tiers["pool_ram"] = {
        "mean_mib": _r((time_mean(samples, pool_ram, horizon_s) or 0) / MIB),
        "peak_mib": _r((_peak(samples, pool_ram) or 0) / MIB),
    }
    moved = {}
    for s in samples:
        for row in s.get("instances") or []:
            off = row.get("offload") or {}
            if row.get("id") and off.get("moved_bytes") is not None:
                moved[row["id"]] = max(moved.get(row["id"], 0), int(off["moved_bytes"]))
    budget_gib = budget_bytes / GIB
    return {
        "invocations": len(records),
        "answered": len(answered),
        "statuses": statuses,
        "cold_starts": cold,
        "cold_start_fraction": _r(cold / len(answered), 4) if answered else None,
        "warm_instances_mean": _r(mean_held),
        "warm_instances_peak": _peak(samples, lambda s: held(s, actions)),
        "busy_instances_mean": _r(time_mean(samples, lambda s: busy(s, actions), horizon_s)),
        "instances_per_gib": _r(mean_held / budget_gib) if mean_held is not None and budget_gib else None,
        "instances_per_local_gib": _r(mean_held / (mean_local / GIB)) if mean_held and mean_local else None,
        "local_memory_mib": _r(mean_local / MIB) if mean_local is not None else None,
        "local_memory_peak_mib": _r((_peak(samples, local_bytes) or 0) / MIB),
        "memory_time_gib_s": _r(
            step_integral(*_series([s for s in samples if s["t_s"] < horizon_s], local_bytes), 0.0, horizon_s) / GIB
        )
        if samples
        else None,
        "p50_ms": _r(lat["p50"], 1),
        "p95_ms": _r(lat["p95"], 1),
        "p99_ms": _r(lat["p99"], 1),
        "offloaded_mib": tiers,
        "moved_by_icebox_mib": _r(sum(moved.values()) / MIB),
        "samples": len(samples),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b in (None, 0) else round(a / b, 3)


def goal(name: str, value: float | None, target: str, met: bool | None) -> dict:
    return {"goal": name, "value": value, "target": target, "met": met}


def headline_goals(modes: dict[str, dict], auto: str, baseline: str) -> list[dict]:
    """Warm instances per GiB >= 4x, cold starts >= 3x fewer, p99 no worse: `auto` vs `baseline`."""
    a, w = modes.get(auto), modes.get(baseline)
    out = []
    ipg = _ratio((a or {}).get("instances_per_gib"), (w or {}).get("instances_per_gib"))
    out.append(goal(f"{auto} warm instances per GiB / {baseline}'s", ipg, ">= 4", None if ipg is None else ipg >= 4))
    # "3x fewer cold starts": the baseline's cold starts over auto's (same events, so counts).
    cold_a, cold_w = (a or {}).get("cold_starts"), (w or {}).get("cold_starts")
    fewer = None if cold_a is None or cold_w is None else (round(cold_w / cold_a, 3) if cold_a else float("inf"))
    out.append(goal(f"{baseline} cold starts / {auto}'s", fewer, ">= 3", None if fewer is None else fewer >= 3))
    p99 = _ratio((a or {}).get("p99_ms"), (w or {}).get("p99_ms"))
    out.append(goal(f"{auto} p99 / {baseline}'s", p99, "<= 1", None if p99 is None else p99 <= 1))
    return out


def verdicts(
    modes: dict[str, dict],
    *,
    auto: str = "auto",
    baseline: str = "openwhisk",
    techniques: tuple[str, ...] = (),
    offload: str = "faasmem",
    offload_none: str = "icebox-core",
    offload_default: str = "icebox-default",
    reference: str | None = "icebox-default",
) -> list[dict]:
    """The issue's goals as measured ratios; `met` is None when a mode they need did not run."""
    out = headline_goals(modes, auto, baseline)
    if reference and reference in modes:
        # Not a goal: the same three ratios for today's defaults, so a run without auto still
        # says what icebox gives against openwhisk.
        for g in headline_goals(modes, reference, baseline):
            out.append({**g, "goal": f"(reference, not a goal) {g['goal']}"})
    a = modes.get(auto)
    for t in techniques:
        m = modes.get(t)
        if a is None or m is None:
            out.append(goal(f"{auto} beats {t} alone (more warm per GiB, fewer cold starts)", None, "both", None))
            continue
        more = _ratio(a.get("instances_per_gib"), m.get("instances_per_gib"))
        fewer_t = _ratio(a.get("cold_starts"), m.get("cold_starts"))
        met = more is not None and fewer_t is not None and more >= 1 and fewer_t <= 1
        out.append(
            goal(
                f"{auto} beats {t} alone: warm per GiB ratio {more}, cold starts ratio {fewer_t}",
                more,
                "warm/GiB ratio >= 1 and cold ratio <= 1",
                met,
            )
        )
    f = modes.get(offload)
    for ref in (offload_none, offload_default):
        n = modes.get(ref)
        cut = None
        if f and n and f.get("local_memory_mib") is not None and n.get("local_memory_mib"):
            cut = round(1 - f["local_memory_mib"] / n["local_memory_mib"], 4)
        p95 = _ratio((f or {}).get("p95_ms"), (n or {}).get("p95_ms"))
        met = None if cut is None or p95 is None else (cut >= 0.40 and p95 <= 1.05)
        out.append(
            goal(
                f"{offload} (disk tier) local memory cut vs {ref} (p95 ratio {p95})",
                cut,
                ">= 0.40 at p95 ratio <= 1.05",
                met,
            )
        )
    return out
