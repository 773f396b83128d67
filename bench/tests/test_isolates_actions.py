"""The isolate-mode annotations the isolates recipes deploy with."""

from icebox_bench.isolates_eval.actions import sharing_body
from icebox_bench.isolates_eval.options import isolate_settings


def annotations(body: dict) -> dict:
    return {a["key"]: a["value"] for a in body["annotations"]}


def test_the_engine_setting_becomes_a_string_annotation_and_empty_means_the_default():
    settings = {"isolate_memory_mb": 48, "isolate_pool": 0, "isolate_idle_ms": "", "isolate_engine": "worker"}
    isolate = isolate_settings(settings)
    assert isolate == {"memory_mb": 48, "pool": None, "idle_ms": None, "engine": "worker"}
    body = sharing_body(None, "isolate", concurrency=8, isolate=isolate, exec_body={"kind": "nodejs:20", "code": ""})
    assert annotations(body) == {
        "icebox.sharing": "isolate",
        "icebox.isolate_memory": 48,
        "icebox.isolate_engine": "worker",
    }
    assert isolate_settings({"isolate_engine": ""})["engine"] is None
    # Isolate settings never reach another mode's action.
    assert annotations(sharing_body(None, "shared", concurrency=8, isolate=isolate, exec_body={})) == {
        "icebox.sharing": "shared"
    }
