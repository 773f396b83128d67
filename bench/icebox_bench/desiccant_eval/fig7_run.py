"""Fig. 7's protocol for one function: three instances, one per reclaim mode, each running the
same n invocations alone beside the language's companion (frozen_garbage/baseline.py).

1. **vanilla** (action `desiccant-fig7.<f>.vanilla`): n invocations, wait until frozen, read its
   USS. Only then `stats` gives the heap the runtime holds (`heap_committed_bytes`), and
   `stats?gc=1` the live heap after n runs, for the ideals: a collection that can no longer
   perturb anything measured. Its `runtime_ready` memory is the start-up USS.
2. **eager** (`.eager`): n invocations (the runtime collects after each), frozen, USS.
3. **desiccant** (`.desiccant`): n invocations, frozen, USS (a second vanilla reading, kept as a
   consistency check), then `POST /instances/{id}/reclaim` — explicit, so the result does not
   depend on when the policy would act — and the USS once it is frozen again.

Each action is deleted (evicting its instance) before the next starts, so every mode is
measured in the same surroundings: the function's own libraries (numpy, …) are private to the
measured instance in all three, the runtime's shared with the companion in all three. Every
exit of every mode is in exits.jsonl (`phase` = the mode), plus one `<mode>-frozen` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client import IceboxClient, IceboxError
from ..events import EventFollower
from ..frozen_garbage.analysis import ideal_series
from ..frozen_garbage.measure import startup_events
from ..loop import LoopError, run_loop
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import fig7
from .actions import ProtocolError, check_mode, delete_quietly, deploy_mode, memory_of, reclaim, wait_frozen


def action_name(function: str, mode: str) -> str:
    return f"desiccant-fig7.{function}.{mode}"


@dataclass
class Measurement:
    function: str
    language: str
    baseline_live_bytes: int = 0
    frozen: dict = field(default_factory=dict)  # mode -> {uss, pss, rss, swap} once frozen
    desiccant_before: dict = field(default_factory=dict)
    reclaim_report: dict = field(default_factory=dict)
    runtime_ready: dict = field(default_factory=dict)  # memory of the vanilla instance's runtime_ready
    init_done: dict | None = None
    live_bytes: int = 0
    stats: dict = field(default_factory=dict)
    stats_before_gc: dict = field(default_factory=dict)
    instances: dict = field(default_factory=dict)
    mean_latency_ms: dict = field(default_factory=dict)

    def ideal(self, measure: str = "uss") -> int:
        """Start-up memory plus the live heap beyond a bare runtime's (frozen_garbage/analysis.py):
        whatever else the n runs built up counts as waste. A lower bound: compiled code and
        class metadata the runs built are useful, but not in it."""
        return ideal_series(self.runtime_ready[measure], [self.live_bytes], self.baseline_live_bytes)[0]

    def ideal_heap_only(self, measure: str = "uss") -> int:
        """The paper's reading (§3.1, §5.2: "only useful memory contents, e.g. live objects"):
        the vanilla instance after n runs, frozen, less the heap it holds beyond its live
        objects. Code and metadata the runs built stay; garbage outside the managed heap (e.g.
        free malloc memory) counts as useful, so a reclaim that also trims malloc can go below
        it. Never below `ideal`: committed heap that was never resident is not subtracted."""
        committed = self.stats_before_gc.get("heap_committed_bytes")
        if not isinstance(committed, int):
            raise ValueError(f"the runtime reported no heap_committed_bytes: {self.stats_before_gc}")
        free_heap = max(0, committed - self.live_bytes)
        return max(self.ideal(measure), self.frozen["vanilla"][measure] - free_heap)

    def summary_entry(self) -> dict:
        return fig7.function_entry(
            self.language,
            vanilla=self.frozen["vanilla"]["uss"],
            eager=self.frozen["eager"]["uss"],
            desiccant=self.frozen["desiccant"]["uss"],
            ideal=self.ideal("uss"),
        )

    def details(self) -> dict:
        """Everything measured, for details.json (bytes unless the key says otherwise)."""
        return {
            "language": self.language,
            "instances": self.instances,
            "frozen_memory": self.frozen,
            "desiccant_before_reclaim": self.desiccant_before,
            "reclaim": self.reclaim_report,
            "runtime_ready_memory": self.runtime_ready,
            "init_done_memory": self.init_done,
            "live_bytes": self.live_bytes,
            "baseline_live_bytes": self.baseline_live_bytes,
            "ideal": {m: self.ideal(m) for m in ("uss", "pss", "rss")},
            "ideal_heap_only": {m: self.ideal_heap_only(m) for m in ("uss", "pss", "rss")},
            "stats_before_gc": self.stats_before_gc,
            "stats_after_gc": self.stats,
            "mean_latency_ms": self.mean_latency_ms,
        }


async def _startup_memory(events: EventFollower, instance: str) -> tuple[dict, dict | None]:
    try:
        await events.wait_for(instance, "init_done", timeout_s=10.0)
    except TimeoutError:
        pass
    ready, init_done = startup_events(events.events_of(instance))
    memory = (ready or {}).get("memory") or {}
    if not memory.get("uss"):
        raise ProtocolError(f"no runtime_ready event with memory for instance {instance}")
    return memory, (init_done or {}).get("memory")


async def _run_mode(
    client: IceboxClient,
    events: EventFollower,
    spec: FunctionSpec,
    mode: str,
    m: Measurement,
    *,
    iterations: int,
    params: dict,
    invocations: JsonlWriter,
    exits: JsonlWriter,
    log,
) -> None:
    action = action_name(spec.name, mode)
    try:
        await deploy_mode(client, spec, action, mode)
        log(f"{spec.name}: {mode} instance, {iterations} invocations")
        records = await run_loop(
            client,
            action,
            params,
            iterations,
            invocations=invocations,
            exits=exits,
            timeout_ms=spec.timeout_ms,
            function=spec.name,
            tags={"phase": mode},
            log=log,
        )
        instance = records[0]["instance"]
        m.instances[mode] = instance
        m.mean_latency_ms[mode] = sum(r["latency_ms"] for r in records) / len(records)
        view = await wait_frozen(client, instance)
        check_mode(view, mode)
        frozen = memory_of(view)
        exits.write({"function": spec.name, "phase": f"{mode}-frozen", "instance": instance, **frozen})
        if mode == "vanilla":
            m.runtime_ready, m.init_done = await _startup_memory(events, instance)
            m.stats_before_gc = await client.instance_stats(instance)
            m.stats = await client.instance_stats(instance, gc=True)
            if not isinstance(m.stats.get("live_bytes"), int):
                raise ProtocolError(f"the runtime reported no live_bytes after ?gc=1: {m.stats}")
            m.live_bytes = m.stats["live_bytes"]
        elif mode == "desiccant":
            m.desiccant_before = frozen
            # The runtime's default variant: Fig. 7 is Desiccant as deployed.
            m.reclaim_report = await reclaim(client, instance)
            after = await wait_frozen(client, instance)
            frozen = memory_of(after)
            exits.write(
                {
                    "function": spec.name,
                    "phase": "desiccant-reclaimed",
                    "instance": instance,
                    **frozen,
                    "reclaim": m.reclaim_report,
                }
            )
        m.frozen[mode] = frozen
    finally:
        await delete_quietly(client, [action], log)


async def measure_function(
    client: IceboxClient,
    events: EventFollower,
    spec: FunctionSpec,
    iterations: int,
    size: str,
    *,
    baseline_live_bytes: int,
    invocations: JsonlWriter,
    exits: JsonlWriter,
    log=print,
) -> Measurement:
    """Raises ProtocolError (with the failed step) when the function cannot be measured."""
    m = Measurement(spec.name, spec.language, baseline_live_bytes=baseline_live_bytes)
    params = spec.input(size)
    try:
        for mode in ("vanilla", "eager", "desiccant"):
            await _run_mode(
                client,
                events,
                spec,
                mode,
                m,
                iterations=iterations,
                params=params,
                invocations=invocations,
                exits=exits,
                log=log,
            )
    except (IceboxError, LoopError) as e:
        raise ProtocolError(str(e)) from None
    return m
