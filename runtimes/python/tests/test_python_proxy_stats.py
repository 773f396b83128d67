"""GET /icebox/stats: heap statistics, and ?gc=1 (full collection + live_bytes)."""

from python_proxy_harness import example_source

TOP_LEVEL = {
    "runtime",
    "heap_used_bytes",
    "heap_committed_bytes",
    "gc_count",
    "gc_time_ms",
    "live_bytes",
    "details",
    "sharing",
}


def _stats(proxy, query=""):
    response = proxy.request("GET", "/icebox/stats" + query)
    assert response.status == 200
    return response.json


def test_stats_document_shape(proxy):
    stats = _stats(proxy)
    assert set(stats) == TOP_LEVEL
    assert stats["runtime"] == "python"
    assert stats["live_bytes"] is None
    assert isinstance(stats["heap_used_bytes"], int) and stats["heap_used_bytes"] > 0
    assert stats["heap_committed_bytes"] >= stats["heap_used_bytes"]
    assert isinstance(stats["gc_count"], int)
    assert isinstance(stats["gc_time_ms"], (int, float)) and stats["gc_time_ms"] >= 0
    details = stats["details"]
    assert details["malloc"]["source"] == "mallinfo2"
    pymalloc = details["pymalloc"]
    assert pymalloc["arenas"] >= 1
    assert pymalloc["allocated_bytes"] <= pymalloc["arenas"] * pymalloc["arena_size"]
    assert len(details["gc"]["generations"]) == 3
    assert stats["gc_count"] == sum(g["collections"] for g in details["gc"]["generations"])
    assert details["process"]["rss_bytes"] > 0
    # Stats must not write anything to the activation logs.
    assert proxy.stdout() == "" and proxy.stderr() == ""


def test_gc_query_runs_a_full_collection(proxy):
    before = _stats(proxy)
    after = _stats(proxy, "?gc=1")
    assert isinstance(after["live_bytes"], int) and after["live_bytes"] > 0
    assert after["live_bytes"] == after["heap_used_bytes"]
    generations_before = before["details"]["gc"]["generations"]
    generations_after = after["details"]["gc"]["generations"]
    assert generations_after[2]["collections"] == generations_before[2]["collections"] + 1
    assert after["gc_count"] > before["gc_count"]


def test_gc_frees_garbage_left_by_alloc_example(proxy):
    assert proxy.init(example_source("alloc.py")).status == 200
    result = proxy.run({"mb": 16})
    assert result.status == 200
    assert result.json["allocated_bytes"] >= 16 * 1024 * 1024
    with_garbage = _stats(proxy)
    collected = _stats(proxy, "?gc=1")
    # Young-generation collections may already have freed the last few nodes; the bulk of
    # them (old, cyclic) is garbage until the full collection requested here.
    assert collected["details"]["gc"]["collected_by_request"] >= result.json["nodes"] // 2
    freed = with_garbage["heap_used_bytes"] - collected["live_bytes"]
    assert freed >= 8 * 1024 * 1024, (with_garbage["heap_used_bytes"], collected["live_bytes"])


def test_alloc_example_rejects_bad_size(proxy):
    assert proxy.init(example_source("alloc.py")).status == 200
    response = proxy.run({"mb": "lots"})
    assert response.status == 502
    assert "mb" in response.json["error"]
