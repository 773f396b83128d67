"""ICEBOX_SHARING: the shared mode (threads of one interpreter, per-thread __OW_* values), the
`sharing` object of /icebox/stats, and the modes refused at start-up."""

import os
import sys
import threading
import time

import pytest
from python_proxy_harness import RUNTIME_DIR

sys.path.insert(0, RUNTIME_DIR)
from icebox_proxy import threadenv  # noqa: E402

# Every activation meets the other inside main() (a 2-party barrier: it only returns if the
# proxy overlaps them) and reads its activation id before and after, so a value written by
# the other activation in between would show. COUNT is a module global: shared by design.
OVERLAP_ACTION = """
import os
import threading
from os import environ

BARRIER = threading.Barrier(2, timeout=20)
COUNT = 0
LOCK = threading.Lock()

def main(args):
    global COUNT
    with LOCK:
        COUNT += 1
        count = COUNT
    before = os.environ.get("__OW_ACTIVATION_ID")
    BARRIER.wait()
    return {"before": before, "after": os.getenv("__OW_ACTIVATION_ID"),
            "imported": environ.get("__OW_ACTIVATION_ID"),
            "in_dict": dict(os.environ).get("__OW_ACTIVATION_ID"),
            "api_key": os.environ.get("__OW_API_KEY"), "count": count}
"""

# "hold" waits until an activation with "release" sets the event.
HOLD_ACTION = """
import threading

EVENT = threading.Event()

def main(args):
    if args.get("release"):
        EVENT.set()
        return {"released": True}
    return {"held": EVENT.wait(30)}
"""


def _run_in_thread(proxy, activation_id, value, results):
    connection = proxy.connection()
    try:
        results[activation_id] = proxy.run_on(connection, value, activation_id=activation_id)
    finally:
        connection.close()


def _overlap(proxy, ids):
    results = {}
    threads = [threading.Thread(target=_run_in_thread, args=(proxy, i, {}, results)) for i in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def _sharing(proxy):
    response = proxy.request("GET", "/icebox/stats")
    assert response.status == 200
    return response.json["sharing"]


def test_overlapping_activations_each_see_their_own_activation_id(start_proxy):
    proxy = start_proxy(concurrency=2, extra_env={"ICEBOX_SHARING": "shared"})
    assert proxy.init(OVERLAP_ACTION).status == 200
    results = _overlap(proxy, ("act-a", "act-b"))
    for activation_id in ("act-a", "act-b"):
        reply = results[activation_id]
        assert reply.status == 200, reply
        for field in ("before", "after", "imported", "in_dict"):
            assert reply.json[field] == activation_id, reply.json
        assert reply.json["api_key"] is None
    # Module globals are one per interpreter: the two activations counted together.
    assert sorted(r.json["count"] for r in results.values()) == [1, 2]
    assert _sharing(proxy) == {
        "mode": "shared",
        "capacity": 2,
        "in_flight": 0,
        "contexts": {"live": 2, "busy": 0, "created": 2},
    }


def test_sequential_activations_reuse_one_slot(start_proxy):
    proxy = start_proxy(concurrency=4, extra_env={"ICEBOX_SHARING": "shared"})
    assert (
        proxy.init("import os\ndef main(args):\n    return {'id': os.environ.get('__OW_ACTIVATION_ID')}\n").status
        == 200
    )
    for activation_id in ("s-1", "s-2", "s-3"):
        assert proxy.run({}, activation_id=activation_id).json == {"id": activation_id}
    assert proxy.run({}).json == {"id": None}
    assert _sharing(proxy)["contexts"] == {"live": 1, "busy": 0, "created": 1}


def test_stats_count_a_running_activation(start_proxy):
    proxy = start_proxy(concurrency=2, extra_env={"ICEBOX_SHARING": "shared"})
    assert proxy.init(HOLD_ACTION).status == 200
    results = {}
    held = threading.Thread(target=_run_in_thread, args=(proxy, "held", {}, results))
    held.start()
    try:
        deadline = time.monotonic() + 30
        sharing = _sharing(proxy)
        while sharing["in_flight"] == 0:
            assert time.monotonic() < deadline, "the activation never started"
            time.sleep(0.01)
            sharing = _sharing(proxy)
        assert sharing["in_flight"] == 1
        assert sharing["contexts"]["busy"] == 1
    finally:
        assert proxy.run({"release": True}).json == {"released": True}
        held.join(60)
    assert results["held"].json == {"held": True}
    assert _sharing(proxy)["in_flight"] == 0


def test_process_mode_reports_sharing_without_contexts(start_proxy):
    proxy = start_proxy(concurrency=3, extra_env={"ICEBOX_SHARING": "process"})
    assert _sharing(proxy) == {"mode": "process", "capacity": 3, "in_flight": 0}


def test_without_the_variable_the_mode_is_process(proxy):
    assert _sharing(proxy) == {"mode": "process", "capacity": 1, "in_flight": 0}


def test_isolate_mode_is_refused_at_start_up(start_proxy):
    with pytest.raises(AssertionError, match="ICEBOX_SHARING=isolate is not supported"):
        start_proxy(extra_env={"ICEBOX_SHARING": "isolate"})


def test_unknown_mode_is_refused_at_start_up(start_proxy):
    with pytest.raises(AssertionError, match="ICEBOX_SHARING must be process, shared or"):
        start_proxy(extra_env={"ICEBOX_SHARING": "pooled"})


def test_thread_environ_lays_a_threads_values_over_the_process_environment():
    env = threadenv.ActivationEnviron(os.environ)
    name = "ICEBOX_TEST_THREADENV"
    env[name] = "process"
    try:
        env.set_for_this_thread({"__OW_ACTIVATION_ID": "a-1", name: None})
        assert env["__OW_ACTIVATION_ID"] == "a-1"
        assert name not in env and env.get(name) is None
        assert dict(env).get("__OW_ACTIVATION_ID") == "a-1" and name not in dict(env)
        assert len(env) == len(os.environ)  # one added, one hidden
        env["__OW_ACTIVATION_ID"] = "changed"  # the activation's own copy
        assert env["__OW_ACTIVATION_ID"] == "changed"
        assert "__OW_ACTIVATION_ID" not in os.environ
        seen = {}
        other = threading.Thread(target=lambda: seen.update(id=env.get("__OW_ACTIVATION_ID"), name=env.get(name)))
        other.start()
        other.join()
        assert seen == {"id": None, "name": "process"}
        env.clear_for_this_thread()
        assert env[name] == "process" and "__OW_ACTIVATION_ID" not in env
    finally:
        env.clear_for_this_thread()
        os.environ.pop(name, None)
