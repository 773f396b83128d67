"""In-process checks of the proxy's JSON codec and HTTP parser (no subprocess)."""

import json
import os
import sys

import pytest
from python_proxy_harness import RUNTIME_DIR

sys.path.insert(0, RUNTIME_DIR)
from icebox_proxy import jsoncodec  # noqa: E402
from icebox_proxy.httpwire import HttpError, RequestParser  # noqa: E402

DOCUMENTS = [
    '{"a": 1, "b": [1.5, -2e10, true, false, null], "c": {"d": "\\u00e9\\n"}}',
    '  {"nested": [[[]], {}]}\r\n',
    '{"big": 123456789012345678901234567890, "neg": -0.0}',
    b'{"bytes": "\xc3\xa9"}',
    b'\xef\xbb\xbf{"bom": 1}',
    '{"inf": Infinity, "nan": NaN}',
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_loads_matches_json(document):
    mine = jsoncodec.loads(document)
    reference = json.loads(document)
    assert json.dumps(mine, sort_keys=True) == json.dumps(reference, sort_keys=True)


@pytest.mark.parametrize("document", ['{"a": }', '{"a": 1} x', "", "[1,", b"\xff\xfe{"])
def test_loads_rejects_like_json(document):
    with pytest.raises(ValueError):
        jsoncodec.loads(document)


def test_dumps_round_trips_and_is_valid_utf8():
    value = {"s": "h\u00e9 \U0001f600", "n": [1, 2.5, None, True], 7: "int key"}
    assert json.loads(jsoncodec.dumps(value).decode("utf-8")) == json.loads(json.dumps(value))
    lone = jsoncodec.dumps({"x": "\ud800"})
    assert json.loads(lone.decode("utf-8")) == {"x": "\ud800"}


def test_dumps_rejects_what_json_rejects():
    with pytest.raises(TypeError):
        jsoncodec.dumps({"x": object()})
    with pytest.raises(ValueError):
        jsoncodec.dumps({"x": float("inf")})
    cyclic = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError):
        jsoncodec.dumps(cyclic)


def test_parser_handles_byte_by_byte_delivery():
    raw = b"POST /run?x=1&gc=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}GET /icebox/stats HTTP/1.0\r\n\r\n"
    parser = RequestParser()
    requests = []
    for i in range(len(raw)):
        parser.feed(raw[i : i + 1])
        request = parser.next_request()
        while request is not None:
            requests.append(request)
            request = parser.next_request()
    assert [(r.method, r.path, r.body, r.keep_alive) for r in requests] == [
        ("POST", "/run", b"{}", True),
        ("GET", "/icebox/stats", b"", False),
    ]
    assert requests[0].query_param("gc") == "1"
    assert requests[0].query_param("y") is None


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET /\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET / HTTP/1.1\r\n folded\r\n\r\n",
    ],
)
def test_parser_rejects_bad_framing(raw):
    parser = RequestParser()
    parser.feed(raw)
    with pytest.raises(HttpError):
        parser.next_request()


def test_parser_limits_head_size():
    parser = RequestParser()
    parser.feed(b"GET / HTTP/1.1\r\nX: " + b"a" * (70 * 1024))
    with pytest.raises(HttpError) as info:
        parser.next_request()
    assert info.value.status == 431


def test_runtime_json_launch_contract():
    with open(os.path.join(RUNTIME_DIR, "runtime.json")) as spec:
        runtime = json.load(spec)
    assert runtime["kind"] == "python:3"
    assert runtime["aliases"] == ["python:default"]
    assert runtime["command"][0] == "/usr/bin/python3"
    assert runtime["command"][-1] == "{runtime_dir}/proxy.py"
