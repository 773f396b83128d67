"""The headline run's pure parts (headline_eval/): the busiest hour, the scaling, the mapping
onto the three runtimes, the modes' flags, the summary maths and the goals' verdicts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from icebox_bench.headline_eval import host, metrics, modes, workload
from icebox_bench.isolates_eval import sim_validate
from icebox_bench.manifest import FunctionSpec
from icebox_bench.recipes.sim_validate import trace_window
from icebox_bench.traces.model import TraceInvocation
from icebox_bench.units import GIB, MIB, parse_bytes


def spec(name: str, language: str) -> FunctionSpec:
    kind = {"python": "python:3", "nodejs": "nodejs:20", "java": "java:17"}[language]
    return FunctionSpec(name=name, language=language, kind=kind, path=Path(f"/{name}"), memory_mb=256)


SPECS = [spec(f"p{i}", "python") for i in range(3)] + [spec(f"n{i}", "nodejs") for i in range(2)] + [spec("j0", "java")]


def test_the_busiest_hour_of_the_2019_sample(traces_dir):
    path = traces_dir / "azure2019-sample500" / "invocations.csv"
    totals = sim_validate.minute_totals_2019(path)
    # Every 60-minute window summed independently of busiest_start (a running sum).
    lo, hi = min(totals), max(totals)
    sums = {s: sum(totals.get(m, 0) for m in range(s, s + 60)) for s in range(lo, hi - 59 + 1)}
    best = max(sums.values())
    start, trace = trace_window(path.parent, 60, "random", 0)
    assert sums[start] == best and start == min(s for s, v in sums.items() if v == best)
    # The window loaded is exactly that hour's invocations.
    assert len(trace.invocations) == best
    assert all(start * 60 <= i.time_s < (start + 60) * 60 for i in trace.invocations)


def test_interleave_alternates_the_runtimes_and_keeps_every_function():
    order = [s.name for s in workload.interleave(SPECS)]
    assert order == ["p0", "n0", "j0", "p1", "n1", "p2"]


def test_check_functions_wants_every_runtime_and_enough_functions():
    workload.check_functions(SPECS, 6)
    with pytest.raises(ValueError, match="at least 7"):
        workload.check_functions(SPECS, 7)
    with pytest.raises(ValueError, match="java"):
        workload.check_functions([s for s in SPECS if s.language != "java"], 1)


def test_speed_and_scaled_times():
    assert workload.speed_for(3600, 150) == 24
    # A 10-minute keep-alive at speed 24 is 25 replay seconds.
    assert workload.scaled_ms(600, 24) == 25_000
    assert workload.scaled_ms(0.0001, 24) == 1
    with pytest.raises(ValueError):
        workload.speed_for(3600, 0)


def invocations(counts: dict[str, int]) -> list[TraceInvocation]:
    return [TraceInvocation(float(k), f) for f, n in counts.items() for k in range(n)]


def test_choose_keeps_functions_within_budget_cap_and_count():
    counts = {f"f{i}": n for i, n in enumerate([1, 2, 3, 50, 4, 5, 6, 7, 8, 9])}
    invs = invocations(counts)
    for seed in range(5):
        kept = workload.choose(invs, budget=20, seed=seed, max_functions=4, max_per_function=8)
        assert len(kept) <= 4 and len(set(kept)) == len(kept)
        assert sum(counts[f] for f in kept) <= 20
        assert all(counts[f] <= 8 for f in kept)
        assert kept == workload.choose(invs, budget=20, seed=seed, max_functions=4, max_per_function=8)
    # With room for everything under the cap, exactly the functions under the cap are kept.
    every = workload.choose(invs, budget=10_000, seed=0, max_functions=100, max_per_function=8)
    assert sorted(every) == sorted(f for f, n in counts.items() if n <= 8)


def test_plan_maps_round_robin_over_the_interleaved_runtimes():
    counts = {f"t{i}": 1 + i % 3 for i in range(12)}
    invs = [TraceInvocation(3600.0 + 10 * i + k, f"t{i}") for i in range(12) for k in range(counts[f"t{i}"])]
    w = workload.plan(invs, 60, SPECS, replay_s=150, max_rate=100, max_functions=8, max_per_function=3, seed=0)
    assert w.speed == 24 and w.origin_s == 3600
    assert len(w.kept) == 8
    # Actions follow first appearance; the k-th gets the k-th function of the interleaved order.
    order = ["p0", "n0", "j0", "p1", "n1", "p2"]
    firsts = [min(i.time_s for i in invs if i.function == t) for t in w.kept]
    assert firsts == sorted(firsts)
    for k, t in enumerate(w.kept):
        assert w.actions[t] == (f"hl{k:03d}.{order[k % 6]}", order[k % 6])
    by_name = {s.name: s for s in SPECS}
    assert w.runtime_counts(by_name) == {"python": 4, "nodejs": 3, "java": 1}
    assert sorted(i.function for i in w.invocations) == sorted(i.function for i in invs if i.function in w.kept)
    assert sum(w.invocation_counts().values()) == len(w.invocations)


HELP = """Options:
      --pool-memory <POOL_MEMORY>
          Memory budget ... see also --techniques in the docs
      --keep-alive-policy <KEEP_ALIVE_POLICY>
"""


def test_auto_runs_only_on_a_daemon_that_has_techniques():
    notes = []
    assert modes.mode_list("all", HELP, log=notes.append) == [m for m in modes.ALL if m != modes.AUTO]
    assert notes and "auto" in notes[0]
    with_flag = HELP + "      --techniques <TECHNIQUES>\n          Which techniques\n"
    assert modes.mode_list("auto,openwhisk", with_flag) == ["openwhisk", "auto"]
    assert modes.has_flag(with_flag, "--techniques") and not modes.has_flag(HELP, "--techniques")
    assert modes.has_flag(HELP, "--keep-alive-policy") and not modes.has_flag(HELP, "--keep-alive")
    with pytest.raises(ValueError, match="unknown mode"):
        modes.mode_list("openwhisk,nope", with_flag)


def flag(args: list[str], name: str) -> str | None:
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return values[-1] if values else None


def test_modes_flags():
    scaled = modes.Scaled(keep_alive_ms=25_000, hybrid_bin_ms=2_500, semiwarm_start_ms=2_500)
    common = ["--pool-memory", "2GiB", "--max-instances", "128"]
    got = {name: modes.mode(name, scaled, common) for name in modes.ALL}
    for m in got.values():
        assert m.args[:4] == common and flag(m.args, "--keep-alive") == "25000ms"
    ow = got["openwhisk"].args
    for name, value in {
        "--pool-charge": "limit",
        "--reclaim-mode": "vanilla",
        "--offload": "none",
        "--snapshots": "off",
        "--prewarm": "none",
        "--pause-grace": "25000ms",
    }.items():
        assert flag(ow, name) == value, name
    assert got["icebox-default"].args == [*common, "--keep-alive", "25000ms"]
    core = got["icebox-core"].args
    assert (flag(core, "--reclaim-mode"), flag(core, "--prewarm")) == ("vanilla", "none")
    assert flag(got["desiccant"].args, "--reclaim-mode") is None and flag(got["desiccant"].args, "--prewarm") == "none"
    assert flag(got["stemcells"].args, "--reclaim-mode") == "vanilla"
    assert flag(got["stemcells"].args, "--prewarm") != "none"
    assert flag(got["faasmem"].args, "--offload") == "faasmem" and got["faasmem"].offload_pool
    assert flag(got["hybrid"].args, "--keep-alive-policy") == "hybrid"
    assert flag(got["hybrid"].args, "--hybrid-bin") == "2500ms"
    assert got["snapshots"].annotations == {"java": [{"key": "icebox.snapshot", "value": True}]}
    assert flag(got["auto"].args, "--techniques") == "auto" and got["auto"].offload_pool
    assert [n for n, m in got.items() if m.offload_pool] == list(modes.OFFLOADING)


def row(action: str, state: str, uss_mib: float, **kw) -> dict:
    return {
        "id": f"{action}-{state}-{uss_mib}",
        "action": f"guest/{action}",
        "state": state,
        "uss": int(uss_mib * MIB),
        **kw,
    }


def test_summary_maths():
    acts = {"hl000.a", "hl001.b"}
    samples = [
        # 0-10 s: one idle and one frozen instance of the run's actions, a stem cell, a
        # starting instance, an instance of another action; 64 MiB pool RAM; zram 10 MiB.
        {
            "t_s": 0.0,
            "instances": [
                row("hl000.a", "idle", 100),
                row("hl001.b", "frozen", 50),
                row("", "prewarmed", 10),
                row("hl001.b", "creating", 5),
                row("other", "idle", 20),
            ],
            "pool": {"memory_bytes": 64 * MIB},
            "swaps": {"zram": 10 * MIB, "file": 0},
        },
        # 10-30 s: two warm and one busy, no pool RAM; 30 MiB in the swap file.
        {
            "t_s": 10.0,
            "instances": [
                row("hl000.a", "running", 100),
                row("hl000.a", "idle", 100),
                row("hl001.b", "frozen", 40, offload={"moved_bytes": 8 * MIB}),
            ],
            "swaps": {"zram": 0, "file": 30 * MIB},
        },
    ]
    records = (
        [{"status": "success", "start_kind": "cold", "latency_ms": float(v)} for v in (100, 200)]
        + [{"status": "success", "start_kind": "warm", "latency_ms": float(v)} for v in range(1, 9)]
        + [{"status": "rejected", "latency_ms": 1.0}]
    )
    got = metrics.summarize(samples, records, acts, 2 * GIB, horizon_s=30.0)
    # Held (idle or frozen): 2 throughout; per GiB of the 2 GiB budget: 1. Busy: 1 for 20 of 30 s.
    assert got["warm_instances_mean"] == pytest.approx(2, abs=1e-3)
    assert got["warm_instances_peak"] == 2
    assert got["instances_per_gib"] == pytest.approx(1, abs=1e-3)
    assert got["busy_instances_mean"] == pytest.approx(2 / 3, abs=1e-3)
    # Local: (100+50+10+5+20+64) = 249 MiB for 10 s, 240 MiB for 20 s.
    mean_local = (249 * 10 + 240 * 20) / 30
    assert got["local_memory_mib"] == pytest.approx(mean_local, abs=1e-3)
    assert got["local_memory_peak_mib"] == 249
    assert got["memory_time_gib_s"] == pytest.approx((249 * 10 + 240 * 20) / 1024, abs=1e-3)
    assert got["instances_per_local_gib"] == pytest.approx(2 / (mean_local / 1024), abs=1e-2)
    assert got["cold_starts"] == 2 and got["answered"] == 10 and got["cold_start_fraction"] == 0.2
    assert got["statuses"] == {"success": 10, "rejected": 1}
    ok = sorted([100.0, 200.0, *map(float, range(1, 9))])
    assert got["p50_ms"] == pytest.approx((ok[4] + ok[5]) / 2)
    assert got["p99_ms"] == pytest.approx(ok[8] + (ok[9] - ok[8]) * 0.91, abs=0.1)
    assert got["offloaded_mib"]["zram"] == {"mean_mib": pytest.approx(10 / 3, abs=1e-3), "peak_mib": 10}
    assert got["offloaded_mib"]["file"] == {"mean_mib": 20, "peak_mib": 30}
    assert got["offloaded_mib"]["pool_ram"]["peak_mib"] == 64
    assert got["moved_by_icebox_mib"] == 8


def mode_figures(ipg, cold, p99, local=None, p95=None) -> dict:
    return {"instances_per_gib": ipg, "cold_starts": cold, "p99_ms": p99, "local_memory_mib": local, "p95_ms": p95}


def verdict(goals: list[dict], prefix: str) -> dict:
    return next(g for g in goals if g["goal"].startswith(prefix))


def test_verdicts_are_ratios_of_the_same_run():
    runs = {
        "openwhisk": mode_figures(2.0, 90, 1000),
        "auto": mode_figures(9.0, 30, 900),
        "desiccant": mode_figures(5.0, 40, 800),
        "hybrid": mode_figures(9.5, 20, 800),
        "icebox-core": mode_figures(4, 50, 500, local=1000, p95=100),
        "icebox-default": mode_figures(4, 50, 500, local=900, p95=100),
        "faasmem": mode_figures(4, 50, 500, local=580, p95=104),
    }
    goals = metrics.verdicts(runs, techniques=("desiccant", "hybrid", "snapshots"))
    assert verdict(goals, "auto warm instances")["value"] == 4.5 and verdict(goals, "auto warm")["met"]
    assert verdict(goals, "openwhisk cold starts")["value"] == 3 and verdict(goals, "openwhisk cold")["met"]
    assert verdict(goals, "auto p99")["value"] == 0.9 and verdict(goals, "auto p99")["met"]
    assert verdict(goals, "auto beats desiccant")["met"] is True
    # Hybrid holds more per GiB and has fewer cold starts than auto: auto does not beat it.
    assert verdict(goals, "auto beats hybrid")["met"] is False
    assert verdict(goals, "auto beats snapshots")["met"] is None
    core = verdict(goals, "faasmem (disk tier) local memory cut vs icebox-core")
    assert core["value"] == pytest.approx(0.42) and core["met"] is True
    default = verdict(goals, "faasmem (disk tier) local memory cut vs icebox-default")
    assert default["value"] == pytest.approx(1 - 580 / 900, abs=1e-4) and default["met"] is False
    # p95 over +5 % misses even with the cut.
    runs["faasmem"]["p95_ms"] = 106
    assert verdict(metrics.verdicts(runs), "faasmem (disk tier) local memory cut vs icebox-core")["met"] is False
    # Without auto nothing about it is claimed.
    assert all(g["met"] is None for g in metrics.verdicts({"openwhisk": runs["openwhisk"]}))
    # icebox-default's ratios are reported beside the goals, marked as a reference.
    ref = [g for g in goals if g["goal"].startswith("(reference, not a goal)")]
    assert [g["value"] for g in ref] == [2.0, 1.8, 0.5]
    assert [g["met"] for g in ref] == [False, False, True]


SWAPS = """Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority
/dev/zram3                              partition\t65532\t\t1024\t\t32767
/tmp/icebox-bench-x/offload.swap        file\t\t2097148\t\t4096\t\t-2
/dev/zram0                              partition\t1000\t\t999\t\t100
"""


def test_host_reads():
    assert host.tiers(SWAPS, "/dev/zram3", "/tmp/icebox-bench-x/offload.swap") == {
        "zram": 1024 * 1024,
        "file": 4096 * 1024,
    }
    # Another zram device on the machine is not ours.
    assert host.tiers(SWAPS, None, None) == {"zram": 0, "file": 0}
    assert host.ours_left(SWAPS, {"/dev/zram3", "/nope"}) == ["/dev/zram3"]
    before = host.cpu_times("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 1 1 1\n")
    after = host.cpu_times("cpu  250 0 150 800 200 0 0 0 0 0\n")
    assert before == (200, 1000) and after == (400, 1400)
    assert host.busy_share(before, after) == 0.5


def test_parse_bytes():
    assert parse_bytes("2GiB") == 2 * GIB and parse_bytes("64MiB") == 64 * MIB and parse_bytes("4096") == 4096
    with pytest.raises(ValueError):
        parse_bytes("2GB")


def test_plot_states_cover_every_instance_state():
    states = ["prewarmed", "creating", "initializing", "running", "idle", "frozen"]
    assert {metrics.plot_state(s) for s in states} == set(metrics.PLOT_STATES)
    assert Counter(metrics.plot_state(s) for s in states)["starting"] == 2


def test_cpu_weight_of_the_daemons_cgroup(tmp_path):
    v1 = tmp_path / "cpu" / "icebox-0000abcd"
    v1.mkdir(parents=True)
    (v1 / "cpu.shares").write_text("1024\n")
    v2 = tmp_path / "icebox-0000abcd"
    v2.mkdir()
    (v2 / "cpu.weight").write_text("100\n")
    done = host.raise_cpu_weight("0000abcd", 16, root=tmp_path)
    assert sorted(done) == sorted([str(v1 / "cpu.shares"), str(v2 / "cpu.weight")])
    assert (v1 / "cpu.shares").read_text() == "16384" and (v2 / "cpu.weight").read_text() == "1600"
    # Capped at each version's maximum; another daemon's cgroup is untouched.
    host.raise_cpu_weight("0000abcd", 1000, root=tmp_path)
    assert (v1 / "cpu.shares").read_text() == "262144" and (v2 / "cpu.weight").read_text() == "10000"
    assert host.raise_cpu_weight("ffffffff", 16, root=tmp_path) == []


def test_quick_takes_its_defaults_and_the_command_line_still_wins():
    from icebox_bench.commands.run_cmd import recipe_parser
    from icebox_bench.recipes import get

    recipe = get("headline")
    config = recipe.load_config()
    d = config["defaults"]

    def settings(*argv):
        return recipe.settings(recipe_parser(recipe).parse_args(["--out", "x", *argv]), config)

    full = settings()
    assert (full["replay_s"], full["max_functions"]) == (d["replay_s"], d["max_functions"])
    quick = settings("--quick")
    assert {k: quick[k] for k in ("replay_s", "max_rate", "max_functions", "max_per_function", "tail_s")} == {
        k: d[f"quick_{k}"] for k in ("replay_s", "max_rate", "max_functions", "max_per_function", "tail_s")
    }
    both = settings("--quick", "--replay-s", "30")
    assert both["replay_s"] == 30 and both["max_functions"] == d["quick_max_functions"]
