"""/init and /run semantics of docs/runtime-protocol.md."""

from python_proxy_harness import example_source

ECHO = """
def main(args):
    return args.get("ret")
"""


def test_init_and_run_hello(proxy):
    response = proxy.init(example_source("hello.py"))
    assert response.status == 200
    assert response.json == {"ok": True}
    response = proxy.run({"name": "Ada"})
    assert response.status == 200
    assert response.json == {"greeting": "Hello, Ada!"}
    assert response.headers["Content-Type"] == "application/json"
    assert proxy.run({}).json == {"greeting": "Hello, stranger!"}


def test_second_init_is_forbidden(proxy):
    assert proxy.init(example_source("hello.py")).status == 200
    response = proxy.init("def main(args):\n    return {'other': True}\n")
    assert response.status == 403
    assert response.json == {"error": "Internal error. Cannot initialize the action more than once."}
    assert proxy.run({"name": "x"}).json == {"greeting": "Hello, x!"}


def test_run_before_init_is_forbidden(proxy):
    response = proxy.run({"name": "x"})
    assert response.status == 403
    assert response.json == {"error": "Cannot invoke an uninitialized action."}


def test_exception_gives_502_and_proxy_lives_on(proxy):
    code = """
def main(args):
    if args.get("fail"):
        return 1 / 0
    return {"fine": True}
"""
    assert proxy.init(code).status == 200
    response = proxy.run({"fail": True})
    assert response.status == 502
    assert response.json == {"error": "ZeroDivisionError: division by zero"}
    assert "Traceback" in proxy.stderr()
    response = proxy.run({})
    assert response.status == 200
    assert response.json == {"fine": True}


def test_custom_exception_type_and_sys_exit(proxy):
    code = """
import sys

class QuotaError(Exception):
    pass

def main(args):
    if args.get("exit"):
        sys.exit(3)
    if args.get("json"):
        import json
        json.loads("{")
    raise QuotaError("over quota")
"""
    assert proxy.init(code).status == 200
    response = proxy.run({})
    assert response.status == 502
    assert response.json == {"error": "QuotaError: over quota"}
    response = proxy.run({"json": True})
    assert response.status == 502
    assert response.json["error"].startswith("json.decoder.JSONDecodeError: Expecting")
    response = proxy.run({"exit": True})
    assert response.status == 502
    assert response.json == {"error": "SystemExit: 3"}
    assert proxy.process.poll() is None


def test_non_dict_results_give_502(proxy):
    assert proxy.init(ECHO).status == 200
    for value in (42, [1, 2], "text", None, True):
        response = proxy.run({"ret": value})
        assert response.status == 502, value
        assert response.json == {"error": "The action did not return a dictionary."}
    assert proxy.run({"ret": {"a": [1, "b"]}}).json == {"a": [1, "b"]}


def test_returned_error_object_is_passed_through_with_502(proxy):
    assert proxy.init(ECHO).status == 200
    response = proxy.run({"ret": {"error": "bad input", "code": 7}})
    assert response.status == 502
    assert response.json == {"error": "bad input", "code": 7}


def test_unserializable_result_gives_502(proxy):
    code = """
def main(args):
    return {"values": {1, 2}} if args.get("set") else {"x": float("nan")}
"""
    assert proxy.init(code).status == 200
    response = proxy.run({"set": True})
    assert response.status == 502
    assert "not JSON serializable" in response.json["error"]
    response = proxy.run({})
    assert response.status == 502
    assert "JSON" in response.json["error"]


def test_unicode_round_trip(proxy):
    assert proxy.init(ECHO).status == 200
    value = {"text": "h\u00e9llo \u4e16\u754c \U0001f600", "lone": "\ud800"}
    response = proxy.run({"ret": value})
    assert response.status == 200
    assert response.json == value


def test_syntax_error_at_init_then_a_valid_init(proxy):
    response = proxy.init("def main(args):\n    return {'a': 1\n\nx = = 2\n")
    assert response.status == 502
    error = response.json["error"]
    assert error.startswith("Cannot load the action: SyntaxError:")
    assert "line" in error
    assert proxy.action_dirs() == []
    # The failed load left nothing behind: a corrected /init succeeds.
    assert proxy.init(example_source("hello.py")).status == 200
    assert proxy.run({"name": "B"}).json == {"greeting": "Hello, B!"}


def test_exception_while_loading_is_located(proxy):
    response = proxy.init("import os\n\nvalue = 1 / 0\n\ndef main(args):\n    return {}\n")
    assert response.status == 502
    assert response.json["error"] == (
        "Cannot load the action: ZeroDivisionError: division by zero (at __main__.py, line 3)"
    )


def test_missing_main_gives_502(proxy):
    response = proxy.init("def handler(args):\n    return {}\n")
    assert response.status == 502
    assert response.json == {"error": "The action has no function named 'main'."}
    response = proxy.init("main = 3\n")
    assert response.status == 502
    assert "'main' is not a function" in response.json["error"]
    response = proxy.init("def main(args):\n    return {}\n", main="nothere")
    assert response.status == 502
    assert response.json == {"error": "The action has no function named 'nothere'."}


def test_main_may_name_another_function(proxy):
    code = "def main(args):\n    return {'from': 'main'}\n\ndef handler(args):\n    return {'from': 'handler'}\n"
    assert proxy.init(code, main="handler").status == 200
    assert proxy.run({}).json == {"from": "handler"}


def test_missing_code_gives_502(proxy):
    response = proxy.request("POST", "/init", {"value": {"name": "x", "main": "main"}})
    assert response.status == 502
    assert "no action code" in response.json["error"]


def test_init_env_is_visible_to_code_and_activations(proxy):
    code = """
import os
AT_LOAD = os.environ.get("GREETING")

def main(args):
    return {"at_load": AT_LOAD, "now": os.environ.get("GREETING"),
            "number": os.environ.get("NUMBER")}
"""
    assert proxy.init(code, env={"GREETING": "hi", "NUMBER": 5}).status == 200
    assert proxy.run({}).json == {"at_load": "hi", "now": "hi", "number": "5"}


def test_failed_init_rolls_back_env(proxy):
    code = "import os\nraise RuntimeError('nope')\n"
    assert proxy.init(code, env={"LEFTOVER": "yes"}).status == 502
    probe = "import os\n\ndef main(args):\n    return {'v': os.environ.get('LEFTOVER')}\n"
    assert proxy.init(probe).status == 200
    assert proxy.run({}).json == {"v": None}


def test_malformed_json_as_the_first_request_gives_400(proxy):
    # Before anything has imported json.decoder (CPython 3.11's C scanner needs it).
    response = proxy.request("POST", "/init", raw=b"{not json}")
    assert response.status == 400
    assert "Malformed JSON" in response.json["error"]


def test_malformed_json_gives_400_and_proxy_lives_on(proxy):
    response = proxy.request("POST", "/init", raw=b'{"value": {"code": ')
    assert response.status == 400
    assert "Malformed JSON" in response.json["error"]
    assert proxy.request("POST", "/init", raw=b"[1, 2]").status == 400
    assert proxy.init(example_source("hello.py")).status == 200
    response = proxy.request("POST", "/run", raw=b"{not json}")
    assert response.status == 400
    assert "error" in response.json
    assert proxy.request("POST", "/run", body={"value": [1]}).status == 400
    assert proxy.run({"name": "still"}).json == {"greeting": "Hello, still!"}


def test_unknown_path_and_wrong_method(proxy):
    response = proxy.request("GET", "/nope")
    assert response.status == 404
    assert "error" in response.json
    response = proxy.request("GET", "/run")
    assert response.status == 405
    assert response.headers["Allow"] == "POST"
    assert "error" in response.json
    assert proxy.request("POST", "/icebox/stats").status == 405
