"""Reading the daemon's /metrics (Prometheus / OpenMetrics text). Standard library only:
bench/node uses it too."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) for every sample line of a Prometheus / OpenMetrics text."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group("labels") or ""))
        samples.append((m.group("name"), labels, float(m.group("value"))))
    return samples


def metric_sum(samples, name: str, **labels: str) -> float:
    """Sum of every sample called `name` whose labels include `labels`."""
    return sum(v for n, found, v in samples if n == name and all(found.get(k) == x for k, x in labels.items()))
