"""The `cluster` recipe's pure parts (cluster_eval/analysis.py, the policy list, the
simulator's command line and the live nodes' flags) on the real trace samples and small
hand-written inputs."""

from __future__ import annotations

import asyncio
import csv
import json
import math

import pytest
from icebox_bench.cluster_eval import analysis
from icebox_bench.cluster_eval.nodes import ClusterNode, node_args
from icebox_bench.cluster_eval.replay import RoundRobin
from icebox_bench.isolates_eval import sim_run, sim_validate
from icebox_bench.recipes import get
from icebox_bench.recipes.cluster import policy_list
from icebox_bench.recipes.sim_validate import trace_window


def test_the_recipe_is_registered_with_a_config_naming_every_policy():
    recipe = get("cluster")
    config = recipe.load_config()
    assert policy_list(config["defaults"]["policies"]) == list(analysis.POLICIES)
    assert config["defaults"]["nodes"] == 3 and config["defaults"]["etcd_members"] == 3
    # The simulator gets the keep-alive as a TTL: the nodes must run with the same one.
    args = config["defaults"]["node_args"]
    assert args[args.index("--keep-alive") + 1] == config["defaults"]["keep_alive"]
    for owned in ("--cluster", "--node-id", "--advertise", "--placement", "--pool-memory", "--listen", "--auth"):
        assert owned not in args, f"{owned} is the recipe's to set"


def test_policy_lists_refuse_unknown_names():
    assert policy_list("hash, round-robin") == ["hash", "round-robin"]
    with pytest.raises(ValueError, match="nearest"):
        policy_list("warm-home,nearest")
    with pytest.raises(ValueError):
        policy_list(" , ")


def test_the_slice_and_its_events_carry_the_names_the_daemon_hashes(traces_dir, tmp_path):
    start, trace = trace_window(traces_dir / "azure2019-sample100", 10, "random", 0)
    assert start == 865
    kept = sim_validate.by_first_appearance(
        trace.invocations, sim_validate.choose_functions(trace.invocations, 600, 0, 40)
    )
    actions = sim_validate.assign_actions(kept, ["filehash", "memalloc"])
    warm = {"filehash": 12.0, "memalloc": 30.0}
    events = sim_validate.events(trace.invocations, actions, start * 60.0, 2.0, warm)
    assert 0 < len(events) <= 600
    named = analysis.sim_events(events, "guest")
    assert [e["function"] for e in named] == [f"guest/{e['function']}" for e in events]
    assert [e["time_ms"] for e in named] == [e["time_ms"] for e in events]
    path = sim_validate.write_events_csv(tmp_path / "sim-events.csv", named)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(events) and all(r["function"].startswith("guest/sv") for r in rows)
    # The profiles keyed the same way keep their order, so --mapping round-robin still pairs
    # the k-th function met with the k-th profile.
    profile = {"version": 1, "functions": {b: {"warm_ms": w} for b, w in warm.items()}}
    per_action = sim_validate.sim_profiles(profile, actions)
    first = next(iter(per_action["functions"]))
    renamed = analysis.sim_profiles(per_action, "guest", {first: 512})
    assert list(renamed["functions"]) == [f"guest/{a}" for a in per_action["functions"]]
    # The declared limit goes with each action; without one, the daemon's default.
    limits = [p["limit_mb"] for p in renamed["functions"].values()]
    assert limits[0] == 512 and set(limits[1:]) == {analysis.DEFAULT_LIMIT_MB}
    assert sorted(renamed["functions"]) == [f"guest/{a}" for a in sorted(per_action["functions"])]


def test_a_plain_load_balancer_spreads_evenly():
    assert analysis.entry_nodes(7, 3) == [0, 1, 2, 0, 1, 2, 0]
    with pytest.raises(ValueError):
        analysis.entry_nodes(3, 0)
    assert analysis.node_ids(3) == ["n1", "n2", "n3"]


def test_cold_means_init_ran_and_latency_counts_successes_only():
    records = [
        {"status": "success", "init_ms": 150, "latency_ms": 400.0},
        {"status": "success", "init_ms": None, "latency_ms": 10.0},
        {"status": "success", "latency_ms": 20.0},
        {"status": "success", "init_ms": 0, "latency_ms": 300.0},
        {"status": "connection_error", "init_ms": 99, "latency_ms": 5.0},
    ]
    s = analysis.live_summary(records)
    assert (s["invocations"], s["succeeded"], s["cold_starts"]) == (5, 4, 2)
    assert s["cold_fraction"] == 0.5
    assert s["latency_ms"]["p50"] is not None and s["latency_ms"]["p99"] <= 400.0
    assert analysis.live_summary([])["cold_fraction"] is None


def test_memory_time_holds_each_sample_until_the_next():
    mib = analysis.MIB
    # 100 MiB from 0 to 10 s, 200 MiB from 10 to 20 s.
    m = analysis.memory_time([(10.0, 200 * mib), (0.0, 100 * mib), (25.0, 999 * mib)], 0.0, 20.0)
    assert m == {"mib_s": 3000.0, "avg_mib": 150.0}
    # Only the covered part of the horizon is averaged.
    assert analysis.memory_time([(5.0, 100 * mib)], 0.0, 10.0) == {"mib_s": 500.0, "avg_mib": 100.0}
    assert analysis.memory_time([], 0.0, 10.0) == {"mib_s": None, "avg_mib": None}


def test_the_comparison_and_its_targets():
    live = {"warm-home": {"cold_starts": 40}, "hash": {"cold_starts": 50}, "round-robin": {"cold_starts": 100}}
    sim = {"warm-home": {"cold_starts": 42}, "hash": {"cold_starts": 60}, "round-robin": {"cold_starts": 95}}
    c = analysis.compare(live, sim)
    assert c["sim_vs_live"]["warm-home"] == {"live": 40, "sim": 42, "difference": 0.05}
    assert c["sim_vs_live"]["hash"]["difference"] == 0.2
    assert c["warm_home_vs_round_robin"] == {"live": 2.5, "sim": round(95 / 42, 3)}
    met = {t["target"].split(":")[0]: t["met"] for t in c["targets"]}
    assert met == {"warm-home": True, "hash": False, "round-robin": True, "live": True, "sim": True}
    # A policy that failed on one side has no difference and no target.
    partial = analysis.compare({"warm-home": {"cold_starts": 10}}, {})
    assert partial["sim_vs_live"]["warm-home"]["difference"] is None
    assert partial["targets"] == [] and partial["warm_home_vs_round_robin"] == {"live": None, "sim": None}
    assert analysis.gain(5, 0) == math.inf and analysis.gain(0, 0) is None


def test_the_simulator_gets_the_cluster_and_policy(tmp_path):
    argv = sim_run.sim_argv(
        tmp_path / "icebox-sim",
        tmp_path / "e.csv",
        tmp_path / "p.json",
        tmp_path / "out",
        node_memory="384MiB",
        keepalive_s=300.0,
        sharing="process",
        concurrency=1,
        nodes=3,
        placement="warm-home",
    )
    flags = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert flags["--nodes"] == "3" and flags["--placement"] == "warm-home"
    assert flags["--node-memory"] == "384MiB" and flags["--keepalive"] == "ttl:300s"
    assert "--placement" not in sim_run.sim_argv(
        tmp_path / "s",
        tmp_path / "e",
        tmp_path / "p",
        tmp_path / "o",
        node_memory="1GiB",
        keepalive_s=1,
        sharing="process",
        concurrency=1,
    )


def test_nodes_share_one_key_and_advertise_where_they_listen(tmp_path, monkeypatch):
    binary = tmp_path / "iceboxd"
    binary.write_text("")
    monkeypatch.setenv("ICEBOX_BIN_DIR", str(tmp_path))
    args = node_args(["--keep-alive", "300s"], "hash", "384MiB")
    a = ClusterNode("n1", "etcd://127.0.0.1:1,127.0.0.1:2", "u:k", args, log_path=tmp_path / "a.log")
    b = ClusterNode("n2", "etcd://127.0.0.1:1,127.0.0.1:2", "u:k", args, log_path=tmp_path / "b.log")
    try:
        argv = a.argv("127.0.0.1:9001")
        flags = dict(zip(argv[1::2], argv[2::2], strict=False))
        assert flags["--cluster"] == "etcd://127.0.0.1:1,127.0.0.1:2"
        assert flags["--node-id"] == "n1"
        assert flags["--advertise"] == "http://127.0.0.1:9001"
        assert flags["--listen"] == "127.0.0.1:9001"
        assert flags["--placement"] == "hash" and flags["--pool-memory"] == "384MiB"
        assert flags["--auth"] == "u:k" == b.auth
        assert a.state_dir != b.state_dir
    finally:
        a.stop()
        b.stop()


def test_the_simulator_places_the_recipe_s_events_on_its_named_nodes(tmp_path):
    binary = sim_run.sim_binary()
    if not binary.is_file():
        pytest.skip(f"{binary} is not built")
    # Two actions called in turn every second: warm-home and hash keep one instance each,
    # round robin (the arrival counter steps by 2 between an action's calls, co-prime with 3)
    # starts one on each node.
    rows = [{"time_ms": k * 1000.0, "function": f"guest/sv00{k % 2}.f", "duration_ms": 10.0} for k in range(30)]
    events = sim_validate.write_events_csv(tmp_path / "e.csv", rows)
    profile = {
        "version": 1,
        "source": "test",
        "functions": {
            f"guest/sv00{k}.f": {
                "cold_start_ms": 200.0,
                "warm_ms": 10.0,
                "sharing": {"process": {"base_mb": 50.0, "increment_mb": 0.0}},
            }
            for k in range(2)
        },
    }
    profiles = tmp_path / "p.json"
    profiles.write_text(json.dumps(profile))
    cold = {}
    for policy in analysis.POLICIES:
        out = tmp_path / policy
        argv = sim_run.sim_argv(
            binary,
            events,
            profiles,
            out,
            node_memory="1GiB",
            keepalive_s=300.0,
            sharing="process",
            concurrency=1,
            nodes=3,
            placement=policy,
        )
        sim_run.run_sim(argv, tmp_path / f"{policy}.log")
        metrics = sim_run.read_summary(out)["runs"][0]["metrics"]
        assert [n["node"] for n in metrics["per_node"]] == ["n1", "n2", "n3"]
        assert sum(n["cold_starts"] for n in metrics["per_node"]) == metrics["cold_starts"]
        cold[policy] = metrics["cold_starts"]
    assert cold == {"warm-home": 2, "hash": 2, "round-robin": 6}


def test_the_front_door_sends_each_invocation_to_the_next_node():
    class Node:
        def __init__(self, name):
            self.name, self.got = name, []

        async def invoke(self, action, params, **kw):
            self.got.append(action)
            return self.name

        async def health(self):
            return {"status": "ok", "node": self.name}

    nodes = [Node("n1"), Node("n2"), Node("n3")]
    front = RoundRobin(nodes)

    async def go():
        return [await front.invoke(f"a{k}", {}, blocking=True) for k in range(7)]

    assert asyncio.run(go()) == ["n1", "n2", "n3", "n1", "n2", "n3", "n1"]
    assert front.sent == [3, 2, 2]
    assert [n.got for n in nodes] == [["a0", "a3", "a6"], ["a1", "a4"], ["a2", "a5"]]
    assert asyncio.run(front.health())["node"] == "n1"


def test_the_report_renders_live_and_simulated_rows(tmp_path):
    live = {
        p: {
            "cold_starts": c,
            "cold_fraction": c / 104,
            "latency_ms": {"p50": 60.4, "p99": 305.5},
            "per_node": [
                {"node": f"n{k}", "received": 35, "invocations": 35, "cold_starts": c // 3, "mib_s": 12852.7}
                for k in (1, 2, 3)
            ],
        }
        for p, c in (("warm-home", 42), ("hash", 44))
    }
    sim = {
        "warm-home": {
            "cold_starts": 43,
            "per_node": [{"node": "n1", "invocations": 104, "cold_starts": 43, "memory_gib_s": 12.5}],
        }
    }
    summary = {
        "trace": "azure2019-sample500",
        "window_min": 4,
        "window_start_min": 720,
        "speed": 4.0,
        "events": 104,
        "actions": 40,
        "nodes": 3,
        "etcd_members": 3,
        "pool_memory": "192MiB",
        "keep_alive_s": 300.0,
        "live": live,
        "sim": sim,
        "sim_commands": {"warm-home": "icebox-sim --nodes 3 --placement warm-home"},
        **analysis.compare(live, sim),
    }
    files = get("cluster").render(tmp_path, summary)
    text = files[0].read_text()
    assert "| warm-home | 42 | 0.404 | 60.4 | 305.5 | 43 | +2.4% |" in text
    assert "| round-robin | – | – | – | – | – | – |" in text
    assert "| hash | n3 | 35 | 35 | 14 | 12,853 |" in text
    assert "| warm-home | n1 | 104 | 43 | 12,800 |" in text
    assert "icebox-sim --nodes 3 --placement warm-home" in text
