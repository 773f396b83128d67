"""Per-activation environment and the log sentinels."""

from python_proxy_harness import SENTINEL, example_source

ENV_ACTION = """
import os

KEYS = ("NAMESPACE", "ACTION_NAME", "ACTIVATION_ID", "TRANSACTION_ID", "API_KEY", "DEADLINE",
        "ACTION_VERSION")

def main(args):
    return {key: os.environ.get("__OW_" + key) for key in KEYS}
"""

FULL_METADATA = {
    "namespace": "guest",
    "action_name": "/guest/env",
    "activation_id": "a1",
    "transaction_id": "t1",
    "api_key": "key:secret",
    "deadline": "1700000000000",
    "action_version": "0.0.1",
}


def test_ow_environment_is_set_per_activation(proxy):
    assert proxy.init(ENV_ACTION).status == 200
    first = proxy.run({}, **FULL_METADATA).json
    assert first == {
        "NAMESPACE": "guest",
        "ACTION_NAME": "/guest/env",
        "ACTIVATION_ID": "a1",
        "TRANSACTION_ID": "t1",
        "API_KEY": "key:secret",
        "DEADLINE": "1700000000000",
        "ACTION_VERSION": "0.0.1",
    }
    second = proxy.run({}, namespace="other", activation_id="a2", deadline=1700000000001).json
    assert second["NAMESPACE"] == "other"
    assert second["ACTIVATION_ID"] == "a2"
    assert second["DEADLINE"] == "1700000000001"
    # Absent from this activation: not left over from the previous one.
    assert second["API_KEY"] is None
    assert second["TRANSACTION_ID"] is None
    assert second["ACTION_NAME"] is None


def test_nothing_is_printed_before_the_first_run(proxy):
    assert proxy.init(example_source("hello.py")).status == 200
    assert proxy.request("GET", "/icebox/stats").status == 200
    assert proxy.stdout() == ""
    assert proxy.stderr() == ""


def test_sentinel_after_every_activation_on_both_streams(proxy):
    code = """
import sys

def main(args):
    print("out:" + args["tag"])
    print("err:" + args["tag"], file=sys.stderr)
    if args.get("fail"):
        raise ValueError("boom")
    return {"tag": args["tag"]}
"""
    assert proxy.init(code).status == 200
    assert proxy.run({"tag": "one"}).status == 200
    assert proxy.stdout() == "out:one\n" + SENTINEL + "\n"
    assert proxy.stderr() == "err:one\n" + SENTINEL + "\n"

    assert proxy.run({"tag": "two", "fail": True}).status == 502
    stdout = proxy.stdout().splitlines()
    stderr = proxy.stderr().splitlines()
    assert stdout == ["out:one", SENTINEL, "out:two", SENTINEL]
    assert stderr[:3] == ["err:one", SENTINEL, "err:two"]
    assert stderr[-1] == SENTINEL
    assert stderr.count(SENTINEL) == 2
    # The traceback belongs to the failed activation: between its output and its sentinel.
    assert any("ValueError: boom" in line for line in stderr[3:-1])


def test_sentinel_even_when_run_is_rejected(proxy):
    assert proxy.run({}).status == 403
    assert proxy.stdout() == SENTINEL + "\n"
    assert proxy.stderr() == SENTINEL + "\n"


def test_sentinel_follows_output_of_user_replaced_streams(proxy):
    code = """
import io, sys

def main(args):
    sys.stdout = io.StringIO()
    print("swallowed")
    sys.stdout = sys.__stdout__
    print("visible")
    return {}
"""
    assert proxy.init(code).status == 200
    assert proxy.run({}).status == 200
    assert proxy.stdout() == "visible\n" + SENTINEL + "\n"
