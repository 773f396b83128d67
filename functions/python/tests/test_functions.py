"""Correctness of the Python benchmark functions: each module is imported and its main() is
called directly with input A from functions.json; the answer is checked independently.

Run: python -m pytest functions/python/tests   (a Python 3.11 with pytest; numpy, Pillow,
igraph, chameleon and pyaes are taken from runtimes/python/packages, where set-up installs
functions/python/requirements.txt, or from the interpreter's own site-packages).
"""

import gzip
import hashlib
import importlib.util
import io
import json
import math
import pathlib
import random
import sys
import zlib

import pytest

FUNCTIONS_DIR = pathlib.Path(__file__).resolve().parent.parent
PACKAGES_DIR = FUNCTIONS_DIR.parent.parent / "runtimes" / "python" / "packages"
if PACKAGES_DIR.is_dir() and str(PACKAGES_DIR) not in sys.path:
    sys.path.insert(0, str(PACKAGES_DIR))

try:
    import numpy as np  # noqa: E402  (after the packages directory is on the path)
except ImportError as exc:  # pragma: no cover - a set-up problem, not a test failure mode
    raise ImportError(
        "numpy not found: install functions/python/requirements.txt into "
        "runtimes/python/packages (scripts/setup.sh does)"
    ) from exc

MANIFEST = json.loads((FUNCTIONS_DIR / "functions.json").read_text())
BY_NAME = {entry["name"]: entry for entry in MANIFEST}
_modules = {}


def load(name):
    """The function module, imported from its file under a private name: chameleon.py and
    pyaes.py must not shadow the packages they import (the proxy loads them as main__)."""
    if name not in _modules:
        path = FUNCTIONS_DIR.parent / BY_NAME[name]["path"]
        spec = importlib.util.spec_from_file_location("icebox_fn_" + name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _modules[name] = module
    return _modules[name]


def run_a(name):
    """main() with input A; the result must be a dict that JSON can carry."""
    args = dict(BY_NAME[name]["inputs"]["A"])
    result = load(name).main(args)
    assert isinstance(result, dict) and "error" not in result
    json.dumps(result, allow_nan=False)
    return args, result


def test_manifest():
    names = [entry["name"] for entry in MANIFEST]
    assert len(names) == len(set(names)) == 14
    for entry in MANIFEST:
        assert entry["language"] == "python" and entry["kind"] == "python:3"
        assert (FUNCTIONS_DIR.parent / entry["path"]).is_file()
        assert set(entry["inputs"]) == {"A", "B"}
        assert entry["memory_mb"] in (256, 512) and entry["timeout_ms"] > 0
        assert entry["paper"] and entry["description"]
        assert len(json.dumps(entry["inputs"])) < 200  # parameters stay tiny


def test_hello():
    args, result = run_a("hello")
    assert result == {"greeting": "Hello, %s!" % args["name"]}


def test_float_operation():
    args, result = run_a("float_operation")
    i = np.arange(args["n"], dtype=np.float64)
    expected = np.sin(i).sum() + np.cos(i).sum() + np.sqrt(i).sum()
    assert result["sum"] == pytest.approx(expected, rel=1e-9)


def test_matmul():
    args, result = run_a("matmul")
    a, b = load("matmul").generate(args["n"], args["seed"])
    # sum(AB) = sum_k colsum(A)_k * rowsum(B)_k and trace(AB) = sum_ij A_ij B_ji.
    assert result["sum"] == pytest.approx(a.sum(axis=0) @ b.sum(axis=1), rel=1e-9)
    assert result["trace"] == pytest.approx(np.einsum("ij,ji->", a, b), rel=1e-9)


def test_linpack():
    args, result = run_a("linpack")
    assert result["max_error"] < 1e-6  # the exact solution is all ones
    assert result["residual"] < 1e-8
    assert result["mflops"] > 0


def test_image_processing():
    from PIL import Image

    args, result = run_a("image_processing")
    module = load("image_processing")
    w, h = args["width"], args["height"]
    jpeg = module.generate_jpeg(w, h, args["seed"])
    assert jpeg[:2] == b"\xff\xd8" and result["input_sha256"] == hashlib.sha256(jpeg).hexdigest()
    outputs = module.process(jpeg)
    assert set(outputs) == set(result["outputs"])
    scale = 128 / max(w, h)
    expected = {
        "flip-left-right": (w, h),
        "flip-top-bottom": (w, h),
        "rotate-90": (h, w),
        "rotate-180": (w, h),
        "rotate-270": (h, w),
        "blur": (w, h),
        "contour": (w, h),
        "sharpen": (w, h),
        "gray-scale": (w, h),
        "resized": (round(w * scale), round(h * scale)),
    }
    for name, (width, height, mode, data) in outputs.items():
        with Image.open(io.BytesIO(data)) as decoded:
            assert decoded.format == "JPEG" and decoded.size == expected[name] == (width, height)
            assert decoded.mode == ("L" if name == "gray-scale" else "RGB") == mode
        assert result["outputs"][name]["bytes"] > 0

    # The outputs really are the operations: compare with numpy's view of the decoded input
    # (JPEG re-encoding is lossy, so by mean absolute difference).
    def pixels(data, mode="RGB"):
        with Image.open(io.BytesIO(data)) as decoded:
            return np.asarray(decoded.convert(mode), dtype=np.float64)

    source = pixels(jpeg)
    grey = source @ np.array([0.299, 0.587, 0.114])
    for name, reference in [
        ("flip-left-right", source[:, ::-1]),
        ("flip-top-bottom", source[::-1]),
        ("rotate-90", np.rot90(source)),
        ("rotate-180", np.rot90(source, 2)),
        ("rotate-270", np.rot90(source, 3)),
        ("gray-scale", grey),
    ]:
        out = pixels(outputs[name][3], "L" if name == "gray-scale" else "RGB")
        assert np.abs(out - reference).mean() < 4, name


def test_chameleon():
    args, result = run_a("chameleon")
    rows, cols = args["rows"], args["cols"]
    cells = "".join('<td>\n<span class="column-%d">%d</span>\n</td>\n' % (c + 1, c + 1) for c in range(cols))
    expected = '<table xmlns="http://www.w3.org/1999/xhtml">\n%s</table>' % (("<tr>\n%s</tr>\n" % cells) * rows)
    assert result["html_chars"] == len(expected)
    assert result["html_sha256"] == hashlib.sha256(expected.encode()).hexdigest()


def test_pyaes():
    import pyaes

    # FIPS-197 appendix C.1 known answer for the block cipher itself.
    block = pyaes.AES(bytes(range(16))).encrypt(list(bytes.fromhex("00112233445566778899aabbccddeeff")))
    assert bytes(block).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    args, result = run_a("pyaes")
    module = load("pyaes")
    assert result["roundtrip_ok"] is True
    # CTR by hand: keystream block i = AES_K(counter 1 + i, 128-bit big-endian), XORed in.
    message = module.generate(args["length"], args["seed"]).encode()
    assert len(message) == args["length"] and set(message) <= set(module.LETTERS.encode())
    aes = pyaes.AES(module.KEY)
    stream = b"".join(bytes(aes.encrypt(list((1 + i).to_bytes(16, "big")))) for i in range((len(message) + 15) // 16))
    expected = bytes(m ^ k for m, k in zip(message, stream, strict=False))
    assert result["ciphertext_sha256"] == hashlib.sha256(expected).hexdigest()


def test_gzip_compression():
    args, result = run_a("gzip_compression")
    module = load("gzip_compression")
    data = module.generate(args["size_kb"] * 1024, args["seed"])
    assert len(data) == result["size_bytes"] == args["size_kb"] * 1024
    assert result["crc32"] == zlib.crc32(data)
    compressed = module.compress(data)
    assert gzip.decompress(compressed) == data
    assert result["compressed_bytes"] == len(compressed) < len(data) / 2
    assert result["gzip_sha256"] == hashlib.sha256(compressed).hexdigest()


def test_json_dumps_loads():
    args, result = run_a("json_dumps_loads")
    document = load("json_dumps_loads").generate(args["items"], args["seed"])
    pretty = json.dumps(document, indent=4)
    assert result["items"] == args["items"] == len(json.loads(pretty)["items"])
    assert result["output_bytes"] == len(pretty)
    assert result["output_sha256"] == hashlib.sha256(pretty.encode()).hexdigest()


def _bfs_depth(adjacency, start):
    distance = {start: 0}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in adjacency[v]:
                if w not in distance:
                    distance[w] = distance[v] + 1
                    following.append(w)
        frontier = following
    return len(distance), max(distance.values())


def test_graph_bfs():
    args, result = run_a("graph_bfs")
    module = load("graph_bfs")
    graph = module.GRAPH
    assert result["vertices"] == graph.vcount() == module.GRAPH_VERTICES
    rnd = random.Random(args["seed"])
    starts = [module.pareto_index(rnd, module.PARETO_SHAPE, graph.vcount()) for _ in range(args["traversals"])]
    assert [t["start"] for t in result["traversals"]] == starts
    adjacency = graph.get_adjlist()
    for traversal in result["traversals"]:
        assert (traversal["visited"], traversal["depth"]) == _bfs_depth(adjacency, traversal["start"])
    # The graph is the same in every instance: rebuilding from the seed gives the same edges.
    again = module.build_graph(1000, 3, module.GRAPH_SEED)
    assert again.get_edgelist() == module.build_graph(1000, 3, module.GRAPH_SEED).get_edgelist()


def test_pagerank():
    args, result = run_a("pagerank")
    module = load("pagerank")
    assert result["rank_sum"] == pytest.approx(1.0, abs=1e-9)
    graph = module.build_graph(args["size"], args["edges_per_vertex"], args["seed"])
    assert result["vertices"] == graph.vcount() and result["edges"] == graph.ecount()
    # Power iteration on the undirected graph as a reference (every vertex has degree >= 1).
    n = graph.vcount()
    edges = np.array(graph.get_edgelist())
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    degree = np.bincount(src, minlength=n).astype(np.float64)
    rank = np.full(n, 1.0 / n)
    for _ in range(200):
        rank = (1 - module.DAMPING) / n + module.DAMPING * np.bincount(dst, weights=(rank / degree)[src], minlength=n)
    for entry in result["top"]:
        assert entry["rank"] == pytest.approx(rank[entry["vertex"]], rel=1e-6)
    assert [e["vertex"] for e in result["top"]] == list(np.argsort(-rank, kind="stable")[:5])


def test_web_server():
    args, result = run_a("web_server")
    module = load("web_server")
    assert len(module.PAGES) == module.PAGE_COUNT and len(set(module.PAGES)) == module.PAGE_COUNT
    assert all(len(page) >= module.PAGE_BYTES for page in module.PAGES)
    rnd = random.Random(args["seed"])
    served = result["served"]
    assert len(served) == args["requests"]
    total = 0
    for entry in served:
        assert entry["page"] == module.pareto_index(rnd, module.PARETO_SHAPE, module.PAGE_COUNT)
        assert entry["request_id"] == "".join(rnd.choices("0123456789abcdefABCDEF", k=16))
        body = module.PAGES[entry["page"]].replace(module.REQUEST_ID, entry["request_id"]).encode()
        assert ("<header>Request %s</header>" % entry["request_id"]).encode() in body
        assert entry["etag"] == hashlib.sha3_512(body).hexdigest()[:32]
        total += len(body)
    assert total < result["bytes"] < total + 300 * len(served)  # bodies plus HTTP heads


def test_ml_inference():
    args, result = run_a("ml_inference")
    module = load("ml_inference")
    assert result["tokens"] == args["seq_len"] and result["layers"] == module.LAYERS
    assert 60e6 < result["parameters"] < 110e6
    assert 0 < result["pooled_norm"] < math.sqrt(module.HIDDEN)  # tanh outputs
    assert module.main(dict(args))["pooled_head"] == result["pooled_head"]  # deterministic
    ids, mask = module.encode("Hello, world!", 16)
    assert list(ids[:7]) == [module.CLS, *module.tokenize("hello , world !"), module.MASK, module.SEP, module.PAD][:7]
    assert mask.sum() == 7
    hidden, pooled = module.forward(ids, mask)
    # Each hidden state leaves a LayerNorm with unit gain and zero bias.
    assert np.allclose(hidden.mean(axis=-1), 0, atol=1e-4)
    assert np.allclose(hidden.std(axis=-1), 1, atol=1e-3)
    # Padding is masked out: more padding leaves the real tokens' states unchanged.
    ids_long, mask_long = module.encode("Hello, world!", 40)
    hidden_long, pooled_long = module.forward(ids_long, mask_long)
    assert np.allclose(hidden_long[:7], hidden[:7], atol=1e-4)
    assert np.allclose(pooled_long, pooled, atol=1e-4)


def test_ml_inference_attention_matches_per_head_loop():
    module = load("ml_inference")
    layer = module.WEIGHTS["layers"][0]
    x = np.random.default_rng(1).standard_normal((5, module.HIDDEN)).astype(np.float32)
    mask_bias = np.zeros((1, 1, 5), np.float32)
    fast = module._attention(x, layer, mask_bias)
    w, b = layer["qkv"]
    q, k, v = np.split(x @ w + b, 3, axis=1)
    d = module.HIDDEN // module.HEADS
    heads = []
    for h in range(module.HEADS):
        cols = slice(h * d, (h + 1) * d)
        scores = q[:, cols] @ k[:, cols].T / math.sqrt(d)
        probs = np.exp(scores - scores.max(axis=1, keepdims=True))
        heads.append((probs / probs.sum(axis=1, keepdims=True)) @ v[:, cols])
    slow = np.concatenate(heads, axis=1) @ layer["out"][0] + layer["out"][1]
    assert np.allclose(fast, slow, atol=1e-4)


def rss_anon_kb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


def test_memhog_holds_grows_and_shrinks_its_memory():
    module = load("memhog")
    base = rss_anon_kb()
    _, result = run_a("memhog")
    assert result == {"held_mib": 64, "chunks": 4}
    assert rss_anon_kb() - base >= 60 * 1024, "the held pages are written, hence resident"
    assert all(m[:1] == b"\xa5" and m[-1:] == b"\xa5" for m in module._held)
    assert module.main({"hold_mib": 70, "chunk_mib": 4}) == {"held_mib": 70, "chunks": 6}
    assert module.main({"hold_mib": 20}) == {"held_mib": 20, "chunks": 2}
    assert module.main({"hold_mib": 0}) == {"held_mib": 0, "chunks": 0}
    assert rss_anon_kb() - base < 8 * 1024, "unmapped chunks go back to the kernel"


@pytest.mark.parametrize(
    "name,args",
    [
        ("float_operation", {"n": -1}),
        ("matmul", {"n": "big"}),
        ("chameleon", {"rows": 10**6, "cols": 10**6}),
        ("image_processing", {"width": 4096, "height": 4096 + 1}),
        ("ml_inference", {"seq_len": 1000}),
        ("hello", {"name": 5}),
        ("memhog", {"hold_mib": -1}),
        ("memhog", {"hold_mib": 1, "chunk_mib": 0}),
    ],
)
def test_bad_input_is_a_clear_error(name, args):
    with pytest.raises(ValueError):
        load(name).main(args)
