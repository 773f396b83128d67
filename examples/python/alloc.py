"""Allocates `mb` megabytes (default 64) of Python objects, touches them, then drops them.

A deliberately garbage-leaving action for heap measurements. The objects are small (a ~250
byte str plus a 2-slot list per node), so they live in pymalloc arenas rather than in one
large malloc'd block that would go back to the OS at once; and every node references itself,
so once dropped they stay allocated until the cyclic garbage collector runs.
"""

import sys

_PAYLOAD_CHARS = 200
_MAX_MB = 4096


def main(args):
    mb = args.get("mb", 64)
    if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not 0 <= mb <= _MAX_MB:
        return {"error": "'mb' must be a number of megabytes between 0 and %d" % _MAX_MB}
    target = int(mb * 1024 * 1024)
    nodes = []
    allocated = 0
    while allocated < target:
        # Distinct contents, so no two nodes can share a string object.
        payload = ("%08x" % len(nodes)) * (_PAYLOAD_CHARS // 8)
        node = [payload, None]
        node[1] = node
        nodes.append(node)
        allocated += sys.getsizeof(payload) + sys.getsizeof(node)
    allocated += sys.getsizeof(nodes)

    checksum = 0
    for node in nodes:  # read every payload back so every page is really touched
        checksum = (checksum * 31 + ord(node[0][-1]) + len(node[0])) & 0xFFFFFFFF
    count = len(nodes)
    nodes = node = None  # drop the only references: the cycles are now garbage
    return {"requested_mb": mb, "allocated_bytes": allocated, "nodes": count, "checksum": checksum}
