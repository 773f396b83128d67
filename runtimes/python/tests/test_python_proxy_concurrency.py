"""Concurrent activations (ICEBOX_CONCURRENCY > 1) and multiple connections with concurrency 1."""

import threading

import pytest

# Each activation waits at a 2-party barrier: it only returns successfully if another
# activation is inside main() at the same time, i.e. if the proxy really overlaps them.
BARRIER_ACTION = """
import threading

BARRIER = threading.Barrier(2, timeout=10)

def main(args):
    BARRIER.wait()
    return {"tag": args["tag"]}
"""


def _run_in_thread(proxy, tag, results):
    connection = proxy.connection()
    try:
        results[tag] = proxy.run_on(connection, {"tag": tag})
    finally:
        connection.close()


def test_concurrency_two_serves_overlapping_slow_requests(start_proxy):
    proxy = start_proxy(concurrency=2)
    assert proxy.init(BARRIER_ACTION).status == 200
    results = {}
    threads = [threading.Thread(target=_run_in_thread, args=(proxy, tag, results)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results["a"].status == 200 and results["a"].json == {"tag": "a"}
    assert results["b"].status == 200 and results["b"].json == {"tag": "b"}


def test_concurrency_one_serves_a_new_connection_while_another_idles(proxy):
    assert proxy.init("def main(args):\n    return {'n': args['n']}\n").status == 200
    idle = proxy.connection()
    busy = proxy.connection()
    try:
        # `idle` stays open with a finished request; `busy` must still be served.
        assert proxy.run_on(idle, {"n": 1}).json == {"n": 1}
        assert proxy.run_on(busy, {"n": 2}).json == {"n": 2}
        assert proxy.run_on(idle, {"n": 3}).json == {"n": 3}
    finally:
        idle.close()
        busy.close()


def test_invalid_concurrency_is_fatal(start_proxy):
    with pytest.raises(AssertionError, match="ICEBOX_CONCURRENCY must be a positive integer"):
        start_proxy(concurrency=0)


def test_threaded_proxy_stops_on_sigterm(start_proxy):
    proxy = start_proxy(concurrency=4)
    assert proxy.init("def main(args):\n    return {}\n").status == 200
    idle = proxy.connection()
    try:
        assert proxy.run_on(idle, {}).status == 200
        assert proxy.terminate() == 0
    finally:
        idle.close()
