"""CPU accounting of the fig9-10 replays: cgroup discovery, /proc parsing, the start-in-group
wrapper, and CPU over a window from sampled counters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from icebox_bench.desiccant_eval import cpu

HYBRID = """\
31 25 0:26 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
32 31 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
33 31 0:28 / /sys/fs/cgroup/cpu\\040acct rw,relatime shared:11 - cgroup cgroup rw,cpuacct
41 31 0:36 / /sys/fs/cgroup/unified rw,relatime shared:19 - cgroup2 cgroup2 rw
"""
COMOUNTED = "1 0 0:1 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
V2_ONLY = "1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"


def test_cpuacct_hierarchy_is_found_only_when_separate_from_cpu():
    assert cpu.cpuacct_mount(HYBRID) == Path("/sys/fs/cgroup/cpu acct")
    # Co-mounted: iceboxd's instance cgroups (in the cpu hierarchy) would take instances out.
    assert cpu.cpuacct_mount(COMOUNTED) is None
    assert cpu.cpuacct_mount(V2_ONLY) is None


def test_proc_stat_fields_are_counted_after_the_command_name():
    ticks = cpu._CLK_TCK
    fields = ["S", "1"] + ["0"] * 9 + [str(3 * ticks), str(ticks), str(2 * ticks), "0"] + ["0"] * 30
    text = "1234 (we ird) name)) " + " ".join(fields)
    assert cpu.proc_stat_seconds(text) == (4.0, 2.0)


def test_machine_busy_time_leaves_out_idle_and_iowait():
    t = cpu._CLK_TCK
    stat = f"cpu  {3 * t} {t} {2 * t} {100 * t} {50 * t} {t} {t} 0 0 0\ncpu0 1 2 3\n"
    assert cpu.machine_busy_seconds(stat) == pytest.approx(8.0)


def test_the_wrapper_moves_the_command_into_the_group_before_exec(tmp_path):
    group = cpu.CpuacctGroup.__new__(cpu.CpuacctGroup)  # a plain directory stands in for the cgroup
    group.path = tmp_path
    out = subprocess.run(group.wrap(["sh", "-c", 'echo "$$"']), capture_output=True, text=True, check=True)
    # exec keeps the pid: the process that ran the command is the one written to cgroup.procs.
    assert (tmp_path / "cgroup.procs").read_text().strip() == out.stdout.strip()


def _samples():
    return [
        {"t_ms": 1000.0 * t, "method": "cpuacct", "total_s": 2.0 * t, "daemon_s": 0.5 * t, "machine_s": 2.5 * t}
        for t in (0, 2, 4)
    ]


def test_counters_are_interpolated_between_samples_and_clamped_outside():
    s = _samples()
    assert cpu.value_at(s, "total_s", 1000.0) == pytest.approx(2.0)
    assert cpu.value_at(s, "total_s", 3500.0) == pytest.approx(7.0)
    assert cpu.value_at(s, "total_s", -500.0) == 0.0 and cpu.value_at(s, "total_s", 9000.0) == 8.0
    assert cpu.value_at([], "total_s", 0.0) is None


def test_window_cpu_splits_daemon_and_instances():
    got = cpu.window_cpu(_samples(), 1000.0, 3000.0)
    assert got == {
        "method": "cpuacct",
        "total_s": 4.0,
        "daemon_s": 1.0,
        "instances_s": 3.0,
        "cores": 2.0,
        "other_cores": 0.5,
    }
    assert cpu.window_cpu(_samples(), 3000.0, 3000.0) is None
