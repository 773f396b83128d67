"""2021 format: one row per invocation, start = end_timestamp - duration."""

from __future__ import annotations

import pytest
from icebox_bench.traces import Window, azure2021, detect_format, find_files, open_trace


def test_start_is_end_minus_duration_and_rows_are_sorted(tmp_path, write_lines):
    path = write_lines(
        tmp_path / "invocations.csv",
        ["app,func,end_timestamp,duration", "a,f1,10.5,0.5", "a,f2,3.25,1.25", "a,f1,20,4"],
    )
    trace = azure2021.load(path)
    assert [(i.time_s, i.function) for i in trace.invocations] == [(2.0, "f2"), (10.0, "f1"), (16.0, "f1")]
    assert trace.durations_ms == {"f1": pytest.approx(2250.0), "f2": pytest.approx(1250.0)}


def test_window_applies_to_the_start_time(tmp_path, write_lines):
    path = write_lines(tmp_path / "invocations.csv", ["app,func,end_timestamp,duration", "a,f,10,5", "a,f,30,1"])
    trace = azure2021.load(path, window=Window(5.0, 29.0))
    assert [i.time_s for i in trace.invocations] == [5.0]
    # The average duration covers the whole file, not only the window.
    assert trace.durations_ms == {"f": pytest.approx(3000.0)}


def test_malformed_rows_are_skipped_and_counted(tmp_path, write_lines):
    path = write_lines(
        tmp_path / "invocations.csv",
        ["app,func,end_timestamp,duration", "a,f,10,1", "a,f,ten,1", "a,f,10,-1", "a,f,10", "a,,10,1"],
    )
    trace = azure2021.load(path)
    assert len(trace.invocations) == 1 and trace.skipped_total() == 4


def test_the_sample_trace(traces_dir):
    directory = traces_dir / "azure2021-sample"
    invocations, durations = find_files(directory)
    assert detect_format(invocations) == "azure2021" and durations is None
    trace = open_trace(directory)
    assert len(trace.invocations) == 199 and len(trace.durations_ms) == 31
    first = min(trace.invocations)
    assert first.time_s == pytest.approx(0.07949090003967285 - 0.078)


def test_format_detection(traces_dir):
    assert detect_format(find_files(traces_dir / "azure2019-sample100")[0]) == "azure2019"
