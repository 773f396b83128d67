"""The node API as a real iceboxd serves it, checked against docs/api/openapi.yaml.

Every body is validated against the schema the contract gives for its path, method and
status, strictly: an object may hold no property the contract does not name (unless the schema
says `additionalProperties`), so a field or endpoint the daemon serves but the contract lacks
fails here rather than drifting silently."""

from __future__ import annotations

import copy
import json
import time
import urllib.error
import urllib.request
from base64 import b64encode

import pytest
import yaml
from icebox_bench import paths
from icebox_bench.daemon import Daemon
from icebox_bench.invoke import from_record
from openapi_schema_validator import OAS30Validator

pytestmark = pytest.mark.integration

CONTRACT = paths.REPO_ROOT / "docs" / "api" / "openapi.yaml"


@pytest.fixture(scope="module")
def contract() -> dict:
    return yaml.safe_load(CONTRACT.read_text())


def _resolve(node, spec: dict, strict: bool):
    """The schema with every `$ref` inlined; with `strict`, objects that list properties and
    say nothing of others get `additionalProperties: false`."""
    if isinstance(node, list):
        return [_resolve(x, spec, strict) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _resolve(copy.deepcopy(target), spec, strict)
    out = {k: _resolve(v, spec, strict) for k, v in node.items()}
    if strict and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def response_schema(spec: dict, path: str, method: str, status: int) -> dict:
    operation = spec["paths"][path][method]
    response = operation["responses"].get(str(status))
    assert response is not None, f"the contract has no {status} answer for {method.upper()} {path}"
    response = _resolve(response, spec, strict=True)
    return response["content"]["application/json"]["schema"]


class Api:
    def __init__(self, daemon: Daemon):
        self.base = daemon.apihost
        self.auth = "Basic " + b64encode(daemon.auth.encode()).decode()

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": self.auth, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def check(spec: dict, api: Api, method: str, template: str, path: str, expect: int, body: dict | None = None):
    status, value = api.call(method.upper(), path, body)
    assert status == expect, f"{method.upper()} {path}: {status} {value}"
    OAS30Validator(response_schema(spec, template, method, status)).validate(value)
    return value


@pytest.fixture(scope="module")
def node():
    if not paths.iceboxd_binary().is_file():
        pytest.fail(f"{paths.iceboxd_binary()} is missing: run `make build` first")
    with Daemon(["--prewarm", "none", "--pause-grace", "100ms"]) as d:
        yield d


def test_node_api_answers_as_the_contract_says(contract, node):
    api = Api(node)
    status, _ = api.call(
        "PUT",
        "/api/v1/namespaces/_/actions/contract-hello?overwrite=true",
        {"exec": {"kind": "python:3", "code": "def main(a):\n    return {'n': a.get('n', 0)}\n"}},
    )
    assert status == 200
    for n in range(2):
        status, result = api.call(
            "POST", "/api/v1/namespaces/_/actions/contract-hello?blocking=true&result=true", {"n": n}
        )
        assert (status, result) == (200, {"n": n})

    check(contract, api, "get", "/icebox/v1/health", "/icebox/v1/health", 200)
    instances = check(contract, api, "get", "/icebox/v1/instances", "/icebox/v1/instances", 200)
    (mine,) = [i for i in instances if i["action"].endswith("/contract-hello")]
    iid = mine["id"]
    deadline = time.monotonic() + 20
    while api.call("GET", f"/icebox/v1/instances/{iid}")[1]["state"] != "frozen":
        assert time.monotonic() < deadline, "the instance did not freeze"
        time.sleep(0.05)
    view = check(contract, api, "get", "/icebox/v1/instances/{id}", f"/icebox/v1/instances/{iid}?fresh=true", 200)
    assert "reclaimable" in view and view["reclaim_mode"] == "desiccant"
    check(contract, api, "get", "/icebox/v1/memory", "/icebox/v1/memory", 200)
    check(contract, api, "get", "/icebox/v1/instances/{id}/stats", f"/icebox/v1/instances/{iid}/stats?gc=1", 200)
    report = check(
        contract, api, "post", "/icebox/v1/instances/{id}/reclaim", f"/icebox/v1/instances/{iid}/reclaim", 200
    )
    assert report["instance"] == iid and report["variant"] != "none"

    # Errors: the contract's bodies for them too.
    check(contract, api, "get", "/icebox/v1/instances/{id}", "/icebox/v1/instances/nope", 404)
    check(contract, api, "delete", "/icebox/v1/instances/{id}", "/icebox/v1/instances/nope", 404)
    check(contract, api, "get", "/icebox/v1/snapshots", "/icebox/v1/snapshots", 200)
    check(
        contract, api, "post", "/icebox/v1/snapshots/{namespace}/{name}", "/icebox/v1/snapshots/_/contract-hello", 409
    )
    check(
        contract, api, "delete", "/icebox/v1/snapshots/{namespace}/{name}", "/icebox/v1/snapshots/_/contract-hello", 404
    )
    check(contract, api, "post", "/icebox/v1/instances/{id}/reclaim", "/icebox/v1/instances/nope/reclaim", 404)
    check(
        contract,
        api,
        "post",
        "/icebox/v1/instances/{id}/reclaim",
        f"/icebox/v1/instances/{iid}/reclaim?variant=no-such-variant",
        400,
    )

    # The event stream's payloads: LifecycleEvent, with every kind the daemon emitted here.
    req = urllib.request.Request(
        node.apihost + "/icebox/v1/events?since=0&follow=false", headers={"Authorization": api.auth}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    validator = OAS30Validator(_resolve({"$ref": "#/components/schemas/LifecycleEvent"}, contract, strict=True))
    for event in events:
        validator.validate(event)
    assert {"created", "runtime_ready", "frozen", "reclaimed"} <= {e["kind"] for e in events}

    # An idle instance evicted on request, then gone.
    evicted = check(contract, api, "delete", "/icebox/v1/instances/{id}", f"/icebox/v1/instances/{iid}", 200)
    assert evicted == {"instance": iid, "evicted": True}
    check(contract, api, "get", "/icebox/v1/instances/{id}", f"/icebox/v1/instances/{iid}", 404)


def test_sharing_views_answer_as_the_contract_says(contract, node):
    """An isolate-mode instance: its view carries the runtime's `sharing` account, its stats the
    same object; a bad sharing annotation is the contract's 400."""
    api = Api(node)
    action = "/api/v1/namespaces/{namespace}/actions/{name}"
    code = "function main(p) { return { n: p.n || 0 }; }"
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-iso?overwrite=true",
        200,
        {
            "exec": {"kind": "nodejs:20", "code": code},
            "limits": {"concurrency": 4},
            "annotations": [{"key": "icebox.sharing", "value": "isolate"}],
        },
    )
    status, result = api.call("POST", "/api/v1/namespaces/_/actions/contract-iso?blocking=true&result=true", {"n": 3})
    assert (status, result) == (200, {"n": 3})
    deadline = time.monotonic() + 20
    while True:
        instances = check(contract, api, "get", "/icebox/v1/instances", "/icebox/v1/instances", 200)
        (mine,) = [i for i in instances if i["action"].endswith("/contract-iso")]
        if mine.get("sharing"):
            break
        assert time.monotonic() < deadline, "the instance's sharing account never appeared"
        time.sleep(0.05)
    assert mine["sharing_mode"] == "isolate" and mine["sharing"]["capacity"] == 4
    check(contract, api, "get", "/icebox/v1/instances/{id}", f"/icebox/v1/instances/{mine['id']}", 200)
    stats = check(
        contract, api, "get", "/icebox/v1/instances/{id}/stats", f"/icebox/v1/instances/{mine['id']}/stats", 200
    )
    assert stats["sharing"]["mode"] == "isolate"
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-bad?overwrite=true",
        400,
        {
            "exec": {"kind": "python:3", "code": "def main(a):\n    return a\n"},
            "annotations": [{"key": "icebox.sharing", "value": "isolate"}],
        },
    )


def test_snapshot_views_answer_as_the_contract_says(contract, node):
    """A snapshotted action: the list while building and once ready, a build request, a restored
    instance's view (restored, restore_stats), the discard."""
    api = Api(node)
    action = "/api/v1/namespaces/{namespace}/actions/{name}"
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-snap?overwrite=true",
        200,
        {
            "exec": {"kind": "python:3", "code": "def main(a):\n    return {'ok': True}\n"},
            "annotations": [{"key": "icebox.snapshot", "value": True}],
        },
    )
    deadline = time.monotonic() + 60
    while True:
        views = check(contract, api, "get", "/icebox/v1/snapshots", "/icebox/v1/snapshots", 200)
        mine = [v for v in views if v["action"].endswith("/contract-snap")]
        if mine and mine[0]["state"] == "ready":
            break
        assert time.monotonic() < deadline, f"the snapshot never became ready: {mine}"
        time.sleep(0.1)
    check(contract, api, "post", "/icebox/v1/snapshots/{namespace}/{name}", "/icebox/v1/snapshots/_/contract-snap", 202)
    status, record = api.call("POST", "/api/v1/namespaces/_/actions/contract-snap?blocking=true", {})
    assert status == 200 and record["response"]["success"], record
    restored = {a["key"]: a["value"] for a in record["annotations"]}
    assert restored.get("icebox.restore") == "record", record
    view = check(
        contract, api, "get", "/icebox/v1/instances/{id}", f"/icebox/v1/instances/{restored['icebox.instance']}", 200
    )
    assert view["restored"] == "record" and isinstance(view.get("restore_stats"), dict), view
    check(
        contract, api, "delete", "/icebox/v1/snapshots/{namespace}/{name}", "/icebox/v1/snapshots/_/contract-snap", 200
    )
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-badsnap?overwrite=true",
        400,
        {
            "exec": {"kind": "python:3", "code": "def main(a):\n    return a\n"},
            "annotations": [{"key": "icebox.snapshot", "value": "always"}],
        },
    )


def test_openwhisk_api_answers_as_the_contract_says(contract, node):
    api = Api(node)
    actions = "/api/v1/namespaces/{namespace}/actions"
    action = actions + "/{name}"
    activation = "/api/v1/namespaces/{namespace}/activations/{activationId}"
    code = (
        "def main(a):\n    print('hello', a.get('name'))\n    return {'greeting': 'hello ' + a.get('name', 'world')}\n"
    )
    put = check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-ow?overwrite=true",
        200,
        {"exec": {"kind": "python:3", "code": code}, "limits": {"memory": 128}},
    )
    assert put["name"] == "contract-ow"
    check(contract, api, "get", action, "/api/v1/namespaces/_/actions/contract-ow", 200)
    listed = check(contract, api, "get", actions, "/api/v1/namespaces/_/actions", 200)
    assert any(a["name"] == "contract-ow" for a in listed)

    record = check(
        contract, api, "post", action, "/api/v1/namespaces/_/actions/contract-ow?blocking=true", 200, {"name": "a"}
    )
    assert record["response"]["result"] == {"greeting": "hello a"}
    result = check(
        contract,
        api,
        "post",
        action,
        "/api/v1/namespaces/_/actions/contract-ow?blocking=true&result=true",
        200,
        {"name": "b"},
    )
    assert result == {"greeting": "hello b"}
    accepted = check(contract, api, "post", action, "/api/v1/namespaces/_/actions/contract-ow", 202, {"name": "c"})

    aid = record["activationId"]
    check(contract, api, "get", activation, f"/api/v1/namespaces/_/activations/{aid}", 200)
    check(contract, api, "get", activation + "/result", f"/api/v1/namespaces/_/activations/{aid}/result", 200)
    logs = check(contract, api, "get", activation + "/logs", f"/api/v1/namespaces/_/activations/{aid}/logs", 200)
    assert any("hello a" in line for line in logs["logs"])
    deadline = time.monotonic() + 30
    while api.call("GET", f"/api/v1/namespaces/_/activations/{accepted['activationId']}")[0] != 200:
        assert time.monotonic() < deadline, "the non-blocking activation was never recorded"
        time.sleep(0.05)
    listed = check(
        contract,
        api,
        "get",
        "/api/v1/namespaces/{namespace}/activations",
        "/api/v1/namespaces/_/activations?limit=5",
        200,
    )
    assert listed

    # A failed activation's record carries its machine-readable kind, which the harness reads.
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-fails?overwrite=true",
        200,
        {"exec": {"kind": "python:3", "code": "def main(a):\n    return {'error': 'no'}\n"}, "limits": {"memory": 128}},
    )
    failed = check(contract, api, "post", action, "/api/v1/namespaces/_/actions/contract-fails?blocking=true", 502, {})
    assert {"key": "icebox.error", "value": "application_error"} in failed["annotations"]
    fields = from_record(failed)
    assert fields["status"] == "application_error" and fields["error_kind"] == "application_error"
    assert not any(a["key"] == "icebox.error" for a in record["annotations"])

    # Errors, with the contract's bodies.
    check(contract, api, "get", action, "/api/v1/namespaces/_/actions/no-such-action", 404)
    check(contract, api, "post", action, "/api/v1/namespaces/_/actions/no-such-action?blocking=true", 404, {})
    check(
        contract,
        api,
        "put",
        action,
        "/api/v1/namespaces/_/actions/contract-bad",
        400,
        {"exec": {"kind": "python:2", "code": code}},
    )
    check(contract, api, "get", activation, "/api/v1/namespaces/_/activations/0123456789abcdef0123456789abcdef", 404)
    check(contract, api, "delete", action, "/api/v1/namespaces/_/actions/contract-ow", 200)
