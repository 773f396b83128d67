"""POST /icebox/reclaim: give an idle instance's frozen garbage back to the OS (Desiccant).

Where a CPython heap's free memory sits, and what returns it:
  * garbage in reference cycles stays allocated until a collection of the oldest generation,
    which an idle (frozen) instance never runs: `gc.collect()` frees it, and a full collection
    also empties the interpreter's free lists (floats, tuples, dicts, ...);
  * pymalloc (objects <= 512 bytes) munmaps a 1 MiB arena as soon as *all* its pools are
    free, inside the free() call: nothing to wait for. An arena holding one surviving object
    stays mapped with all its free pools; pymalloc keeps no address list we could use, and
    releasing pools behind its back would corrupt the free lists it stores inside them, so
    that remainder is only reported (details.pymalloc);
  * glibc malloc (larger objects, buffers, extension modules) keeps freed chunks and only
    gives back the top of the main heap above M_TRIM_THRESHOLD; `malloc_trim(0)` madvises
    every free page of every arena away, synchronously.

Variants: `gc-trim` (default) = gc.collect() then malloc_trim(0); `gc` = gc.collect() only.

Everything is synchronous in the calling thread, so USS has reached its final value when
malloc_trim returns; the answer still waits until smaps_rollup shows USS has stopped falling
(bounded), as the protocol asks, which costs one short poll interval of wall time.

cpu_ms and wall_ms cover the whole reclaim after uss_before is read: collection, the heap
measurement that yields live_bytes, trim and settling: what the node pays per reclaim. The
one-off import of heapstats/ctypes on the first reclaim is left out (details.setup_ms).

Allocation order matters with pymalloc: a small object allocated while the heap is still full
of garbage lands in a garbage-filled arena and, once the garbage is collected, pins that whole
1 MiB arena. So this module is imported with the app at start-up (it is small and imports
nothing new), and ctypes (~1 MiB of objects, kept for good) only after the collection, when
new objects fill the arenas that survivors already pin. The request's own few objects are
allocated before the collection and unavoidably pin a few arenas until the response is sent:
USS then drops below the reported uss_after (measured: ~3 MiB on alloc.py after 20 runs).
"""

import gc
import os
import time

DEFAULT_VARIANT = "gc-trim"
VARIANTS = (DEFAULT_VARIANT, "gc")

# USS is "settled" once a re-read after this interval is not lower by a page or more.
_SETTLE_INTERVAL_S = 0.001
_SETTLE_LIMIT_S = 0.2
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

_USS_FIELDS = (b"Private_Clean:", b"Private_Dirty:")

_UNBOUND = object()
_malloc_trim = _UNBOUND


class UnknownVariant(ValueError):
    pass


def uss_bytes():
    """Unique set size of this process (Private_Clean + Private_Dirty), or None without /proc.

    smaps_rollup (Linux >= 4.14) is one pre-summed record; plain smaps (one record per
    mapping, same field names) is the fallback.
    """
    for path in ("/proc/self/smaps_rollup", "/proc/self/smaps"):
        try:
            with open(path, "rb") as smaps:
                total_kb = 0
                for line in smaps:
                    if line.startswith(_USS_FIELDS):
                        total_kb += int(line.split()[1])
                return total_kb * 1024
        except FileNotFoundError:
            continue
        except (OSError, ValueError, IndexError):
            return None
    return None


def _bind_malloc_trim():
    """glibc's malloc_trim, or None (musl and others do not have it). Bound on first use."""
    global _malloc_trim
    if _malloc_trim is _UNBOUND:
        import ctypes

        func = getattr(ctypes.CDLL(None), "malloc_trim", None)
        if func is not None:
            func.argtypes = [ctypes.c_size_t]
            func.restype = ctypes.c_int
        _malloc_trim = func
    return _malloc_trim


def _settle(first):
    """Re-read USS until it stops falling (or the bound expires); (uss, polls)."""
    current = first
    polls = 0
    if current is None:
        return None, polls
    deadline = time.perf_counter() + _SETTLE_LIMIT_S
    while True:
        time.sleep(_SETTLE_INTERVAL_S)
        polls += 1
        latest = uss_bytes()
        if latest is None:
            return current, polls
        falling = latest <= current - _PAGE_BYTES
        current = latest
        if not falling or time.perf_counter() >= deadline:
            return current, polls


def _pymalloc_details(pymalloc):
    """What pymalloc keeps after the collection: arenas pinned by a few surviving objects."""
    if pymalloc is None:
        return None
    arena = pymalloc["arena_size"]
    mapped = pymalloc["arenas"] * arena
    allocated = pymalloc["allocated_bytes"]
    return {
        "arenas": pymalloc["arenas"],
        "arena_bytes": mapped,
        "allocated_bytes": allocated,
        # Mapped but holding no object: the part of the heap no stock mechanism can return
        # (an upper bound of what stays resident: pools never carved out are not).
        "free_in_arenas_bytes": mapped - allocated,
        "unused_pool_bytes": pymalloc["unused_pools"] * (pymalloc["pool_size"] or 0),
        "free_block_bytes": pymalloc["free_block_bytes"],
        # Arenas the live objects would fill if they were packed: the rest is fragmentation.
        "arenas_if_packed": -(-allocated // arena),
    }


def _malloc_details(malloc):
    if malloc is None:
        return None
    return {
        "used_bytes": malloc["uordblks"] + malloc["hblkhd"],
        "free_bytes": malloc["fordblks"],
        "mmapped_bytes": malloc["hblkhd"],
    }


def reclaim(variant=None):
    """Run one reclaim; returns the /icebox/reclaim document. Raises UnknownVariant."""
    if variant is None:
        variant = DEFAULT_VARIANT
    if variant not in VARIANTS:
        raise UnknownVariant(variant)

    uss_before = uss_bytes()
    cpu_start = time.process_time()
    wall_start = time.perf_counter()

    collected = gc.collect()
    gc_done = time.perf_counter()

    # After the collection (see the module docstring); its one-off cost is not the reclaim's.
    setup_cpu = time.process_time()
    from . import heapstats

    trim = _bind_malloc_trim() if variant == "gc-trim" else None
    setup_wall = time.perf_counter() - gc_done
    setup_cpu = time.process_time() - setup_cpu

    # Measured before the trim: the trim changes no allocation, and the measurement's own
    # temporary buffers are then trimmed too.
    live_bytes, malloc, pymalloc = heapstats.heap_used()
    measured = time.perf_counter()

    if variant != "gc-trim":
        trim_details = {"called": False, "reason": "variant %s does not trim" % variant}
    elif trim is None:
        trim_details = {"called": False, "reason": "malloc_trim is not in the C library (not glibc): skipped"}
    else:
        released = trim(0)
        trim_details = {"called": True, "released": bool(released)}
    trimmed = time.perf_counter()
    trim_details["ms"] = round((trimmed - measured) * 1000.0, 3)

    uss_after, polls = _settle(uss_bytes())
    wall_end = time.perf_counter()
    cpu_end = time.process_time()

    return {
        "uss_before": uss_before,
        "uss_after": uss_after,
        "live_bytes": live_bytes,
        "cpu_ms": round((cpu_end - cpu_start - setup_cpu) * 1000.0, 3),
        "wall_ms": round((wall_end - wall_start - setup_wall) * 1000.0, 3),
        "variant": variant,
        "details": {
            "gc": {
                "collected": collected,
                "uncollectable_garbage": len(gc.garbage),
                "ms": round((gc_done - wall_start) * 1000.0, 3),
            },
            "setup_ms": round(setup_wall * 1000.0, 3),
            "trim": trim_details,
            "pymalloc": _pymalloc_details(pymalloc),
            "malloc": _malloc_details(malloc),
            "settle": {"polls": polls, "ms": round((wall_end - trimmed) * 1000.0, 3)},
        },
    }
