"""The FaaSMem figures from recorded samples: time-averaged local memory, normalisation, what
icebox offloaded (events, instance counters, Prometheus), overheads and the kernel's own swap."""

from __future__ import annotations

import pytest
from faasmem_samples import T0, histogram, instance_row
from icebox_bench.faasmem_eval import counters, local_memory, overheads
from icebox_bench.units import MIB


def _sample(t_s: float, rows: list[dict]) -> dict:
    return {"t_ms": T0 + t_s * 1000.0, "instances": rows}


def test_local_memory_is_summed_over_a_functions_instances_and_time_averaged_holding_each_sample():
    samples = [
        _sample(0, []),  # no instance yet: 0
        _sample(10, [instance_row("f", 30, ident="a"), instance_row("f", 10, ident="b"), instance_row("g", 99)]),
        _sample(20, [instance_row("f", 20, ident="a")]),
        _sample(40, []),
    ]
    series = local_memory.LocalSeries(samples, ["f", "g"])
    series.check()
    start, end = T0 / 1000.0, T0 / 1000.0 + 50
    # f: 0 for 10 s, 40 MiB for 10 s, 20 MiB for 20 s, 0 for 10 s -> 800 MiB*s / 50 s
    assert series.mean("f", start, end) == pytest.approx(16 * MIB)
    assert series.mean("g", start, end) == pytest.approx(99 * MIB * 10 / 50)
    assert series.total_mean(start, end) == pytest.approx(16 * MIB + 99 * MIB * 10 / 50)
    assert series.peak("f", start, end) == 40 * MIB
    # A window inside the run: only [15, 25) -> 5 s at 40, 5 s at 20
    assert series.mean("f", start + 15, start + 25) == pytest.approx(30 * MIB)


def test_a_row_without_local_bytes_counts_its_uss_and_a_run_without_any_is_an_error():
    row = instance_row("f", 10)
    bare = {k: v for k, v in row.items() if k != "offload"}
    series = local_memory.LocalSeries([_sample(0, [row, {**bare, "id": "x"}])], ["f"])
    assert series.fallback_rows == 1 and series.bytes["f"] == [10 * MIB + bare["uss"]]
    series.check()
    with pytest.raises(local_memory.OffloadFieldMissing, match="offload.local_bytes"):
        local_memory.LocalSeries([_sample(0, [bare])], ["f"]).check()


def test_normalisation_divides_by_the_baseline_and_leaves_holes_where_it_cannot():
    got = local_memory.normalise(
        {"none": 100.0, "tmo": 95.0, "faasmem": 40.0, "x": None},
        {"none": 100.0, "tmo": 100.0, "faasmem": 100.0, "x": 100.0},
    )
    assert got == {"none": 1.0, "tmo": 0.95, "faasmem": 0.4, "x": None}
    assert local_memory.normalise({"a": 5.0}, {"a": 0.0}) == {"a": None}
    assert local_memory.action_name("guest/web_server") == "web_server"


def test_event_details_give_step_size_and_time():
    assert counters.parse_offloaded("runtime 12.5 MiB in 4 ms") == {
        "step": "runtime",
        "bytes": int(12.5 * MIB),
        "ms": 4.0,
    }
    assert counters.parse_offloaded("init-cold 4096 bytes") == {"step": "init-cold", "bytes": 4096, "ms": None}
    assert counters.parse_size("refaulted 2 KiB") == 2048
    assert counters.parse_size("no size") is None


def test_offloads_and_refaults_per_function_inside_the_window():
    events = [
        {"time_ms": T0 - 1, "kind": "offloaded", "action": "guest/f", "detail": "runtime 9 MiB in 1 ms"},  # before
        {"time_ms": T0 + 1, "kind": "offloaded", "action": "guest/f", "detail": "runtime 2 MiB in 1 ms"},
        {"time_ms": T0 + 2, "kind": "offloaded", "action": "guest/f", "detail": "init 1 MiB in 2.5 ms"},
        {"time_ms": T0 + 3, "kind": "offloaded", "action": "guest/f", "detail": "garbled"},
        {"time_ms": T0 + 4, "kind": "refaulted", "action": "guest/f", "detail": "512 KiB"},
        {"time_ms": T0 + 5, "kind": "frozen", "action": "guest/g"},
    ]
    got = counters.event_totals(events, T0, T0 + 10)
    assert list(got) == ["f"]
    f = got["f"]
    assert f["offloaded_bytes"] == 3 * MIB and f["by_step"] == {"runtime": 2 * MIB, "init": MIB}
    assert f["offloads"] == 3 and f["unparsed"] == 1 and f["offload_ms"] == 3.5
    assert f["refaulted_bytes"] == 512 * 1024 and f["refaults"] == 1


def test_instance_counters_take_each_instances_largest_value():
    samples = [
        _sample(0, [instance_row("f", 5, offloaded_mib=1, ident="a")]),
        _sample(
            1,
            [
                instance_row("f", 5, offloaded_mib=3, refaulted_mib=1, ident="a"),
                instance_row("f", 5, offloaded_mib=2, ident="b"),
            ],
        ),
        _sample(2, [instance_row("f", 5, offloaded_mib=2, ident="a")]),  # a current value may drop
    ]
    got = counters.instance_totals(samples, T0, T0 + 5000)
    assert got == {"f": {"offloaded_bytes": 5 * MIB, "refaulted_bytes": MIB, "instances": 2}}


def _prom(t_s: float, offloaded: dict[str, float], refaulted: float | None = None) -> dict:
    metrics = [["icebox_offloaded_bytes_total", {"step": s}, v] for s, v in offloaded.items()]
    if refaulted is not None:
        metrics.append(["icebox_refaulted_bytes_total", {}, refaulted])
    return {"t_ms": T0 + t_s * 1000.0, "metrics": metrics}


def test_node_counters_rise_from_the_last_sample_before_the_window_to_the_last_inside_it():
    prom = [
        _prom(-2, {"runtime": 10.0}, 1.0),
        _prom(-1, {"runtime": 20.0}, 1.0),
        {"t_ms": T0 + 500.0, "metrics": None},  # /metrics did not answer
        _prom(5, {"runtime": 50.0, "init": 5.0}, 4.0),
        _prom(20, {"runtime": 900.0}, 9.0),
    ]
    got = counters.node_totals(prom, T0, T0 + 10_000)
    assert got == {"offloaded_bytes": 35.0, "offloaded_by_step": {"init": 5.0, "runtime": 30.0}, "refaulted_bytes": 3.0}
    assert counters.counter_increase(prom, T0, T0 + 10_000, "icebox_nothing") is None
    assert counters.node_totals([], T0, T0 + 1)["offloaded_bytes"] is None


def test_histogram_quantiles_interpolate_inside_the_bucket_like_prometheus():
    buckets = {0.001: 0.0, 0.005: 2.0, 0.01: 4.0, float("inf"): 4.0}
    assert overheads.histogram_quantile(0.5, buckets) == pytest.approx(0.005)
    assert overheads.histogram_quantile(0.75, buckets) == pytest.approx(0.0075)
    assert overheads.histogram_quantile(0.5, {0.01: 0.0, float("inf"): 0.0}) is None
    assert overheads.histogram_quantile(0.99, {0.01: 1.0, float("inf"): 3.0}) == 0.01  # in +Inf: highest bound


def test_histograms_count_only_the_observations_made_inside_the_window():
    before = {
        "t_ms": T0 - 100,
        "metrics": histogram("icebox_offload_barrier_seconds", "barrier", {"init_done": [0.02]}),
    }
    after = {
        "t_ms": T0 + 9000,
        "metrics": histogram(
            "icebox_offload_barrier_seconds", "barrier", {"init_done": [0.02, 0.002, 0.004], "runtime_ready": [0.002]}
        ),
    }
    got = overheads.histogram_window([before, after], T0, T0 + 10_000, "icebox_offload_barrier_seconds", "barrier")
    assert got["init_done"]["count"] == 2 and got["init_done"]["mean_ms"] == pytest.approx(3.0)
    assert got["runtime_ready"] == {
        "count": 1,
        "mean_ms": 2.0,
        "p50_ms": pytest.approx(3.0),
        "p95_ms": pytest.approx(4.8),
        "p99_ms": pytest.approx(4.96),
    }
    assert overheads.histogram_window([before], T0, T0 + 1, "icebox_offload_step_seconds", "step") is None


def test_the_kernels_swap_is_read_from_proc_and_reported_apart():
    swaps = overheads.parse_proc_swaps(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/zram1  partition\t4194300\t\t2048\t\t32767\n"
    )
    assert swaps == [
        {
            "device": "/dev/zram1",
            "type": "partition",
            "size_bytes": 4194300 * 1024,
            "used_bytes": 2048 * 1024,
            "priority": 32767,
        }
    ]
    assert overheads.parse_vmstat("pgfault 5\npswpin 7\npswpout 9\n") == {"pswpin": 7, "pswpout": 9}
    samples = [
        {"t_ms": T0, "swaps": [], "vmstat": {"pswpin": 7, "pswpout": 9}},
        {"t_ms": T0 + 1000, "swaps": swaps, "vmstat": {"pswpin": 8, "pswpout": 109}},
        {"t_ms": T0 + 2000, "swaps": [{**swaps[0], "used_bytes": 0}], "vmstat": {"pswpin": 9, "pswpout": 109}},
    ]
    got = overheads.kernel_swap(samples, T0, T0 + 5000)
    assert got == {
        "devices": ["/dev/zram1"],
        "used_peak_bytes": 2048 * 1024,
        "used_end_bytes": 0,
        "pswpout_bytes": 100 * 4096,
        "pswpin_bytes": 2 * 4096,
    }
    assert overheads.kernel_swap(samples, T0 - 20_000, T0 - 10_000) is None  # no sample yet


def test_memory_samples_keep_the_offload_view_and_the_pool_when_the_daemon_sends_them():
    from icebox_bench.sampler import sample_record

    view = {
        "id": "i",
        "action": "guest/f",
        "state": "frozen",
        "memory": {"uss": 5},
        "offload": {"mode": "faasmem", "local_bytes": 3},
    }
    memory = {"total": {"uss": 5}, "local": 3, "pool": {"kind": "zram", "stored_bytes": 2}}
    record = sample_record(T0, [view, {"id": "j", "memory": {}}], memory)
    assert record["instances"][0]["offload"] == view["offload"] and "offload" not in record["instances"][1]
    assert record["local"] == 3 and record["pool"] == memory["pool"]
    assert "pool" not in sample_record(T0, [], {"total": {}})
