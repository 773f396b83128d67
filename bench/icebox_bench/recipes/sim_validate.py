"""Recipe `sim-validate`: the busiest minutes of a trace replayed on iceboxd and simulated by
icebox-sim with the profile measured here; cold starts and mean memory compared
(isolates_eval/sim_validate.py)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from .. import manifest, stats
from ..commands.replay_cmd import resolve_trace
from ..frozen_garbage.baseline import start_companion, stop_companion
from ..isolates_eval import sim_profile, sim_run, sim_validate
from ..isolates_eval.memory_run import MemoryPlan
from ..isolates_eval.options import int_list, mode_list
from ..isolates_eval.sim_profile_run import idle_curve, measure_function
from ..isolates_eval.sim_validate_run import ReplayPlan, replay
from ..recorder import write_json
from ..report.tables import fmt, markdown_table
from ..traces import Window, detect_format, find_files, open_trace
from ..units import parse_seconds
from . import register
from .base import Recipe, RecipeContext


def trace_window(trace_path: Path, minutes: int, expansion: str, seed: int):
    """(start minute, the trace loaded over the busiest `minutes`)."""
    invocations, _ = find_files(trace_path)
    if detect_format(invocations) == "azure2019":
        totals = sim_validate.minute_totals_2019(invocations)  # counts only: nothing expanded
    else:
        totals = sim_validate.minute_totals(open_trace(trace_path).invocations)
    start = sim_validate.busiest_start(totals, minutes)
    return start, open_trace(
        trace_path, window=Window(start * 60.0, (start + minutes) * 60.0), expansion=expansion, seed=seed
    )


async def measure_profile(ctx: RecipeContext, specs, sharing: str, idle_after: int, recipe: str) -> dict:
    """The simulator's profile of every benchmark function, measured on the recipe's daemon in
    one sharing mode (or read from the `profiles` setting's file)."""
    s = ctx.settings
    if s.get("profiles"):
        return json.loads(Path(s["profiles"]).read_text())
    plan = MemoryPlan(
        levels=int_list(s["profile_levels"]),
        measure=str(s["measure"]),
        memory_mb=int(s["memory_mb"]),
        hold_s=float(s["profile_hold"]),
        size=str(s["input"]),
    )
    functions = {}
    await start_companion(ctx.client, specs[0].language, specs[0].kind, None)
    try:
        for spec in specs:
            functions[spec.name], _ = await measure_function(
                ctx.client,
                spec,
                plan,
                [sharing],
                runs=int(s["profile_cold_runs"]),
                warm_n=5,
                idle_after=idle_after,
                log=ctx.log,
            )
    finally:
        await stop_companion(ctx.client, specs[0].language)
    return sim_profile.profile(f"{recipe} (measured before the replay)", functions)


@register
class SimValidate(Recipe):
    name = "sim-validate"
    description = (
        "busiest trace window replayed on iceboxd and simulated by icebox-sim: cold starts and memory compared"
    )
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--trace", default=None, help="trace (default azure2019-sample500)")
        parser.add_argument(
            "--functions", default=None, help="benchmark functions (default filehash,rest-login,memalloc,image)"
        )
        parser.add_argument("--minutes", type=int, default=None, help="length of the busiest window (default 10)")
        parser.add_argument("--speed", type=float, default=None, help="trace time compression (default 2)")
        parser.add_argument(
            "--max-rate", type=float, default=None, help="mean invocations per replay second kept (default 2)"
        )
        parser.add_argument("--sharing", default=None, help="sharing mode of every action (default process)")
        parser.add_argument(
            "--profiles", default=None, help="profile JSON from `profile --sim` (default: measured now)"
        )
        parser.add_argument("--seed", type=int, default=None)

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        sharing = mode_list(s["sharing"])[0]
        concurrency = 1 if sharing == "process" else int(s["concurrency"])
        speed, minutes, seed = float(s["speed"]), int(s["minutes"]), int(s["seed"])
        specs = manifest.select(str(s["functions"]), manifest.load_all(ctx.functions_dir))
        by_name = {x.name: x for x in specs}
        start, trace = trace_window(resolve_trace(str(s["trace"])), minutes, str(s["expansion"]), seed)
        budget = int(float(s["max_rate"]) * minutes * 60.0 / speed)
        kept = sim_validate.by_first_appearance(
            trace.invocations, sim_validate.choose_functions(trace.invocations, budget, seed, int(s["max_functions"]))
        )
        actions = sim_validate.assign_actions(kept, [x.name for x in specs])
        ctx.log(
            f"busiest {minutes} min from minute {start}: {len(trace.invocations)} invocations; kept "
            f"{len(kept)} trace functions under {budget} invocations"
        )
        # An idle instance holds the garbage of the invocations it ran: the profile's idle
        # memory is taken after as many as an action typically gets in the window.
        idle_after = sim_validate.median_invocations(trace.invocations, actions)
        ctx.log(f"{len(actions)} actions: idle memory after {idle_after} invocation(s), the median")
        profile = await measure_profile(ctx, specs, sharing, idle_after, "sim-validate")
        write_json(ctx.run_dir.file("profile.json"), profile)
        warm = {b: profile["functions"][b]["warm_ms"] for b in by_name}
        events = sim_validate.events(trace.invocations, actions, start * 60.0, speed, warm)
        events_csv = sim_validate.write_events_csv(ctx.run_dir.file("events.csv"), events)
        counts = dict(Counter(inv.function for inv in trace.invocations if inv.function in actions))
        curves = {}
        if sharing == "process" and int(s["idle_curve_max"]) > 0:
            await start_companion(ctx.client, specs[0].language, specs[0].kind, None)
            try:
                for spec in specs:
                    mine = [c for t_, c in counts.items() if actions[t_][1] == spec.name]
                    if mine:
                        n = min(int(s["idle_curve_max"]), max(mine))
                        curves[spec.name] = await idle_curve(
                            ctx.client, spec, n, size=str(s["input"]), measure=str(s["measure"]), log=ctx.log
                        )
            finally:
                await stop_companion(ctx.client, specs[0].language)
            ctx.run_dir.write_json("idle_curves.json", curves)
        sim_profiles = ctx.run_dir.file("sim-profiles.json")
        write_json(
            sim_profiles,
            sim_validate.sim_profiles(
                profile, actions, counts=counts if curves else None, idle_curves=curves, mode=sharing
            ),
        )
        keep_alive_s = parse_seconds(str(s["keep_alive"]))
        plan = ReplayPlan(
            invocations=trace.invocations,
            actions=actions,
            specs=by_name,
            origin_s=start * 60.0,
            speed=speed,
            sharing=sharing,
            concurrency=concurrency,
            tail_s=float(s["tail"]),
            size=str(s["input"]),
            measure=str(s["measure"]),
        )
        r = await replay(ctx.client, plan, ctx.session.invocations, log=ctx.log)
        avg = stats.step_mean(r["memory"], 0.0, r["horizon_ms"])
        replay_out = {
            "cold_starts": r["cold_starts"],
            "warm_starts": r["warm_starts"],
            "avg_memory_mb": round(avg, 3) if avg is not None else None,
            "statuses": r["statuses"],
            "lag_ms": r["lag_ms"],
            "samples": len(r["memory"]),
        }
        ctx.run_dir.write_json("replay_memory.json", r["memory"])
        sim = None
        binary = Path(s["sim_binary"]) if s.get("sim_binary") else sim_run.sim_binary()
        argv = sim_run.sim_argv(
            binary,
            events_csv,
            sim_profiles,
            ctx.run_dir.path / "sim",
            node_memory=str(s["node_memory"]),
            keepalive_s=keep_alive_s,
            sharing=sharing,
            concurrency=concurrency,
        )
        self._failed: dict[str, str] = {}
        if binary.is_file():
            try:
                wall = sim_run.run_sim(argv, ctx.run_dir.file("icebox-sim.log"))
                sim = sim_run.read_sim(ctx.run_dir.path / "sim", r["horizon_ms"])
                sim["wall_s"] = round(wall, 3)
            except (RuntimeError, OSError, ValueError) as e:
                self._failed["icebox-sim"] = str(e)
                ctx.log(f"error: icebox-sim: {e}")
        else:
            self._failed["icebox-sim"] = f"{binary} is not built"
            ctx.log(f"warning: {binary} is missing: only the replay side was measured")
        if self._failed:
            ctx.session.result["failed"] = self._failed
        compared = sim_validate.compare(replay_out, sim)
        summary = {
            "measure": str(s["measure"]),
            "profile_idle_after": idle_after,
            "trace": str(s["trace"]),
            "window_start_min": start,
            "window_min": minutes,
            "speed": speed,
            "sharing": sharing,
            "concurrency": concurrency,
            "keep_alive_s": keep_alive_s,
            "node_memory": str(s["node_memory"]),
            "events": len(events),
            "actions": len(actions),
            "replay": replay_out,
            "sim": {k: v for k, v in (sim or {}).items() if k != "summary"} or None,
            "sim_command": " ".join(argv),
            **compared,
        }
        for t in summary["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'}")
        return summary

    def render(self, out: Path, summary: dict) -> list[Path]:
        rep, sim, diff = summary["replay"], summary.get("sim") or {}, summary["difference"]
        rows = [
            [key, fmt(rep.get(key), 1), fmt(sim.get(key), 1), f"{diff[key]:+.1%}" if diff.get(key) is not None else "–"]
            for key in ("cold_starts", "avg_memory_mb")
        ]
        text = [
            "# sim-validate: iceboxd replay against icebox-sim",
            "",
            f"{summary['trace']}, the busiest {summary['window_min']} minutes (from minute "
            f"{summary['window_start_min']}) at speed {summary['speed']}: {summary['events']} events of "
            f"{summary['actions']} actions, {summary['sharing']} mode, keep-alive {summary['keep_alive_s']} s.",
            "",
            markdown_table(["metric", "iceboxd", "icebox-sim", "difference"], rows),
            "",
            markdown_table(
                ["target", "value", ""],
                [[t["target"], f"{t['value']:+.1%}", "met" if t["met"] else "missed"] for t in summary["targets"]],
            ),
            "",
            f"Simulator: `{summary['sim_command']}`",
            "",
        ]
        (out / "sim-validate.md").write_text("\n".join(text))
        return [out / "sim-validate.md"]
