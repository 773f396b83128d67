"""read-part: FaaSnap's synthetic `read-list` (§3.1, Table 2), scaled to a 256 MB action and
made to read only a part of what /init built, out of address order: the case where a loading
set pays off. (The same state as docs/snapshots.md's `python-32of112mb`.)

Init: COLD, 20 000 pages (~80 MiB) of bytes never read again, and HOT, 8 000 pages (~32 MiB),
each object one page plus a few bytes; ORDER, HOT's indexes shuffled with a fixed seed.
Input: {"blocks": int}: read one byte of each of the first `blocks` entries of ORDER (input A
reads 6 000, so a snapshot's loading set recorded with A lacks a quarter of what B's 8 000
touch). Returns how many blocks it read and a checksum.
"""

import random

COLD = [bytes([i % 251]) * 4096 for i in range(20000)]
HOT = [bytes([i % 253]) * 4096 + i.to_bytes(8, "little") for i in range(8000)]
ORDER = list(range(len(HOT)))
random.Random(7).shuffle(ORDER)


def main(args):
    blocks = args.get("blocks", len(ORDER))
    if not isinstance(blocks, int) or not 0 <= blocks <= len(ORDER):
        raise ValueError("'blocks' must be an integer between 0 and %d" % len(ORDER))
    total = 0
    for i in ORDER[:blocks]:
        total += HOT[i][100]
    return {"blocks": blocks, "sum": total}
