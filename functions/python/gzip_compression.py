"""gzip_compression (FunctionBench; FaaSnap's "compression"): gzip-compress a generated file.

Input: {"size_kb": int, "seed": int}. FunctionBench writes os.urandom bytes to a file and
gzips it; random bytes do not compress, which makes the compressor's match finder idle. Here
the "file" is text: words of a fixed made-up vocabulary drawn with Zipf-like frequencies from
random.Random(seed), so gzip finds matches as in real text (~3x smaller). The file and the
.gz are kept in memory: the sandbox's /tmp is a small tmpfs and the rest is read-only.
"""

import gzip
import hashlib
import itertools
import random
import time
import zlib

VOCABULARY_SEED = 7
VOCABULARY_SIZE = 5000
MAX_KB = 64 * 1024


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def _vocabulary():
    rnd = random.Random(VOCABULARY_SEED)
    words = ["".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 10))) for _ in range(VOCABULARY_SIZE)]
    # Zipf's law: the r-th most common word has frequency ~ 1/r.
    cum_weights = list(itertools.accumulate(1.0 / rank for rank in range(1, VOCABULARY_SIZE + 1)))
    return words, cum_weights


WORDS, CUM_WEIGHTS = _vocabulary()


def generate(size, seed):
    """`size` bytes of space-separated words for `seed`."""
    rnd = random.Random(seed)
    chunks, total = [], 0
    while total < size:
        # ~6.4 bytes per word on average with these weights; draw in batches until full.
        text = " ".join(rnd.choices(WORDS, cum_weights=CUM_WEIGHTS, k=(size - total) // 5 + 16))
        chunks.append(text.encode("ascii") + b"\n")
        total += len(chunks[-1])
    return b"".join(chunks)[:size]


def compress(data):
    # mtime=0 keeps the .gz byte-identical across runs; level 9 as gzip.open's default.
    return gzip.compress(data, compresslevel=9, mtime=0)


def main(args):
    size_kb = _int_param(args, "size_kb", 1024, 1, MAX_KB)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    data = generate(size_kb * 1024, seed)
    start = time.perf_counter()
    compressed = compress(data)
    latency = time.perf_counter() - start
    return {
        "size_bytes": len(data),
        "compressed_bytes": len(compressed),
        "ratio": round(len(data) / len(compressed), 3),
        "crc32": zlib.crc32(data),
        "gzip_sha256": hashlib.sha256(compressed).hexdigest(),
        "latency_ms": round(latency * 1000, 3),
    }
