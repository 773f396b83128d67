"""Recipe `cluster`: the busiest minutes of an Azure 2019 trace replayed on a live icebox
cluster (a private 3-member etcd and 3 iceboxd nodes on loopback), once per placement policy,
each invocation sent to the next node in turn as a plain load balancer would; then the same
events simulated by `icebox-sim --nodes 3` with the same placement code and the profiles
measured here first (cluster_eval/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import manifest
from ..cluster_eval import analysis
from ..cluster_eval.nodes import LiveCluster, node_args
from ..cluster_eval.replay import ClusterPlan, replay
from ..commands.replay_cmd import resolve_trace
from ..isolates_eval import sim_run, sim_validate
from ..isolates_eval.options import mode_list
from ..recorder import write_json
from ..report.tables import fmt, markdown_table
from ..units import parse_seconds
from . import register
from .base import Recipe, RecipeContext
from .sim_validate import measure_profile, trace_window


def policy_list(text: str) -> list[str]:
    policies = [p.strip() for p in str(text).split(",") if p.strip()]
    unknown = [p for p in policies if p not in analysis.POLICIES]
    if unknown or not policies:
        raise ValueError(f"unknown placement policy {unknown or text!r} (expected {', '.join(analysis.POLICIES)})")
    return policies


@register
class Cluster(Recipe):
    name = "cluster"
    description = (
        "a trace slice on 3 iceboxd nodes sharing a 3-member etcd, per placement policy, against icebox-sim --nodes 3"
    )
    config_file = Path(__file__).with_suffix(".toml")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--trace", default=None, help="trace (default azure2019-sample500)")
        parser.add_argument(
            "--functions", default=None, help="benchmark functions (default filehash,rest-login,memalloc,image)"
        )
        parser.add_argument("--minutes", type=int, default=None, help="length of the busiest window (default 10)")
        parser.add_argument("--speed", type=float, default=None, help="trace time compression (default 2)")
        parser.add_argument("--max-rate", type=float, default=None, help="mean invocations per replay second kept")
        parser.add_argument("--pool-memory", default=None, help="each node's keep-alive budget (default 192MiB)")
        parser.add_argument("--policies", default=None, help="placement policies (default warm-home,hash,round-robin)")
        parser.add_argument(
            "--profiles", default=None, help="profile JSON from `profile --sim` (default: measured now)"
        )
        parser.add_argument("--seed", type=int, default=None)

    async def run(self, ctx: RecipeContext) -> dict:
        s = ctx.settings
        policies = policy_list(s["policies"])
        sharing = mode_list(s["sharing"])[0]
        concurrency = 1 if sharing == "process" else int(s["concurrency"])
        speed, minutes, seed = float(s["speed"]), int(s["minutes"]), int(s["seed"])
        nodes = int(s["nodes"])
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
        idle_after = sim_validate.median_invocations(trace.invocations, actions)
        profile = await measure_profile(ctx, specs, sharing, idle_after, "cluster")
        write_json(ctx.run_dir.file("profile.json"), profile)
        warm = {b: profile["functions"][b]["warm_ms"] for b in by_name}
        events = sim_validate.events(trace.invocations, actions, start * 60.0, speed, warm)
        sim_validate.write_events_csv(ctx.run_dir.file("events.csv"), events)
        keep_alive_s = parse_seconds(str(s["keep_alive"]))
        plan = ClusterPlan(
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
        failed: dict[str, str] = {}
        live: dict[str, dict] = {}
        namespace = None
        for policy in policies:
            log_dir = ctx.run_dir.path / f"live-{policy}"
            log_dir.mkdir()
            args = node_args([str(a) for a in s["node_args"]], policy, str(s["pool_memory"]))
            ctx.log(f"{policy}: starting etcd ({s['etcd_members']} members) and {nodes} nodes (logs in {log_dir})")
            try:
                with LiveCluster(nodes, args, log_dir, etcd_members=int(s["etcd_members"])) as cluster:
                    r = await replay(cluster, plan, ctx.run_dir.jsonl(f"invocations-{policy}.jsonl"), log=ctx.log)
            except Exception as e:  # one policy failing must not lose the others' results
                failed[f"live {policy}"] = str(e)
                ctx.log(f"error: {policy}: {e}")
                continue
            namespace = r["namespace"]
            write_json(log_dir / "memory_samples.json", r.pop("memory_samples"))
            got = {**r["summary"], "per_node": r["per_node"], "statuses": r["statuses"], "lag_ms": r["lag_ms"]}
            live[policy] = got
            p50, p99 = got["latency_ms"]["p50"], got["latency_ms"]["p99"]
            ctx.log(
                f"{policy}: {got['cold_starts']} cold of {got['succeeded']} "
                f"(p50 {fmt(p50, 1)} ms, p99 {fmt(p99, 1)} ms)"
            )
        sim, commands = self._simulate(
            ctx,
            events,
            profile,
            actions,
            by_name,
            namespace,
            policies,
            keep_alive_s,
            sharing,
            concurrency,
            nodes,
            failed,
        )
        if failed:
            ctx.session.result["failed"] = failed
        compared = analysis.compare(live, sim)
        for t in compared["targets"]:
            ctx.log(f"target {t['target']}: {t['value']} {'met' if t['met'] else 'missed'}")
        return {
            "trace": str(s["trace"]),
            "window_start_min": start,
            "window_min": minutes,
            "speed": speed,
            "nodes": nodes,
            "etcd_members": int(s["etcd_members"]),
            "pool_memory": str(s["pool_memory"]),
            "sharing": sharing,
            "keep_alive_s": keep_alive_s,
            "events": len(events),
            "actions": len(actions),
            "namespace": namespace,
            "live": live,
            "sim": sim,
            "sim_commands": commands,
            "failed": failed,
            **compared,
        }

    def _simulate(
        self,
        ctx,
        events,
        profile,
        actions,
        specs,
        namespace,
        policies,
        keep_alive_s,
        sharing,
        concurrency,
        nodes,
        failed,
    ) -> tuple[dict, dict]:
        s = ctx.settings
        if namespace is None:
            failed["icebox-sim"] = "no live run finished: the namespace the daemon hashes is unknown"
            return {}, {}
        events_csv = sim_validate.write_events_csv(
            ctx.run_dir.file("sim-events.csv"), analysis.sim_events(events, namespace)
        )
        profiles = ctx.run_dir.file("sim-profiles.json")
        limits = {action: specs[bench].memory_mb for action, bench in actions.values()}
        write_json(profiles, analysis.sim_profiles(sim_validate.sim_profiles(profile, actions), namespace, limits))
        binary = Path(s["sim_binary"]) if s.get("sim_binary") else sim_run.sim_binary()
        if not binary.is_file():
            failed["icebox-sim"] = f"{binary} is not built"
            return {}, {}
        sim, commands = {}, {}
        for policy in policies:
            out = ctx.run_dir.path / f"sim-{policy}"
            argv = sim_run.sim_argv(
                binary,
                events_csv,
                profiles,
                out,
                node_memory=str(s["pool_memory"]),
                keepalive_s=keep_alive_s,
                sharing=sharing,
                concurrency=concurrency,
                nodes=nodes,
                placement=policy,
                # iceboxd's --pool-memory caps idle instances only: the simulator the same.
                node_budget="idle",
            )
            commands[policy] = " ".join(argv)
            try:
                sim_run.run_sim(argv, ctx.run_dir.file(f"icebox-sim-{policy}.log"))
                run = sim_run.read_summary(out)["runs"][0]["metrics"]
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                failed[f"icebox-sim {policy}"] = str(e)
                continue
            sim[policy] = {
                "cold_starts": run["cold_starts"],
                "cold_fraction": run["cold_start_fraction"],
                "latency_ms": {"p50": run["latency_ms_p50"], "p99": run["latency_ms_p99"]},
                "memory_gib_s": run["memory_gib_s"],
                "per_node": run.get("per_node", []),
            }
        return sim, commands

    def render(self, out: Path, summary: dict) -> list[Path]:
        live, sim = summary["live"], summary["sim"]
        rows = []
        for policy in analysis.POLICIES:
            lv, sv = live.get(policy) or {}, sim.get(policy) or {}
            diff = summary["sim_vs_live"][policy]["difference"]
            rows.append(
                [
                    policy,
                    fmt(lv.get("cold_starts"), 0),
                    fmt(lv.get("cold_fraction"), 3),
                    fmt((lv.get("latency_ms") or {}).get("p50"), 1),
                    fmt((lv.get("latency_ms") or {}).get("p99"), 1),
                    fmt(sv.get("cold_starts"), 0),
                    f"{diff:+.1%}" if diff is not None else "–",
                ]
            )
        node_rows = [
            [
                policy,
                n["node"],
                fmt(n.get("received")),
                fmt(n.get("invocations")),
                fmt(n.get("cold_starts")),
                fmt(n.get("mib_s"), 0),
            ]
            for policy in analysis.POLICIES
            for n in (live.get(policy) or {}).get("per_node", [])
        ]
        sim_node_rows = [
            [policy, n["node"], fmt(n["invocations"]), fmt(n["cold_starts"]), fmt(n["memory_gib_s"] * 1024.0, 0)]
            for policy in analysis.POLICIES
            for n in (sim.get(policy) or {}).get("per_node", [])
        ]
        text = [
            "# cluster: placement on a live 3-node icebox cluster against icebox-sim",
            "",
            f"{summary['trace']}, the busiest {summary['window_min']} minutes (from minute "
            f"{summary['window_start_min']}) at speed {summary['speed']}: {summary['events']} events of "
            f"{summary['actions']} actions on {summary['nodes']} nodes ({summary['etcd_members']}-member etcd), "
            f"{summary['pool_memory']} keep-alive budget per node, keep-alive {summary['keep_alive_s']} s.",
            "",
            markdown_table(
                ["policy", "live cold", "live cold fraction", "p50 ms", "p99 ms", "sim cold", "sim vs live"], rows
            ),
            "",
            "Live, per node (received: from the load balancer; invocations and cold starts: the node's /metrics):",
            "",
            markdown_table(["policy", "node", "received", "invocations", "cold", "MiB·s"], node_rows),
            "",
            "Simulated, per node:",
            "",
            markdown_table(["policy", "node", "invocations", "cold", "MiB·s"], sim_node_rows),
            "",
            markdown_table(
                ["target", "value", ""],
                [[t["target"], fmt(t["value"], 3), "met" if t["met"] else "missed"] for t in summary["targets"]],
            ),
            "",
            *(f"Simulator ({p}): `{c}`" for p, c in summary["sim_commands"].items()),
            "",
        ]
        (out / "cluster.md").write_text("\n".join(text))
        return [out / "cluster.md"]
