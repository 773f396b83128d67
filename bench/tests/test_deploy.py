"""deploy/: every Kubernetes manifest parses, the DaemonSet starts each iceboxd as a cluster
node of the etcd StatefulSet, and the haproxy example balances round robin with the health
check (and passes `haproxy -c` where haproxy is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml
from icebox_bench import paths

DEPLOY = paths.REPO_ROOT / "deploy"


def documents() -> list[dict]:
    docs = []
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                assert isinstance(doc, dict) and "kind" in doc and "apiVersion" in doc, path
                docs.append(doc)
    return docs


def one(kind: str, name: str) -> dict:
    found = [d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def flags(args: list[str]) -> dict[str, str]:
    out = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        assert sep, f"{arg}: write flags as --name=value"
        out[key] = value
    return out


def env_source(container: dict, name: str) -> dict:
    entries = [e for e in container.get("env", []) if e["name"] == name]
    assert len(entries) == 1, name
    return entries[0]["valueFrom"]


def test_every_manifest_parses_and_names_its_namespace():
    docs = documents()
    assert {d["kind"] for d in docs} >= {"Namespace", "Service", "StatefulSet", "DaemonSet", "Secret"}
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == "icebox", d["metadata"]["name"]


def test_etcd_is_three_members_behind_a_headless_service():
    sts = one("StatefulSet", "icebox-etcd")
    assert sts["spec"]["replicas"] == 3
    svc = one("Service", sts["spec"]["serviceName"])
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == sts["spec"]["template"]["metadata"]["labels"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    f = flags(container["args"])
    # The initial cluster names exactly the members the StatefulSet creates, by their stable
    # DNS names under the headless service.
    members = dict(m.split("=", 1) for m in f["--initial-cluster"].split(","))
    assert sorted(members) == [f"icebox-etcd-{k}" for k in range(3)]
    for name, url in members.items():
        assert url == f"http://{name}.icebox-etcd.icebox.svc:2380"
    assert env_source(container, "POD_NAME") == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert f["--name"] == "$(POD_NAME)"


def test_the_daemonset_makes_every_node_a_cluster_member():
    ds = one("DaemonSet", "iceboxd")
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    f = flags(container["args"])
    for flag in ("--cluster", "--node-id", "--advertise"):
        assert flag in f, flag
    # --cluster points at the StatefulSet's members, client port.
    sts = one("StatefulSet", "icebox-etcd")
    m = re.fullmatch(r"etcd://(.+)", f["--cluster"])
    assert m
    expected = [f"icebox-etcd-{k}.{sts['spec']['serviceName']}.icebox.svc:2379" for k in range(3)]
    assert m.group(1).split(",") == expected
    # The node id is the Kubernetes node's name, the advertised URL its address and API port.
    assert f["--node-id"] == "$(NODE_NAME)"
    assert env_source(container, "NODE_NAME") == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env_source(container, "HOST_IP") == {"fieldRef": {"fieldPath": "status.hostIP"}}
    port = f["--listen"].rsplit(":", 1)[1]
    assert f["--advertise"] == f"http://$(HOST_IP):{port}"
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert container["securityContext"]["privileged"] is True
    assert {"mountPath": "/sys/fs/cgroup", "name": "cgroup"} in container["volumeMounts"]
    # One key on every node, from the secret (forwards carry the caller's key).
    secret = env_source(container, "ICEBOX_AUTH")["secretKeyRef"]
    assert secret["key"] in one("Secret", secret["name"])["stringData"]
    assert f["--placement"] in ("warm-home", "hash", "round-robin")
    assert container["readinessProbe"]["httpGet"]["path"] == "/icebox/v1/health"


def haproxy_cfg() -> str:
    return (DEPLOY / "haproxy" / "haproxy.cfg").read_text()


def test_haproxy_balances_round_robin_with_the_health_check():
    backend = haproxy_cfg().split("backend icebox_nodes", 1)[1]
    lines = [line.strip() for line in backend.splitlines()]
    assert "balance roundrobin" in lines
    assert "option httpchk GET /icebox/v1/health" in lines
    assert sum(1 for line in lines if line.startswith("server ")) == 3


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy is not installed (scripts/setup.sh)")
def test_haproxy_accepts_the_example():
    done = subprocess.run(
        ["haproxy", "-c", "-f", str(DEPLOY / "haproxy" / "haproxy.cfg")], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr
