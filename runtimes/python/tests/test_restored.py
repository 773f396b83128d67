"""POST /icebox/restored: reseeding after a snapshot restore and the action's icebox_restored()
hook (docs/runtime-protocol.md)."""

import random

import pytest
from python_proxy_harness import SENTINEL

SEED_A = "a1" * 32
SEED_B = "b2" * 32

RANDOM_ACTION = """
import random

def main(args):
    return {"numbers": [random.random() for _ in range(5)]}
"""

# The hook counts its calls and sets what main returns, as an action refreshing its state would.
HOOK_ACTION = """
import random

STATE = {"restored": 0, "generator": None}

def icebox_restored():
    print("hook ran")
    STATE["restored"] += 1
    STATE["generator"] = random.Random(7).random()

def main(args):
    return dict(STATE)
"""

FAILING_HOOK_ACTION = """
def icebox_restored():
    raise ConnectionError("cannot reconnect to the database")

def main(args):
    return {"served": True}
"""


_NO_ENV = object()


def restored(proxy, seed=SEED_A, instance="inst-1", env=_NO_ENV):
    body = {"instance": instance, "seed": seed}
    if env is not _NO_ENV:
        body["env"] = env
    return proxy.request("POST", "/icebox/restored", body)


def numbers(proxy):
    response = proxy.run({})
    assert response.status == 200, response
    return response.json["numbers"]


def expected_numbers(seed_hex, count=5):
    generator = random.Random(int.from_bytes(bytes.fromhex(seed_hex), "big"))
    return [generator.random() for _ in range(count)]


def test_same_seed_same_sequence_different_seed_different(start_proxy):
    first, second, third = start_proxy(), start_proxy(), start_proxy()
    for proxy in (first, second, third):
        assert proxy.init(RANDOM_ACTION).status == 200
    replies = [restored(first, SEED_A, "one"), restored(second, SEED_A, "two"), restored(third, SEED_B, "three")]
    for reply in replies:
        assert reply.status == 200, reply
        assert reply.json == {"ok": True, "reseeded": ["random"], "hook": False, "env": []}
    assert numbers(first) == numbers(second) == expected_numbers(SEED_A)
    assert numbers(third) != expected_numbers(SEED_A)


def test_reseeding_again_restarts_the_sequence(proxy):
    assert proxy.init(RANDOM_ACTION).status == 200
    assert restored(proxy).status == 200
    assert numbers(proxy) == expected_numbers(SEED_A)
    assert numbers(proxy) != expected_numbers(SEED_A)
    assert restored(proxy).status == 200
    assert numbers(proxy) == expected_numbers(SEED_A)


def test_hook_runs_after_reseeding_and_on_every_call(proxy):
    assert proxy.init(HOOK_ACTION).status == 200
    assert proxy.run({}).json == {"restored": 0, "generator": None}
    reply = restored(proxy)
    assert reply.status == 200
    assert reply.json == {"ok": True, "reseeded": ["random"], "hook": True, "env": []}
    assert proxy.run({}).json == {"restored": 1, "generator": random.Random(7).random()}
    assert restored(proxy).json["hook"] is True
    assert proxy.run({}).json["restored"] == 2


def test_hook_output_goes_to_the_next_activation_log(proxy):
    assert proxy.init(HOOK_ACTION).status == 200
    assert restored(proxy).status == 200
    # Not an activation: no sentinel of its own.
    assert SENTINEL not in proxy.stdout() + proxy.stderr()
    assert proxy.run({}).status == 200
    assert proxy.stdout() == "hook ran\n%s\n" % SENTINEL


def test_throwing_hook_is_502_and_the_proxy_serves_on(proxy):
    assert proxy.init(FAILING_HOOK_ACTION).status == 200
    reply = restored(proxy)
    assert reply.status == 502
    assert reply.json == {"error": "ConnectionError: cannot reconnect to the database"}
    assert "Traceback" in proxy.stderr()
    assert proxy.run({}).json == {"served": True}


def test_hook_that_is_not_a_function_is_502(proxy):
    assert proxy.init("icebox_restored = 3\n\ndef main(args):\n    return {}\n").status == 200
    reply = restored(proxy)
    assert reply.status == 502
    assert reply.json == {"error": "The action's 'icebox_restored' is not a function (it is a int)."}


def test_only_generators_in_use_are_reseeded(proxy):
    assert proxy.init("def main(args):\n    return {}\n").status == 200
    assert restored(proxy).json == {"ok": True, "reseeded": [], "hook": False, "env": []}


def test_tempfile_names_and_openssl(proxy):
    code = """
import ssl
import tempfile

BEFORE = tempfile._get_candidate_names()
next(BEFORE)

def main(args):
    return {"new_name_sequence": tempfile._get_candidate_names() is not BEFORE}
"""
    assert proxy.init(code).status == 200
    reply = restored(proxy)
    assert reply.status == 200
    assert reply.json["reseeded"] == ["random", "tempfile", "openssl"]
    assert proxy.run({}).json == {"new_name_sequence": True}


def test_before_init_is_forbidden(proxy):
    reply = restored(proxy)
    assert reply.status == 403
    assert reply.json == {
        "error": "Cannot restore an uninitialized action: /icebox/restored needs a successful /init first."
    }


@pytest.mark.parametrize(
    "body, complaint",
    [
        (b"{not json", "Malformed JSON body"),
        (b"[]", "must be a JSON object"),
        (b'{"seed": "%s"}' % (b"a1" * 32), '"instance"'),
        (b'{"instance": "", "seed": "%s"}' % (b"a1" * 32), '"instance"'),
        (b'{"instance": "i"}', "must be 64 hex digits"),
        (b'{"instance": "i", "seed": "abcd"}', "got 'abcd'"),
        (b'{"instance": "i", "seed": "%s"}' % (b"zz" * 32), "must be 64 hex digits"),
        (b'{"instance": "i", "seed": 12}', "got 'int'"),
    ],
)
def test_malformed_body_is_400_and_the_proxy_serves_on(proxy, body, complaint):
    assert proxy.init(RANDOM_ACTION).status == 200
    reply = proxy.request("POST", "/icebox/restored", raw=body)
    assert reply.status == 400
    assert complaint in reply.json["error"]
    assert proxy.run({}).status == 200
    assert restored(proxy).status == 200


def test_wrong_method_is_405(proxy):
    reply = proxy.request("GET", "/icebox/restored")
    assert reply.status == 405
    assert reply.headers["Allow"] == "POST"


def test_shared_mode_reseeds_and_calls_the_one_module_hook_once(start_proxy):
    code = """
import random

RESTORED = []

def icebox_restored():
    RESTORED.append(True)

def main(args):
    return {"restored": len(RESTORED), "numbers": [random.random() for _ in range(5)]}
"""
    proxies = [start_proxy(concurrency=2, extra_env={"ICEBOX_SHARING": "shared"}) for _ in range(2)]
    for proxy in proxies:
        assert proxy.init(code).status == 200
        # Threads of one interpreter share its modules: one copy of the action, one hook call.
        assert restored(proxy).json == {"ok": True, "reseeded": ["random"], "hook": True, "env": []}
    first, second = (proxy.run({}).json for proxy in proxies)
    assert first == second == {"restored": 1, "numbers": expected_numbers(SEED_A)}


# The environment of the template, as iceboxd started it before the snapshot.
OLD_API_HOST = {"__OW_API_HOST": "http://10.0.0.1:3233"}
NEW_API_HOST = "http://10.0.0.1:4100"

# The hook records the value it sees and how often it ran; main reports that and what it sees
# itself, through each way an action reads the environment.
ENV_HOOK_ACTION = """
import os
import random
import subprocess
from os import environ

SEEN = {"hook": None, "hook_calls": 0}

def icebox_restored():
    SEEN["hook"] = os.environ.get("__OW_API_HOST")
    SEEN["hook_calls"] += 1

def main(args):
    result = dict(SEEN)
    result["environ"] = os.environ.get("__OW_API_HOST")
    result["getenv"] = os.getenv("__OW_API_HOST")
    result["module_environ"] = environ.get("__OW_API_HOST")
    result["activation_id"] = os.environ.get("__OW_ACTIVATION_ID")
    if args.get("more"):
        result["good"] = os.environ.get("GOOD")
        result["random"] = random.random()
    if args.get("child"):
        # A child process inherits the C environment, which putenv changed too.
        result["child"] = subprocess.run(["printenv", "__OW_API_HOST"], capture_output=True,
                                         text=True, check=True).stdout.strip()
    return result
"""


def test_env_is_applied_before_the_hook_and_seen_by_run(start_proxy):
    proxy = start_proxy(extra_env=OLD_API_HOST)
    assert proxy.init(ENV_HOOK_ACTION).status == 200
    before = proxy.run({}).json
    assert before["environ"] == OLD_API_HOST["__OW_API_HOST"]
    reply = restored(proxy, env={"__OW_API_HOST": NEW_API_HOST})
    assert reply.status == 200, reply
    assert reply.json == {"ok": True, "reseeded": ["random"], "hook": True, "env": ["__OW_API_HOST"]}
    seen = proxy.run({"child": True}, activation_id="a1").json
    assert seen == {
        "hook": NEW_API_HOST,
        "hook_calls": 1,
        "environ": NEW_API_HOST,
        "getenv": NEW_API_HOST,
        "module_environ": NEW_API_HOST,
        "activation_id": "a1",
        "child": NEW_API_HOST,
    }


def test_env_absent_or_empty_changes_nothing(start_proxy):
    proxy = start_proxy(extra_env=OLD_API_HOST)
    assert proxy.init(ENV_HOOK_ACTION).status == 200
    assert restored(proxy).json["env"] == []
    assert restored(proxy, env={}).json["env"] == []
    seen = proxy.run({}).json
    assert seen["hook_calls"] == 2
    assert seen["hook"] == seen["environ"] == OLD_API_HOST["__OW_API_HOST"]


def test_env_names_come_back_sorted_and_new_names_are_added(start_proxy):
    proxy = start_proxy(extra_env=OLD_API_HOST)
    assert (
        proxy.init(
            "import os\n\ndef main(args):\n    return {k: os.environ.get(k) for k in ('B_NEW', '__OW_API_HOST')}\n"
        ).status
        == 200
    )
    reply = restored(proxy, env={"__OW_API_HOST": NEW_API_HOST, "B_NEW": ""})
    assert reply.json["env"] == ["B_NEW", "__OW_API_HOST"]
    assert proxy.run({}).json == {"B_NEW": "", "__OW_API_HOST": NEW_API_HOST}


def test_shared_mode_activations_see_the_new_value_beside_their_own(start_proxy):
    proxy = start_proxy(concurrency=2, extra_env=dict(OLD_API_HOST, ICEBOX_SHARING="shared"))
    assert proxy.init(ENV_HOOK_ACTION).status == 200
    # An activation before the restore: its thread has had per-activation values since.
    assert proxy.run({}, activation_id="before").json["environ"] == OLD_API_HOST["__OW_API_HOST"]
    reply = restored(proxy, env={"__OW_API_HOST": NEW_API_HOST})
    assert reply.json == {"ok": True, "reseeded": ["random"], "hook": True, "env": ["__OW_API_HOST"]}
    # Two connections: two server threads, each with its own per-activation view.
    connections = [proxy.connection() for _ in range(2)]
    try:
        for number, connection in enumerate(connections):
            seen = proxy.run_on(connection, {}, activation_id="after-%d" % number).json
            assert seen == {
                "hook": NEW_API_HOST,
                "hook_calls": 1,
                "environ": NEW_API_HOST,
                "getenv": NEW_API_HOST,
                "module_environ": NEW_API_HOST,
                "activation_id": "after-%d" % number,
            }
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.parametrize(
    "env, complaint",
    [
        (
            [["__OW_API_HOST", NEW_API_HOST]],
            "must be an object of environment variable names to string values, got an array",
        ),
        (None, "got null"),
        ("__OW_API_HOST=x", "got a string"),
        ({"__OW_API_HOST": 4100}, "value of __OW_API_HOST must be a string, got a number"),
        ({"__OW_API_HOST": None}, "value of __OW_API_HOST must be a string, got null"),
        # A valid variable beside a bad one: neither is applied.
        ({"__OW_API_HOST": NEW_API_HOST, "GOOD": "x", "A=B": "x"}, "invalid variable name 'A=B'"),
        ({"__OW_API_HOST": NEW_API_HOST, "": "x"}, "invalid variable name ''"),
        ({"__OW_API_HOST": NEW_API_HOST, "N\0UL": "x"}, "invalid variable name"),
        ({"GOOD": "x", "__OW_API_HOST": "a\0b"}, "value of __OW_API_HOST contains a NUL"),
    ],
)
def test_bad_env_is_400_and_applies_nothing(start_proxy, env, complaint):
    proxy = start_proxy(extra_env=OLD_API_HOST)
    assert proxy.init(ENV_HOOK_ACTION).status == 200
    reply = restored(proxy, env=env)
    assert reply.status == 400, reply
    assert '"env"' in reply.json["error"] and complaint in reply.json["error"], reply.json
    # Nothing happened: no variable set (not even the valid ones), no hook call, and `random`
    # was not reseeded (a reseeded generator would start with the seed's first number).
    after = proxy.run({"more": True}).json
    assert after["environ"] == OLD_API_HOST["__OW_API_HOST"]
    assert after["good"] is None
    assert after["hook_calls"] == 0
    assert after["random"] != expected_numbers(SEED_A)[0]
    # The proxy serves on and a correct call still works.
    assert restored(proxy, env={"__OW_API_HOST": NEW_API_HOST}).status == 200
    assert proxy.run({}).json["hook"] == NEW_API_HOST
