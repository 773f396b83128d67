"""Local memory per function over a run, from memory.jsonl.

An instance's local memory is its `offload.local_bytes` (what it holds in this machine's RAM:
offloaded pages are in the pool, not local). A function's local memory at a sample is the sum
over its live instances; over the run it is time-averaged: each sample is held until the next
(stats.step_integral), divided by the window's length, so a time with no instance counts as 0.

An instance row without `offload.local_bytes` (a daemon that does not offload, or an instance
not yet measured) counts its USS instead; such rows are counted (`fallback_rows`), and a run in
which no row has the field is an error: the daemon does not report offloading.
"""

from __future__ import annotations

from ..stats import step_integral


class OffloadFieldMissing(ValueError):
    """The daemon's answers lack a field the FaaSMem figures need."""


def action_name(action: str | None) -> str:
    """`guest/web_server` (the daemon's `namespace/name`) -> `web_server`."""
    return (action or "").rsplit("/", 1)[-1]


def offload_of(row: dict) -> dict:
    return row.get("offload") or {}


def local_bytes(row: dict) -> int | None:
    value = offload_of(row).get("local_bytes")
    return None if value is None else int(value)


class LocalSeries:
    """Per function: sample times (s) and summed local bytes; one entry per memory sample.

    `measure` "local" is `offload.local_bytes` (USS plus the pool's RAM for the swapped pages:
    this node's truth with a zram pool); "uss" leaves the pool's RAM out, which is local memory
    as FaaSMem measured it, with the pool in another machine (RDMA)."""

    def __init__(self, samples: list[dict], functions: list[str], measure: str = "local"):
        if measure not in ("local", "uss"):
            raise ValueError(f"unknown measure {measure!r}")
        self.functions = list(functions)
        self.times: list[float] = []
        self.bytes: dict[str, list[int]] = {f: [] for f in functions}
        self.rows = 0
        self.fallback_rows = 0
        wanted = set(functions)
        for sample in samples:
            if sample.get("t_ms") is None:
                continue
            self.times.append(sample["t_ms"] / 1000.0)
            sums = dict.fromkeys(functions, 0)
            for row in sample.get("instances") or []:
                name = action_name(row.get("action"))
                if name not in wanted:
                    continue
                self.rows += 1
                local = local_bytes(row) if measure == "local" else int(row.get("uss") or 0)
                if local is None:
                    self.fallback_rows += 1
                    local = int(row.get("uss") or 0)
                sums[name] += local
            for f in functions:
                self.bytes[f].append(sums[f])

    def check(self) -> None:
        if self.rows and self.fallback_rows == self.rows:
            raise OffloadFieldMissing(
                "no instance view of the run has offload.local_bytes: this iceboxd does not report memory "
                "offloading (GET /icebox/v1/instances items need `offload`; build the FaaSMem daemon)"
            )

    def mean(self, function: str, start_s: float, end_s: float) -> float | None:
        """Time-averaged local bytes of `function` over [start_s, end_s]."""
        if end_s <= start_s or not self.times:
            return None
        return step_integral(self.times, self.bytes[function], start_s, end_s) / (end_s - start_s)

    def total_mean(self, start_s: float, end_s: float) -> float | None:
        means = [self.mean(f, start_s, end_s) for f in self.functions]
        return None if any(m is None for m in means) else sum(means)

    def peak(self, function: str, start_s: float, end_s: float) -> int:
        return max(
            (b for t, b in zip(self.times, self.bytes[function], strict=True) if start_s <= t <= end_s), default=0
        )


def normalise(values: dict[str, float | None], baseline: dict[str, float | None]) -> dict[str, float | None]:
    """value / baseline per key; None where either is missing or the baseline is 0."""
    return {k: (round(v / baseline[k], 4) if v is not None and baseline.get(k) else None) for k, v in values.items()}


def pool_means(samples: list[dict], start_s: float, end_s: float) -> dict:
    """Time-averaged node figures of the swap pool (`/icebox/v1/memory`'s `pool`) and `local`:
    on zram the pool's own RAM (memory_bytes) is local memory too."""
    fields = ("stored_bytes", "memory_bytes")
    times, series = [], {f: [] for f in (*fields, "local")}
    kind = None
    for s in samples:
        if s.get("t_ms") is None:
            continue
        pool = s.get("pool") or {}
        kind = pool.get("kind", kind)
        times.append(s["t_ms"] / 1000.0)
        for f in fields:
            series[f].append(int(pool.get(f) or 0))
        series["local"].append(int(s.get("local") or 0))
    if not times or end_s <= start_s:
        return {"kind": kind}
    out = {"kind": kind}
    for f, values in series.items():
        out[f"{f}_mean"] = round(step_integral(times, values, start_s, end_s) / (end_s - start_s))
    return out
