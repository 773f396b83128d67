"""Heap statistics for GET /icebox/stats.

CPython's heap has two layers:
  * pymalloc serves objects of <= 512 bytes from 1 MiB arenas it mmaps itself;
  * everything larger (and the interpreter's own buffers) comes from glibc malloc.
Neither layer sees the other's memory, so the totals add both. pymalloc's exact counters are
only exposed through `_PyObject_DebugMallocStats(FILE *)` (what sys._debugmallocstats prints
to stderr); it is called here with an in-memory FILE from open_memstream, which takes well
under a millisecond and writes nothing to the process's stderr.

Imported lazily (ctypes costs ~1 MiB), only when stats are first requested.
"""

import ctypes
import gc
import sys

from . import gctimer

_MALLINFO_FIELDS = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO_FIELDS]


class _MallInfo(ctypes.Structure):
    # Pre-2.33 glibc: int fields that wrap above 2 GiB, still better than nothing.
    _fields_ = [(name, ctypes.c_int) for name in _MALLINFO_FIELDS]


def _bind_mallinfo(libc):
    for name, struct in (("mallinfo2", _MallInfo2), ("mallinfo", _MallInfo)):
        func = getattr(libc, name, None)
        if func is not None:
            func.argtypes = []
            func.restype = struct
            return name, func
    return None, None


def _bind_pymalloc_stats(libc):
    dump = getattr(ctypes.pythonapi, "_PyObject_DebugMallocStats", None)
    open_memstream = getattr(libc, "open_memstream", None)
    if dump is None or open_memstream is None:
        return None
    dump.argtypes = [ctypes.c_void_p]
    dump.restype = ctypes.c_int
    open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
    open_memstream.restype = ctypes.c_void_p
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.fclose.restype = ctypes.c_int
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    return dump, open_memstream, libc.fclose, libc.free


_libc = ctypes.CDLL(None)
_mallinfo_name, _mallinfo = _bind_mallinfo(_libc)
_pymalloc_dump = _bind_pymalloc_stats(_libc)


def malloc_info():
    """glibc malloc totals over all arenas, or None when not running on glibc."""
    if _mallinfo is None:
        return None
    info = _mallinfo()
    result = {name: getattr(info, name) for name in _MALLINFO_FIELDS}
    result["source"] = _mallinfo_name
    return result


def _dump_pymalloc_text():
    dump, open_memstream, fclose, free = _pymalloc_dump
    buf = ctypes.c_char_p()
    size = ctypes.c_size_t()
    stream = open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not stream:
        return None
    try:
        in_use = dump(stream)
    finally:
        fclose(stream)
    try:
        text = ctypes.string_at(buf, size.value).decode("ascii", "replace")
    finally:
        free(buf)
    # 0 means pymalloc is not the object allocator (e.g. PYTHONMALLOC=malloc).
    return text if in_use else None


def _parse_pymalloc(text):
    values = {}
    arena_size = None
    pool_size = None
    unused_pools = 0
    for line in text.splitlines():
        label, sep, number = line.rpartition("=")
        if not sep:
            continue
        label = label.strip()
        try:
            value = int(number.strip().replace(",", ""))
        except ValueError:
            continue
        if label.endswith("bytes/arena"):
            # "78 arenas * 1048576 bytes/arena"
            arena_size = int(label.split("*")[1].split()[0])
        elif "unused pools *" in label:
            # "41 unused pools * 16384 bytes"
            unused_pools = int(label.split()[0])
            pool_size = int(label.split("*")[1].split()[0])
        elif label.startswith("#") and label not in values:
            values[label] = value
    arenas = values.get("# arenas allocated current")
    allocated = values.get("# bytes in allocated blocks")
    if arenas is None or allocated is None or arena_size is None:
        return None
    return {
        "arenas": arenas,
        "arena_size": arena_size,
        "arenas_highwater": values.get("# arenas highwater mark"),
        "allocated_bytes": allocated,
        "free_block_bytes": values.get("# bytes in available blocks"),
        "unused_pools": unused_pools,
        "pool_size": pool_size,
        "allocated_blocks": sys.getallocatedblocks(),
    }


def pymalloc_info():
    """pymalloc arena/block totals, or None if pymalloc is not in use or not inspectable."""
    if _pymalloc_dump is None:
        return None
    text = _dump_pymalloc_text()
    return _parse_pymalloc(text) if text else None


def process_memory():
    """Resident set from /proc/self/status, in bytes."""
    wanted = {
        "VmRSS": "rss_bytes",
        "RssAnon": "rss_anon_bytes",
        "RssFile": "rss_file_bytes",
        "RssShmem": "rss_shmem_bytes",
    }
    result = {}
    try:
        with open("/proc/self/status", "rb") as status:
            for raw in status:
                key, _, rest = raw.decode("ascii", "replace").partition(":")
                if key in wanted:
                    result[wanted[key]] = int(rest.split()[0]) * 1024
    except OSError:
        return None
    return result


def _heap_totals(malloc, pymalloc, process):
    used = committed = 0
    if malloc is not None:
        used += malloc["uordblks"] + malloc["hblkhd"]
        committed += malloc["arena"] + malloc["hblkhd"]
    if pymalloc is not None:
        used += pymalloc["allocated_bytes"]
        committed += pymalloc["arenas"] * pymalloc["arena_size"]
    if malloc is None and pymalloc is None and process is not None:
        # No allocator introspection (not glibc): anonymous resident memory is the closest.
        used = committed = process.get("rss_anon_bytes", 0)
    return used, committed


def heap_used():
    """(heap_used_bytes, malloc_info(), pymalloc_info()): the heap measure of the stats.

    Right after a full collection this is the instance's live bytes (/icebox/reclaim uses it).
    """
    malloc = malloc_info()
    pymalloc = pymalloc_info()
    process = process_memory() if malloc is None and pymalloc is None else None
    used, _committed = _heap_totals(malloc, pymalloc, process)
    return used, malloc, pymalloc


def collect(full_gc):
    """The /icebox/stats document; with full_gc, after a full collection (sets live_bytes)."""
    collected = gc.collect() if full_gc else None
    malloc = malloc_info()
    pymalloc = pymalloc_info()
    process = process_memory()
    used, committed = _heap_totals(malloc, pymalloc, process)
    generations = gc.get_stats()
    details = {
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "malloc": malloc,
        "pymalloc": pymalloc,
        "gc": {
            "generations": generations,
            "counts": list(gc.get_count()),
            "thresholds": list(gc.get_threshold()),
            "frozen_objects": gc.get_freeze_count(),
            "uncollectable_garbage": len(gc.garbage),
        },
        "process": process,
    }
    if full_gc:
        details["gc"]["collected_by_request"] = collected
    return {
        "runtime": "python",
        "heap_used_bytes": used,
        "heap_committed_bytes": committed,
        "gc_count": sum(g["collections"] for g in generations),
        "gc_time_ms": round(gctimer.total_ms(), 3),
        "live_bytes": used if full_gc else None,
        "details": details,
    }
