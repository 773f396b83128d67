"""memhog: an instance that holds a given amount of memory between invocations (Squeezy's
reclaim experiments ran numactl's memhog in every partition).

Input: {"hold_mib": int, "chunk_mib": int (optional, default 16)}. Afterwards the instance
holds exactly `hold_mib` MiB of anonymous memory with every page written, in chunks of
`chunk_mib` MiB (each its own mapping): held chunks are kept, missing ones allocated, extra
ones unmapped (returned to the kernel at once, unlike malloc'd memory). Returns what it holds.
Calls alternating between instances interleave their pages in guest memory, as concurrent
functions' allocations do.
"""

import mmap

_MIB = 1 << 20
_FILL = b"\xa5" * _MIB  # not zero: no zero-page or same-page merging anywhere below
_held = []


def _chunk(mib):
    m = mmap.mmap(-1, mib * _MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for _ in range(mib):
        m.write(_FILL)
    return m


def main(args):
    target = int(args.get("hold_mib", 0))
    chunk = int(args.get("chunk_mib", 16))
    if target < 0 or target > 65536 or chunk < 1 or chunk > 4096:
        raise ValueError("'hold_mib' must be 0..65536 and 'chunk_mib' 1..4096")
    held = sum(len(m) for m in _held) // _MIB
    while held > target:
        m = _held.pop()
        held -= len(m) // _MIB
        m.close()
    while held < target:
        mib = min(chunk, target - held)
        _held.append(_chunk(mib))
        held += mib
    return {"held_mib": held, "chunks": len(_held)}
