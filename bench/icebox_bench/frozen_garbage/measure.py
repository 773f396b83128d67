"""The measurement protocol for one function: two instances running the same sequence.

Measuring live bytes needs a full collection (`/stats?gc=1`), and that collection frees the
very garbage being measured: done in the measured instance, every later exit would show an
eagerly collected heap (Desiccant's *eager* baseline, Fig. 2), not the vanilla one. So:

* the **real** instance (action `frozen-garbage.<f>`) runs the n invocations and is only
  measured from the outside (`/instances/{id}?fresh=true`, smaps read by the daemon): its
  runtime never runs a collection or any other code it would not run anyway;
* the **ideal** instance (action `frozen-garbage.<f>.ideal`, same code, same inputs) runs the
  same n invocations and, at every exit, is asked for `/stats?gc=1` (live bytes) and then
  measured again (that USS is the eager-GC curve, recorded as a bonus).

The live set at exit i is a property of the program state after i invocations, which is the
same in both instances because the functions are deterministic; a collection changes what is
freed, not what is reachable. What can differ is only what the runtime decides on its own
(JIT-compiled code objects in V8's heap, lazily loaded classes' metadata), which is small.

The start-up memory is the `memory` of the real instance's `runtime_ready` event: the runtime
and its proxy before /init, i.e. what every instance of the language needs. `init_done` is not
used: its memory already holds the function's objects created at init (which live_bytes counts
again) and the garbage of /init itself (the decoded code archive), which is frozen garbage,
not "useful memory" in the paper's sense. Both events are kept in details.json. The runtime's
own live heap, which the start-up memory contains, is subtracted from live_bytes
(baseline.py), so ideal_i = M_ready + max(0, live_i - L0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client import IceboxClient, IceboxError
from ..deploy import deploy
from ..events import EventFollower
from ..loop import LoopError, run_loop
from ..manifest import FunctionSpec
from ..recorder import JsonlWriter
from . import analysis


class MeasurementError(RuntimeError):
    pass


def action_names(function: str) -> tuple[str, str]:
    return f"frozen-garbage.{function}", f"frozen-garbage.{function}.ideal"


@dataclass
class Measurement:
    function: str
    language: str
    real: list[dict] = field(default_factory=list)
    ideal: list[dict] = field(default_factory=list)
    runtime_ready: dict = field(default_factory=dict)
    init_done: dict | None = None
    ideal_runtime_ready: dict | None = None
    baseline_live_bytes: int = 0
    instances: dict = field(default_factory=dict)

    def real_uss(self) -> list[int]:
        return [r["uss"] for r in self.real]

    def ideal_bytes(self, measure: str = "uss") -> list[int]:
        return analysis.ideal_series(
            self.runtime_ready[measure], [p["live_bytes"] for p in self.ideal], self.baseline_live_bytes
        )

    def summary_entry(self) -> dict:
        return analysis.function_summary(self.language, self.real_uss(), self.ideal_bytes("uss"))

    def details(self) -> dict:
        """Everything measured, for details.json (bytes unless the key says otherwise)."""
        return {
            "language": self.language,
            "instances": self.instances,
            "runtime_ready_memory": self.runtime_ready,
            "init_done_memory": self.init_done,
            "ideal_instance_runtime_ready_memory": self.ideal_runtime_ready,
            "baseline_live_bytes": self.baseline_live_bytes,
            "real": {m: [r[m] for r in self.real] for m in ("uss", "pss", "rss", "swap")},
            "real_latency_ms": [r["latency_ms"] for r in self.real],
            "live_bytes": [p["live_bytes"] for p in self.ideal],
            "heap_committed_bytes": [p["heap_committed_bytes"] for p in self.ideal],
            "ideal": {m: self.ideal_bytes(m) for m in ("uss", "pss", "rss")},
            "eager": {m: [p["eager_" + m] for p in self.ideal] for m in ("uss", "pss", "rss")},
            "ratios_pss": analysis.ratios([r["pss"] for r in self.real], self.ideal_bytes("pss")),
            "ratios_rss": analysis.ratios([r["rss"] for r in self.real], self.ideal_bytes("rss")),
        }


def startup_events(events: list[dict]) -> tuple[dict | None, dict | None]:
    """(runtime_ready, init_done) of one instance's event list.

    A prewarmed instance (a "stem cell" the daemon started ahead of demand) has two
    runtime_ready events: one when it was started, one when an action took it, just before
    /init. The last one before init_done is the instance's state right before its function
    arrived, which is the start-up memory wanted here."""
    init_done = next((e for e in events if e.get("kind") == "init_done"), None)
    limit = init_done["seq"] if init_done else float("inf")
    ready = [e for e in events if e.get("kind") == "runtime_ready" and e.get("seq", 0) < limit]
    return (ready[-1] if ready else None), init_done


async def _startup_memory(events: EventFollower, instance: str) -> tuple[dict | None, dict | None]:
    """The memory of the instance's runtime_ready and init_done events (None if missing)."""
    try:
        await events.wait_for(instance, "init_done", timeout_s=10.0)
    except TimeoutError:
        pass
    ready, init_done = startup_events(events.events_of(instance))
    return (ready or {}).get("memory"), (init_done or {}).get("memory")


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
    real_action, ideal_action = action_names(spec.name)
    params = spec.input(size)
    m = Measurement(spec.name, spec.language, baseline_live_bytes=baseline_live_bytes)
    try:
        # A fresh deploy is a new action version: no older instance can serve it.
        await deploy(client, spec, real_action)
        await deploy(client, spec, ideal_action)

        log(f"{spec.name}: real instance, {iterations} invocations (input {size})")
        m.real = await run_loop(
            client,
            real_action,
            params,
            iterations,
            invocations=invocations,
            exits=exits,
            timeout_ms=spec.timeout_ms,
            function=spec.name,
            tags={"phase": "real"},
            log=log,
        )
        m.instances["real"] = m.real[0]["instance"]
        ready, m.init_done = await _startup_memory(events, m.instances["real"])
        if not ready or not ready.get("uss"):
            raise MeasurementError(
                f"{spec.name}: no runtime_ready event with memory for instance {m.instances['real']}"
            )
        m.runtime_ready = ready

        async def collect_at_exit(i: int, fields: dict, record: dict) -> None:
            # Order matters: USS was read first (record), then the collection, then USS again.
            stats = await client.instance_stats(record["instance"], gc=True)
            if not isinstance(stats.get("live_bytes"), int):
                raise MeasurementError(f"{spec.name}: the runtime reported no live_bytes after ?gc=1: {stats}")
            after = (await client.instance(record["instance"], fresh=True)).get("memory") or {}
            point = {
                "iteration": i,
                "live_bytes": stats["live_bytes"],
                "heap_committed_bytes": stats.get("heap_committed_bytes"),
                **{f"eager_{k}": after.get(k, 0) for k in ("uss", "pss", "rss")},
            }
            m.ideal.append(point)
            exits.write({"function": spec.name, "phase": "ideal-gc", "instance": record["instance"], **point})

        log(f"{spec.name}: ideal instance, {iterations} invocations with a full collection after each")
        ideal_exits = await run_loop(
            client,
            ideal_action,
            params,
            iterations,
            invocations=invocations,
            exits=exits,
            timeout_ms=spec.timeout_ms,
            function=spec.name,
            tags={"phase": "ideal"},
            after_exit=collect_at_exit,
            log=log,
        )
        m.instances["ideal"] = ideal_exits[0]["instance"]
        m.ideal_runtime_ready, _ = await _startup_memory(events, m.instances["ideal"])
    except (IceboxError, LoopError) as e:
        raise MeasurementError(str(e)) from None
    finally:
        # Deleting the actions evicts both instances, so the next function runs alone.
        for action in (real_action, ideal_action):
            try:
                await client.delete_action(action)
            except IceboxError as e:
                log(f"warning: could not delete {action}: {e}")
    return m
