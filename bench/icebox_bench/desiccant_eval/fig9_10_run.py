"""Fig. 9–10's protocol: one fresh iceboxd per (scale, mode), replaying the same trace.

* **Mapping** (Desiccant §5.3): each benchmark function is paired with the trace function whose
  average duration is closest (mapping.py, `duration`); the benchmark functions' durations are
  measured first on the recipe's own daemon (or read from --function-durations). The mapping is
  computed once, over the trace window the largest scale needs, and used by every run.
* **Runs**: for every scale, vanilla, eager and desiccant back to back (machine-load drift then
  hits all modes of a scale alike). Each run starts its own iceboxd with the same flags but
  `--reclaim-mode`, inside a cpuacct cgroup of its own (cpu.py), deploys the functions with the
  per-instance memory limit, and replays open loop: a warm-up (excluded from the figures; at
  `warmup_scale`, by default the run's own scale), then `duration` seconds at the scale. The
  run's directory under runs/ is a complete run directory (`icebox-bench report` reads it),
  plus cpu.jsonl, metrics.prom (the daemon's /metrics at the end) and iceboxd.log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import schedule as schedule_mod
from ..client import IceboxClient, IceboxError
from ..loop import LoopError, run_loop
from ..manifest import FunctionSpec
from ..openloop import OpenLoop
from ..recorder import JsonlWriter, RunDir, read_jsonl
from ..report.load import load_run
from ..report.metrics import compute
from ..session import RunSession
from ..traces.model import Trace
from . import fig9_10
from .actions import delete_quietly, deploy_mode
from .cpu import CpuSampler, metered_daemon, save_metrics, window_cpu


@dataclass
class Plan:
    specs: list[FunctionSpec]
    trace: Trace
    trace_name: str
    mapping: dict[str, str]
    origin_s: float
    warmup_s: float
    warmup_scale: float | None  # None: each run warms up at its own scale
    duration_s: float
    memory_mb: int
    size: str
    daemon_args: list[str]
    drain_timeout_s: float
    sample_period_s: float = 1.0

    def used(self) -> list[FunctionSpec]:
        names = set(self.mapping.values())
        return [s for s in self.specs if s.name in names]

    def timeline(self, scale: float) -> schedule_mod.Timeline:
        return schedule_mod.Timeline(
            origin_s=self.origin_s,
            scale=scale,
            warmup_s=self.warmup_s,
            warmup_scale=self.warmup_scale,
            duration_s=self.duration_s,
        )

    def schedule(self, scale: float) -> schedule_mod.Schedule:
        return schedule_mod.build(self.trace.invocations, self.mapping, self.timeline(scale))


def trace_span_s(warmup_s: float, warmup_scale: float, duration_s: float, scales: list[float]) -> float:
    """Trace seconds the largest scale consumes: the warm-up's, then the measured part's."""
    return warmup_s * warmup_scale + duration_s * max(scales)


def run_label(mode: str, scale: float) -> str:
    return f"{mode}-x{fig9_10.scale_key(scale)}"


async def profile_durations(
    client: IceboxClient, specs: list[FunctionSpec], runs: int, size: str, *, invocations: JsonlWriter, log=print
) -> dict[str, float]:
    """Each function's mean warm duration (ms) over `runs` invocations after a cold one, as
    `icebox-bench profile` measures it; functions that fail are left out."""
    durations: dict[str, float] = {}
    for spec in specs:
        action = f"desiccant-fig9-10.profile.{spec.name}"
        try:
            await deploy_mode(client, spec, action, None)
            records = await run_loop(
                client,
                action,
                spec.input(size),
                runs + 1,
                invocations=invocations,
                timeout_ms=spec.timeout_ms,
                strict=False,
                function=spec.name,
                tags={"phase": "profile"},
                log=log,
            )
        except (IceboxError, LoopError) as e:
            log(f"error: profiling {spec.name}: {e}")
            continue
        finally:
            await delete_quietly(client, [action], log)
        warm = [r["duration_ms"] for r in records[1:] if r.get("duration_ms") is not None]
        durations[spec.name] = round(sum(warm) / len(warm), 3) if warm else 0.0
        log(f"{spec.name}: {durations[spec.name]} ms average warm duration")
    return durations


async def run_one(plan: Plan, mode: str, scale: float, out: Path, *, command: str, log=print) -> Path:
    """One replay with its own daemon; returns its run directory."""
    label = run_label(mode, scale)
    run_dir = RunDir(out)
    sched = plan.schedule(scale)
    used = plan.used()
    daemon_args = [*plan.daemon_args, "--reclaim-mode", mode]
    log(
        f"[{label}] starting iceboxd {' '.join(daemon_args)}; {len(sched.items)} invocations "
        f"({len(sched.measured)} measured)"
    )
    async with metered_daemon(daemon_args, log_path=run_dir.file("iceboxd.log"), log=log) as daemon:
        async with IceboxClient(daemon.apihost, daemon.auth) as client:
            for spec in used:
                await deploy_mode(client, spec, spec.name, None, plan.memory_mb)
            config = {
                "command": command,
                "kind": "recipe-run",
                "recipe": "desiccant-fig9-10",
                "label": label,
                "mode": mode,
                "scale": scale,
                "daemon_args": daemon_args,
                "trace": {"name": plan.trace_name, "format": plan.trace.format, "sources": plan.trace.sources},
                "mapping": {"mode": "duration", "functions": plan.mapping},
                "timeline": plan.timeline(scale).__dict__,
                "input": plan.size,
                "memory_mb": plan.memory_mb,
                "functions": {s.name: {"language": s.language, "kind": s.kind} for s in used},
                "scheduled": len(sched.items),
                "dropped": sched.dropped,
            }
            async with RunSession(client, run_dir, config, sample_period_s=plan.sample_period_s, log=log) as session:
                cpu = CpuSampler(client, daemon, run_dir.jsonl("cpu.jsonl"))
                cpu.start()
                try:
                    driver = OpenLoop(
                        client,
                        sched,
                        session.invocations,
                        params={s.name: s.input(plan.size) for s in used},
                        action_timeouts_ms={s.name: s.timeout_ms for s in used if s.timeout_ms},
                        drain_timeout_s=plan.drain_timeout_s,
                        log=log,
                    )
                    result = await driver.run()
                    session.result.update(result.to_json())
                    session.result["cpu_method"] = cpu.method
                finally:
                    await cpu.stop()
                    await save_metrics(client, run_dir.file("metrics.prom"))
    return run_dir.path


def analyse_run(path: Path) -> dict:
    """The summary entry of one finished run directory (fig9_10.run_entry)."""
    run = load_run(path)
    metrics = compute(run).to_json()
    cpu = window_cpu(read_jsonl(path / "cpu.jsonl"), metrics["start_ms"], metrics["end_ms"])
    events = fig9_10.window_events(run.events, metrics["start_ms"], metrics["end_ms"])
    return fig9_10.run_entry(metrics, cpu, events)
