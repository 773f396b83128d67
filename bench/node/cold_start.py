"""Benchmark 3: cold start per runtime vs the bare interpreter start, in the same run.

Run alone: python3 bench/node/cold_start.py [--out FILE]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from nodebench import cli
from nodebench.actions import Example, Unavailable, annotation, deploy, java_hello, nodejs_hello, python_hello
from nodebench.client import Client
from nodebench.daemon import Daemon
from nodebench.report import NOT_MEASURED, Row, Section, Table, ms, ratio

TITLE = "Cold start"
RUNS = 20
SETTLE_S = 0.3
# With prewarmed runtimes the replacement stem cell (a JVM for Java) must be ready again.
PREWARM_SETTLE_S = 1.5
CONFIGS = [
    # (label, daemon flags, settle time)
    ("default (prewarmed runtimes)", [], PREWARM_SETTLE_S),
    ("--prewarm none", ["--prewarm", "none"], SETTLE_S),
]

WHAT = f"""
Cold start = wall time, seen by the client, of a blocking invoke (`?blocking=true`, full
activation record) that had to start a new instance: sandbox (crun, cgroup), runtime start
until its socket accepts, `/init` with the code, and the first `/run`. Each run is forced cold
by updating the action first (`PUT …?overwrite=true` bumps its version, and instances of an
older version are never reused); the benchmark then waits {SETTLE_S * 1000:.0f} ms so the old
instance is gone, and checks that the record says `icebox.start = cold`. **Baseline:** the bare
interpreter start, timed from exec to exit by the benchmark: `/usr/bin/python3 -c pass` (the
interpreter the Python runtime uses), `node -e 0`, `java -version`. Both are measured {RUNS}
times, interleaved (one bare start, then one cold start, per round), after one untimed round
that warms the page cache. Target: p50 cold ≤ 1.5 × p50 bare + 20 ms.

Two daemons are measured: the default one, which keeps one prewarmed runtime per kind (a
cold start takes that stem cell and only pays `/init`; the replacement starts in the
background, so the benchmark waits {PREWARM_SETTLE_S:.1f} s between cold starts), and one with
`--prewarm none`, where every cold start creates the sandbox and starts the runtime. The
target is judged on the default; the other shows what a sandbox start costs. Whether a cold
start was served by a stem cell is read from its instance id (stem cells are named after the
language, other instances after the action).
"""

BARE = {
    "python": ["/usr/bin/python3", "-c", "pass"],
    "nodejs": ["node", "-e", "0"],
    "java": ["java", "-version"],
}
EXAMPLES = {"python": python_hello, "nodejs": nodejs_hello, "java": java_hello}


@dataclass
class Samples:
    bare: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    wait_ms: list[float] = field(default_factory=list)
    init_ms: list[float] = field(default_factory=list)
    duration_ms: list[float] = field(default_factory=list)
    from_stem_cell: int = 0
    unavailable: str = ""


def bare_start(argv: list[str]) -> float:
    exe = shutil.which(argv[0])
    if exe is None:
        raise Unavailable(f"{argv[0]} is not installed")
    t0 = time.perf_counter()
    done = subprocess.run([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}")
    return elapsed


def cold_invoke(client: Client, name: str, example: Example, settle_s: float) -> tuple[float, dict]:
    """Update the action (so no instance may serve it), let the old instance go, invoke."""
    deploy(client, name, example)
    time.sleep(settle_s)
    t0 = time.perf_counter()
    record = client.call("POST", f"/api/v1/namespaces/_/actions/{name}?blocking=true", {}).json()
    elapsed = time.perf_counter() - t0
    if not record.get("response", {}).get("success"):
        raise RuntimeError(f"{name}: the activation failed: {record.get('response')}")
    if annotation(record, "icebox.start") != "cold":
        raise RuntimeError(f"{name}: expected a cold start, the record says {annotation(record, 'icebox.start')!r}")
    return elapsed, record


def measure(flags: list[str], label: str, settle_s: float, examples: dict[str, Example],
            section: Section) -> dict[str, Samples]:
    samples = {lang: Samples() for lang in BARE}
    for lang in BARE:
        if lang not in examples:
            samples[lang].unavailable = "example not available"
    with Daemon(flags, "tcp", f"iceboxd (TCP, {label})") as d, d.client() as client:
        time.sleep(settle_s)
        for lang, ex in examples.items():
            bare_start(BARE[lang])
            try:
                cold_invoke(client, f"cold-{lang}", ex, settle_s)
            except Exception as e:  # noqa: BLE001 - one runtime failing must not hide the others
                samples[lang].unavailable = f"the first cold start failed: {e}"
        for _ in range(RUNS):
            for lang, s in samples.items():
                s.bare.append(bare_start(BARE[lang]))
                if lang not in examples or s.unavailable:
                    continue
                elapsed, record = cold_invoke(client, f"cold-{lang}", examples[lang], settle_s)
                s.cold.append(elapsed)
                s.wait_ms.append(annotation(record, "waitTime") or 0)
                s.init_ms.append(annotation(record, "initTime") or 0)
                s.duration_ms.append(record.get("duration", 0))
                if not str(annotation(record, "icebox.instance") or "").startswith("cold-"):
                    s.from_stem_cell += 1
        section.notes.append(d.isolation_note())
    section.notes.append(d.stop_note())
    return samples


def run() -> Section:
    section = Section(TITLE, WHAT)
    examples: dict[str, Example] = {}
    missing: dict[str, str] = {}
    for lang, make in EXAMPLES.items():
        try:
            examples[lang] = make()
        except Unavailable as e:
            missing[lang] = str(e)

    detail = []
    for index, (label, flags, settle_s) in enumerate(CONFIGS):
        judged = index == 0
        samples = measure(flags, label, settle_s, examples, section)
        for lang, s in samples.items():
            bare = statistics.median(s.bare) * 1000 if s.bare else float("nan")
            target = 1.5 * bare + 20
            what = f"{lang} cold start p50, {label}"
            if not s.cold:
                section.rows.append(Row(what, NOT_MEASURED, f"{ms(bare)} bare start (`{' '.join(BARE[lang])}`)",
                                        "", f"≤ 1.5 × bare + 20 ms = {ms(target)}" if judged else "(information)"))
                section.notes.append(f"{lang} ({label}): not measured: {missing.get(lang) or s.unavailable}")
                continue
            cold = statistics.median(s.cold) * 1000
            section.rows.append(Row(
                what, ms(cold), f"{ms(bare)} bare start (`{' '.join(BARE[lang])}`)",
                ratio(cold, bare),
                f"≤ 1.5 × bare + 20 ms = {ms(target)}" if judged else "(information: no prewarmed runtime)",
                (cold <= target) if judged else None,
                summary=f"{ms(cold)} (bare start {ms(bare)})" if judged else "",
            ))
            before_init = statistics.median(w - i for w, i in zip(s.wait_ms, s.init_ms))
            detail.append([lang, label, str(len(s.cold)), f"{s.from_stem_cell}/{len(s.cold)}", ms(cold),
                           ms(max(s.cold) * 1000), ms(statistics.median(s.wait_ms)),
                           ms(statistics.median(s.init_ms)), ms(before_init), ms(statistics.median(s.duration_ms)),
                           ms(bare), ms(max(s.bare) * 1000)])
    section.tables.append(Table(
        "Medians of the activation annotations (ms, as the daemon reports them)",
        ["Runtime", "daemon", "runs", "from a stem cell", "cold p50 (client)", "cold max", "waitTime p50",
         "initTime p50", "waitTime − initTime p50", "duration p50", "bare p50", "bare max"],
        detail,
    ))
    section.notes.append("waitTime: request arrival to the start of the run on the instance (sandbox creation, "
                         "runtime start and /init included); initTime: the /init call alone; waitTime − initTime: "
                         "sandbox creation and runtime start until its socket accepts (plus request handling); "
                         "duration: end − start of the activation. The annotations are whole milliseconds.")
    return section


if __name__ == "__main__":
    sys.exit(cli.main_single(TITLE, WHAT, run))
