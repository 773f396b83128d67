"""json_dumps_loads (FunctionBench; FaaSnap's "json"): parse a JSON document and serialise it
again, pretty-printed.

Input: {"items": int, "seed": int}. FunctionBench loads a downloaded search-API response
(13-148 KB in FaaSnap); here the response is generated: `items` search hits with strings,
numbers, nested objects and lists, drawn from random.Random(seed) and serialised once to
compact JSON text (the "download"). The timed work is what FunctionBench times:
json.loads of that text, then json.dumps(indent=4) of the result. indent makes CPython use
its pure-Python encoder, so dumps dominates.
"""

import hashlib
import json
import random
import string
import time

WORDS = (
    "serverless",
    "memory",
    "snapshot",
    "container",
    "runtime",
    "function",
    "cold",
    "warm",
    "start",
    "page",
    "heap",
    "garbage",
    "trace",
    "invocation",
    "latency",
    "kernel",
    "swap",
    "cache",
    "python",
    "node",
    "java",
    "instance",
    "pool",
    "policy",
)


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def _sentence(rnd, n):
    return " ".join(rnd.choices(WORDS, k=n)).capitalize()


def generate(items, seed):
    """A search-API-like response with `items` hits."""
    rnd = random.Random(seed)
    hits = []
    for i in range(items):
        hits.append(
            {
                "id": "".join(rnd.choices(string.ascii_letters + string.digits, k=11)),
                "rank": i + 1,
                "title": _sentence(rnd, rnd.randint(3, 8)),
                "snippet": _sentence(rnd, rnd.randint(12, 30)) + ".",
                "url": "https://example.org/%s/%d" % (rnd.choice(WORDS), rnd.randrange(10**6)),
                "score": round(rnd.random(), 6),
                "published": "20%02d-%02d-%02dT%02d:%02d:%02dZ"
                % (
                    rnd.randint(10, 24),
                    rnd.randint(1, 12),
                    rnd.randint(1, 28),
                    rnd.randrange(24),
                    rnd.randrange(60),
                    rnd.randrange(60),
                ),
                "author": {
                    "name": _sentence(rnd, 2),
                    "verified": rnd.random() < 0.2,
                    "followers": rnd.randrange(10**7),
                },
                "tags": rnd.sample(WORDS, rnd.randint(1, 6)),
                "stats": {
                    "views": rnd.randrange(10**8),
                    "likes": rnd.randrange(10**6),
                    "ratio": round(rnd.uniform(0.5, 1.0), 4),
                },
                "thumbnails": [
                    {"width": w, "height": w * 9 // 16, "url": "https://img.example.org/%d/%d.jpg" % (i, w)}
                    for w in (120, 320, 480)
                ],
            }
        )
    return {"kind": "searchListResponse", "query": _sentence(rnd, 3), "totalResults": items, "items": hits}


def main(args):
    items = _int_param(args, "items", 1000, 0, 1_000_000)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    text = json.dumps(generate(items, seed), separators=(",", ":"))
    start = time.perf_counter()
    document = json.loads(text)
    pretty = json.dumps(document, indent=4)
    latency = time.perf_counter() - start
    return {
        "items": len(document["items"]),
        "input_bytes": len(text),
        "output_bytes": len(pretty),
        "output_sha256": hashlib.sha256(pretty.encode("utf-8")).hexdigest(),
        "latency_ms": round(latency * 1000, 3),
    }
