"""Benchmark 4: freeze + thaw round trip, from the daemon's own histograms and end to end.

Run alone: python3 bench/node/freeze_thaw.py [--out FILE]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict

from nodebench import cli
from nodebench.actions import deploy, encode, invoke_path, nodejs_hello, python_hello
from nodebench.daemon import Daemon
from nodebench.report import Row, Section, Table, ms, ratio
from nodebench.stats import Histogram, Summary
from nodebench.timing import Target

TITLE = "Freeze + thaw round trip"
ITERATIONS = 100
GAP_S = 0.150
TARGET_MS = 2.0

WHAT = f"""
A daemon with the default 50 ms pause grace serves the Python and Node.js hello actions over a
UNIX socket. {ITERATIONS} rounds, each: for every runtime, sleep {GAP_S * 1000:.0f} ms (longer
than the grace, so the idle instance gets frozen), invoke (the daemon must thaw the instance),
then invoke again at once (no thaw). The daemon times every freeze (writing FROZEN to the
cgroup freezer and waiting until it reads FROZEN; cgroup v2: cgroup.freeze and cgroup.events;
no cgroups: SIGSTOP) and every thaw into the `icebox_freeze_seconds` and `icebox_thaw_seconds`
histograms of `/metrics`. **Round trip p50 = median freeze + median thaw**, each median
**interpolated linearly inside the histogram bucket** that holds it (as PromQL's
`histogram_quantile`; buckets double from 10 µs, so the interpolation error is at most one
bucket's width); the target is judged on it. Cross-checks: the exact durations the daemon puts
in the `frozen` / `thawed` lifecycle events (`/icebox/v1/events`, paired per instance into
freeze → thaw round trips), and the end-to-end cost seen by the client: a call that needed a
thaw minus the call right after it that did not.
"""

PARAMS = {"name": "bench"}


def read_events(d: Daemon, since: int) -> list[dict]:
    """Retained lifecycle events after `since` (the replay only: follow=false ends the stream)."""
    with d.client() as c:
        reply = c.call("GET", f"/icebox/v1/events?since={since}&follow=false")
    events = []
    for line in reply.body.decode().splitlines():
        if line.startswith("data:"):
            events.append(json.loads(line[5:].strip()))
    return events


def _micros(detail: str | None) -> float | None:
    """`"123 us"` → 123.0"""
    if detail and detail.endswith(" us"):
        try:
            return float(detail[:-3])
        except ValueError:
            return None
    return None


def paired_round_trips(
    events: list[dict],
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]:
    """Per action: freeze durations, thaw durations, and freeze + the next thaw of the same
    instance (seconds)."""
    freezes, thaws, trips = defaultdict(list), defaultdict(list), defaultdict(list)
    pending: dict[str, float] = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        took = _micros(e.get("detail"))
        if took is None:
            continue
        action = e["action"].rsplit("/", 1)[-1]
        if e["kind"] == "frozen":
            freezes[action].append(took / 1e6)
            pending[e["instance"]] = took / 1e6
        elif e["kind"] == "thawed":
            thaws[action].append(took / 1e6)
            if e["instance"] in pending:
                trips[action].append(pending.pop(e["instance"]) + took / 1e6)
    return freezes, thaws, trips


def run() -> Section:
    section = Section(TITLE, WHAT)
    examples = [python_hello(), nodejs_hello()]
    with Daemon([], "unix", "iceboxd (UNIX socket, default 50 ms pause grace)") as d:
        targets = {}
        for ex in examples:
            name = f"hello-{ex.lang}"
            with d.client() as c:
                deploy(c, name, ex)
            targets[name] = Target(name, d.client(), "POST", invoke_path(name), encode(PARAMS))
        thawed: dict[str, list[float]] = defaultdict(list)
        warm: dict[str, list[float]] = defaultdict(list)
        try:
            for t in targets.values():
                t.call()
                t.call()
            time.sleep(GAP_S)
            start_seq = max((e["seq"] for e in read_events(d, 0)), default=0)
            before = d.metrics()
            for _ in range(ITERATIONS):
                for name, t in targets.items():
                    time.sleep(GAP_S)
                    thawed[name].append(t.call())
                    warm[name].append(t.call())
            after = d.metrics()
            events = read_events(d, start_seq)
        finally:
            for t in targets.values():
                t.client.close()
        section.notes.append(d.isolation_note())
    section.notes.append(d.stop_note())

    freeze_h = Histogram.from_samples(after, "icebox_freeze_seconds").minus(
        Histogram.from_samples(before, "icebox_freeze_seconds")
    )
    thaw_h = Histogram.from_samples(after, "icebox_thaw_seconds").minus(
        Histogram.from_samples(before, "icebox_thaw_seconds")
    )
    if freeze_h.count == 0 or thaw_h.count == 0:
        raise RuntimeError(
            f"the daemon recorded {freeze_h.count:.0f} freezes and {thaw_h.count:.0f} thaws: "
            "nothing to measure (is the pause grace longer than the gap?)"
        )
    f50, t50 = freeze_h.quantile(0.5) * 1000, thaw_h.quantile(0.5) * 1000
    trip = f50 + t50
    section.rows.append(
        Row(
            "freeze + thaw p50 (histograms, interpolated)",
            ms(trip),
            f"freeze {ms(f50)} + thaw {ms(t50)}",
            "",
            f"≤ {ms(TARGET_MS)}",
            trip <= TARGET_MS,
        )
    )
    section.rows.append(
        Row(
            "freeze p90 / thaw p90 (histograms, interpolated)",
            f"{ms(freeze_h.quantile(0.9) * 1000)} / {ms(thaw_h.quantile(0.9) * 1000)}",
        )
    )
    section.rows.append(
        Row(
            "freeze mean / thaw mean (histogram sum ÷ count, exact)",
            f"{ms(freeze_h.mean() * 1000)} / {ms(thaw_h.mean() * 1000)}",
            f"{freeze_h.count:.0f} freezes, {thaw_h.count:.0f} thaws",
        )
    )

    freezes, thaws, trips = paired_round_trips(events)
    ev_rows = []
    for name in targets:
        if not trips.get(name):
            continue
        ev_rows.append(
            [
                name,
                str(len(trips[name])),
                ms(statistics.median(freezes[name]) * 1000),
                ms(statistics.median(thaws[name]) * 1000),
                ms(statistics.median(trips[name]) * 1000),
                ms(Summary.of_seconds(trips[name]).p90),
                ms(max(trips[name]) * 1000),
            ]
        )
    section.tables.append(
        Table(
            "Exact durations from the lifecycle events (the daemon's own timing, per runtime)",
            ["Action", "freeze → thaw pairs", "freeze p50", "thaw p50", "round trip p50", "round trip p90", "max"],
            ev_rows,
        )
    )

    e2e_rows = []
    for name in targets:
        with_thaw, without = Summary.of_seconds(thawed[name]), Summary.of_seconds(warm[name])
        paired = statistics.median(a - b for a, b in zip(thawed[name], warm[name], strict=False)) * 1000
        e2e_rows.append(
            [
                name,
                str(with_thaw.n),
                ms(with_thaw.p50),
                ms(without.p50),
                ms(with_thaw.p50 - without.p50),
                ms(paired),
                ratio(with_thaw.p50, without.p50),
            ]
        )
    section.tables.append(
        Table(
            "End to end, client side: a call that needed a thaw vs the call right after it",
            [
                "Action",
                "pairs",
                "p50 with thaw",
                "p50 without",
                "difference of p50s",
                "p50 of paired differences",
                "ratio",
            ],
            e2e_rows,
        )
    )
    section.notes.append(
        "The histograms and events time only the freezer writes inside the daemon. The end-to-end "
        "difference also contains what follows a thaw before the call completes (the thawed runtime "
        "being scheduled again after idling); this benchmark does not break that part down."
    )
    return section


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
