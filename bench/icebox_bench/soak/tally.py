"""Counting a soak: requests by outcome and action, latencies, kills, and the daemon's memory
and file descriptors over time. Pure (no I/O), so the numbers can be checked by tests."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..promtext import metric_sum
from ..stats import percentile
from .outcome import CATEGORIES, OK, Outcome

MAX_EXAMPLES = 3


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    ok_latencies_s: list[float] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)
    kind_category: dict[str, str] = field(default_factory=dict)
    categories: Counter = field(default_factory=Counter)
    by_action: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, action: str, outcome: Outcome, latency_s: float) -> None:
        self.latencies_s.append(latency_s)
        if outcome.category == OK:
            self.ok_latencies_s.append(latency_s)
        self.kinds[outcome.kind] += 1
        self.kind_category[outcome.kind] = outcome.category
        self.categories[outcome.category] += 1
        self.by_action[action][outcome.category] += 1
        seen = self.examples[outcome.kind]
        if outcome.message and outcome.message not in seen and len(seen) < MAX_EXAMPLES:
            seen.append(outcome.message)

    @property
    def requests(self) -> int:
        return len(self.latencies_s)

    def summary(self, load_seconds: float) -> dict:
        return {
            "requests": self.requests,
            "throughput_rps": round(self.requests / load_seconds, 1) if load_seconds > 0 else None,
            "by_category": {c: self.categories.get(c, 0) for c in CATEGORIES},
            "by_kind": [
                {"kind": k, "category": self.kind_category[k], "count": n, "examples": self.examples.get(k, [])}
                for k, n in sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
            "by_action": {a: {c: n for c, n in sorted(cs.items())} for a, cs in sorted(self.by_action.items())},
            "latency_ms": latency_summary(self.latencies_s),
            "ok_latency_ms": latency_summary(self.ok_latencies_s),
        }


def latency_summary(latencies_s: list[float]) -> dict:
    """p50/p90/p99/max/mean in milliseconds (None for no samples)."""
    xs = sorted(latencies_s)
    if not xs:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    ms = lambda v: round(v * 1000.0, 3)  # noqa: E731
    return {
        "n": len(xs),
        "p50": ms(percentile(xs, 50)),
        "p90": ms(percentile(xs, 90)),
        "p99": ms(percentile(xs, 99)),
        "max": ms(xs[-1]),
        "mean": ms(sum(xs) / len(xs)),
    }


@dataclass
class Gauge:
    """A value sampled now and then (the daemon's VmRSS, its open fds): first, last and peak."""

    before: int | None = None
    after: int | None = None
    peak: int | None = None
    samples: int = 0

    def observe(self, value: int) -> None:
        self.samples += 1
        self.peak = value if self.peak is None else max(self.peak, value)

    def as_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "peak": self.peak, "samples": self.samples}


@dataclass
class Kills:
    """SIGKILLs the killer sent, by the instance's state when it was listed."""

    by_state: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    instances: dict[str, str] = field(default_factory=dict)  # instance id -> state when first killed

    def record(self, instance: str, state: str) -> None:
        self.by_state[state] += 1
        self.instances.setdefault(instance, state)

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "by_state": dict(sorted(self.by_state.items())),
            "skipped": dict(sorted(self.skipped.items())),
        }


def daemon_counters(before: list, after: list) -> dict:
    """What the daemon's own counters (/metrics, parsed) say happened between two scrapes:
    invocations by start kind, evictions by reason, 429 rejections."""

    def delta(name: str, **labels: str) -> int:
        return int(metric_sum(after, name, **labels) - metric_sum(before, name, **labels))

    def by(name: str, label: str) -> dict:
        values = sorted({lbl[label] for n, lbl, _ in after if n == name and label in lbl})
        return {v: d for v in values if (d := delta(name, **{label: v}))}

    return {
        "invocations_by_start": by("icebox_invocations_total", "start"),
        "evictions_by_reason": by("icebox_evictions_total", "reason"),
        "rejected": delta("icebox_rejected_total"),
    }
