"""Run directories, JSONL and the event-stream parser."""

from __future__ import annotations

import pytest
from icebox_bench.events import SseParser
from icebox_bench.recorder import RunDir, read_jsonl


def test_jsonl_lines_are_readable_at_once_and_a_torn_line_is_ignored(tmp_path):
    run = RunDir(tmp_path / "run")
    writer = run.jsonl("x.jsonl")
    writer.write({"a": 1})
    assert read_jsonl(tmp_path / "run" / "x.jsonl") == [{"a": 1}]  # no close needed
    with open(tmp_path / "run" / "x.jsonl", "a") as f:
        f.write('{"b": ')
    assert read_jsonl(tmp_path / "run" / "x.jsonl") == [{"a": 1}]
    run.close()


def test_run_dir_refuses_to_mix_runs(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "config.json").write_text("{}")
    with pytest.raises(FileExistsError):
        RunDir(tmp_path / "used")


def test_sse_parser():
    parser = SseParser()
    lines = [
        ": keep-alive",
        "",
        "id: 41",
        "event: lifecycle",
        'data: {"seq":41}',
        "",
        "data: line one",
        "data: line two",
        "",
        "event: lagged",
        "data: 3",
        "",
    ]
    messages = [m for m in (parser.feed(line) for line in lines) if m]
    assert messages == [
        {"event": "lifecycle", "id": "41", "data": '{"seq":41}'},
        {"event": "message", "id": None, "data": "line one\nline two"},
        {"event": "lagged", "id": None, "data": "3"},
    ]
