"""2019 format: per-minute counts expanded to exact timestamps."""

from __future__ import annotations

from collections import Counter

import pytest
from icebox_bench.traces import Window, azure2019, open_trace

HEADER = "HashOwner,HashApp,HashFunction,Trigger,480,481,482"


def test_even_expansion_is_60_over_n_plus_1_apart():
    assert azure2019.expand_minute(480, 3) == [28815.0, 28830.0, 28845.0]
    assert azure2019.expand_minute(480, 1) == [28830.0]
    assert azure2019.expand_minute(481, 0) == []
    times = azure2019.expand_minute(0, 5)
    assert times == pytest.approx([10.0, 20.0, 30.0, 40.0, 50.0])


def test_random_expansion_is_seeded_sorted_and_inside_the_minute():
    a = azure2019.expand_minute(480, 50, "random", seed=7, function="f")
    assert a == azure2019.expand_minute(480, 50, "random", seed=7, function="f")
    assert a == sorted(a) and all(28800.0 <= t < 28860.0 for t in a) and len(a) == 50
    assert a != azure2019.expand_minute(480, 50, "random", seed=8, function="f")
    assert a != azure2019.expand_minute(480, 50, "random", seed=7, function="g")


def test_rows_become_exact_timestamps(tmp_path, write_lines):
    path = write_lines(tmp_path / "invocations.csv", [HEADER, "o,a,f1,http,1,0,3", "o,a,f2,timer,0,2,0"])
    trace = azure2019.load(path)
    assert [(i.time_s, i.function) for i in trace.invocations] == [
        (28830.0, "f1"),
        (28880.0, "f2"),
        (28900.0, "f2"),
        (28935.0, "f1"),
        (28950.0, "f1"),
        (28965.0, "f1"),
    ]
    assert trace.functions == ["f1", "f2"]
    assert trace.skipped_total() == 0


def test_window_keeps_only_timestamps_inside_it(tmp_path, write_lines):
    path = write_lines(tmp_path / "invocations.csv", [HEADER, "o,a,f1,http,1,0,3"])
    trace = azure2019.load(path, window=Window(28830.0, 28950.0))
    assert [i.time_s for i in trace.invocations] == [28830.0, 28935.0]  # end is exclusive


def test_random_timestamps_do_not_depend_on_the_window(tmp_path, write_lines):
    path = write_lines(tmp_path / "invocations.csv", [HEADER, "o,a,f1,http,5,7,9"])
    whole = azure2019.load(path, expansion="random", seed=3)
    part = azure2019.load(path, expansion="random", seed=3, window=Window(481 * 60.0, 482 * 60.0))
    assert [i.time_s for i in part.invocations] == [i.time_s for i in whole.invocations if 28860 <= i.time_s < 28920]
    assert len(part.invocations) == 7


def test_malformed_rows_are_skipped_and_counted(tmp_path, write_lines):
    path = write_lines(
        tmp_path / "invocations.csv",
        [
            HEADER,
            "o,a,good,http,1,1,1",
            "o,a,short,http,1,1",  # wrong number of fields
            "o,a,text,http,1,x,1",  # not an integer
            "o,a,neg,http,1,-2,1",  # negative
            "o,a,good,http,5,5,5",  # duplicate function
            ",,,,,,",  # empty HashFunction (right field count)
        ],
    )
    trace = azure2019.load(path)
    assert trace.functions == ["good"] and len(trace.invocations) == 3
    assert trace.skipped == {
        "invocations: wrong number of fields": 1,
        "invocations: count is not an integer": 1,
        "invocations: negative count": 1,
        "invocations: duplicate function": 1,
        "invocations: empty HashFunction": 1,
    }


def test_durations_file(tmp_path, write_lines):
    path = write_lines(
        tmp_path / "durations.csv",
        [
            "HashOwner,HashApp,HashFunction,Average,Count,Minimum,Maximum",
            "o,a,f1,71,288,0,1458",
            "o,a,f2,abc,1,1,1",
            "o,a,f3,2.5,1,1,1",
            "o,a,f1,99,1,1,1",
        ],
    )
    skipped = Counter()
    assert azure2019.read_durations(path, skipped) == {"f1": 71.0, "f3": 2.5}
    assert sum(skipped.values()) == 2


def test_the_sample_trace_two_minute_window(traces_dir):
    trace = open_trace(traces_dir / "azure2019-sample100", window=Window(480 * 60.0, 482 * 60.0))
    assert trace.format == "azure2019"
    assert len(trace.invocations) == 1348  # the sum of columns 480 and 481
    assert all(28800.0 <= i.time_s < 28920.0 for i in trace.invocations)
    assert len(trace.durations_ms) == 100 and trace.skipped_total() == 0
