"""Cumulative time spent in CPython's cyclic garbage collector.

CPython does not account GC time itself; a gc callback brackets every collection.
It must be installed at start-up to cover the instance's whole life. Collections run
with the GIL held, so they never overlap and one start timestamp is enough.
"""

import gc
from time import perf_counter

_started = 0.0
_total = 0.0


def _on_gc(phase, _info):
    global _started, _total
    if phase == "start":
        _started = perf_counter()
    else:
        _total += perf_counter() - _started


def install():
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


def total_ms():
    return _total * 1000.0
