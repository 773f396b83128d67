"""web_server (FaaSMem's "Web", an HTML page server): serve pages from an in-memory cache
built at init, with page popularity following a Pareto distribution.

Init (module load): PAGE_COUNT distinct pages of ~PAGE_BYTES each are generated from a fixed
seed and cached as strings, as FaaSMem's html_server reads its 50 .mhtml files at start-up.
Each page is MHTML-like: an HTML article (generated paragraphs) followed by base64-encoded
embedded resources (random bytes standing in for images) - ~50 MB of cache in all, a large
initialisation segment of which a request touches only the pages it serves.

Input: {"seed": int, "requests": int}. For each of `requests` page requests, a page index is
drawn as FaaSMem's load generator did (Pareto, shape 0.9, redrawn until it is < PAGE_COUNT)
from random.Random(seed); the page is rendered (per-request fields filled into the cached
template) and served: encoded to bytes, given a strong ETag (SHA3-512, the hash FaaSMem's
handler computes) and an HTTP response head. Returns the pages served and their ETags.
"""

import base64
import hashlib
import random
import string
import time

PAGE_COUNT = 50
PAGE_BYTES = 1 << 20
PAGES_SEED = 1234
PARETO_SHAPE = 0.9
WORDS = (
    "the",
    "of",
    "and",
    "serverless",
    "function",
    "memory",
    "page",
    "cache",
    "request",
    "latency",
    "cold",
    "warm",
    "instance",
    "keep",
    "alive",
    "node",
    "runtime",
    "heap",
    "snapshot",
    "policy",
    "trace",
    "offload",
    "swap",
    "container",
    "data",
    "user",
)
REQUEST_ID = "{{request_id}}"


def _page(rnd, index):
    paragraphs = []
    for _ in range(60):
        words = rnd.choices(WORDS, k=rnd.randint(40, 120))
        paragraphs.append("<p>%s.</p>" % " ".join(words).capitalize())
    html = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page %d</title></head>'
        "<body><header>Request %s</header><h1>Article %d</h1>\n%s\n</body></html>\n"
        % (index, REQUEST_ID, index, "\n".join(paragraphs))
    )
    parts = [
        'MIME-Version: 1.0\nContent-Type: multipart/related; boundary="part"\n\n--part\nContent-Type: text/html\n\n',
        html,
    ]
    image = 0
    while sum(map(len, parts)) < PAGE_BYTES:
        image += 1
        blob = base64.encodebytes(rnd.randbytes(96 * 1024)).decode("ascii")
        parts.append(
            "--part\nContent-Type: image/jpeg\nContent-Location: img%d.jpg\n"
            "Content-Transfer-Encoding: base64\n\n%s" % (image, blob)
        )
    parts.append("--part--\n")
    return "".join(parts)


def build_pages(count, seed):
    rnd = random.Random(seed)
    return [_page(rnd, i) for i in range(count)]


PAGES = build_pages(PAGE_COUNT, PAGES_SEED)


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def pareto_index(rnd, shape, size):
    """FaaSMem's get_pareto_idx: an index in [0, size) with a Pareto-distributed weight."""
    while True:
        x = rnd.paretovariate(shape)
        if x < size + 1:
            return int(x - 1)


def render(index, request_id):
    """The response body for page `index` in request `request_id`."""
    return PAGES[index].replace(REQUEST_ID, request_id, 1).encode("utf-8")


def serve(index, request_id):
    body = render(index, request_id)
    etag = hashlib.sha3_512(body).hexdigest()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: multipart/related\r\nContent-Length: %d\r\n"
        'ETag: "%s"\r\n\r\n' % (len(body), etag)
    ).encode("ascii")
    return head, body, etag


def main(args):
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    requests = _int_param(args, "requests", 1, 1, 10_000)
    rnd = random.Random(seed)
    start = time.perf_counter()
    served, total = [], 0
    for _ in range(requests):
        index = pareto_index(rnd, PARETO_SHAPE, len(PAGES))
        request_id = "".join(rnd.choices(string.hexdigits, k=16))
        head, body, etag = serve(index, request_id)
        total += len(head) + len(body)
        served.append({"page": index, "request_id": request_id, "etag": etag[:32]})
    latency = time.perf_counter() - start
    return {"served": served, "bytes": total, "latency_ms": round(latency * 1000, 3)}
