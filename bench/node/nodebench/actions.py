"""The example actions the benchmarks deploy, and deploying / invoking them through the
OpenWhisk API."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass

from .client import Client
from .daemon import REPO, RUNTIMES

ACTIONS = "/api/v1/namespaces/_/actions/"
JAVA_JAR = REPO / "examples" / "java" / "target" / "icebox-examples.jar"


@dataclass(frozen=True)
class Example:
    """An action's exec: what PUT sends and what a bare proxy's /init gets."""

    lang: str
    kind: str
    code: str
    binary: bool = False
    main: str | None = None

    def exec_json(self) -> dict:
        exec_ = {"kind": self.kind, "code": self.code, "binary": self.binary}
        if self.main:
            exec_["main"] = self.main
        return exec_


def python_hello() -> Example:
    return Example("python", "python:3", (REPO / "examples" / "python" / "hello.py").read_text())


def nodejs_hello() -> Example:
    return Example("nodejs", "nodejs:20", (REPO / "examples" / "nodejs" / "hello.js").read_text())


def java_hello() -> Example:
    """The Java hello jar. The runtime's jar and the example jar are built with Maven when
    missing; raises Unavailable with the reason when Java cannot be measured here."""
    manifest_path = RUNTIMES / "java" / "runtime.json"
    if not manifest_path.is_file():
        raise Unavailable("runtimes/java/runtime.json is missing (the Java runtime is not installed in this tree)")
    runtime_dir = str(RUNTIMES / "java")
    jars = [
        a.replace("{runtime_dir}", runtime_dir)
        for a in json.loads(manifest_path.read_text())["command"]
        if a.endswith(".jar")
    ]
    if not all(os.path.isfile(j) for j in jars):
        _maven_package(RUNTIMES / "java" / "pom.xml")
    if not JAVA_JAR.is_file():
        _maven_package(REPO / "examples" / "java" / "pom.xml")
        if not JAVA_JAR.is_file():
            raise Unavailable(f"{JAVA_JAR.relative_to(REPO)} was not produced by the Maven build")
    code = base64.b64encode(JAVA_JAR.read_bytes()).decode()
    return Example("java", "java:17", code, binary=True, main="Hello")


def _maven_package(pom) -> None:
    if not pom.is_file():
        raise Unavailable(f"{pom.relative_to(REPO)} is missing")
    try:
        done = subprocess.run(
            ["mvn", "-B", "-q", "-f", str(pom), "package", "-DskipTests"], capture_output=True, text=True
        )
    except OSError as e:
        raise Unavailable(f"cannot run Maven: {e}") from e
    if done.returncode != 0:
        raise Unavailable(f"`mvn package` of {pom.relative_to(REPO)} failed: {(done.stdout + done.stderr)[-600:]}")


class Unavailable(RuntimeError):
    """A runtime cannot be measured here; the report says why instead of a number."""


def deploy(client: Client, name: str, example: Example, limits: dict | None = None, code: str | None = None) -> dict:
    """Create or update (overwrite=true) an action; `code` overrides the example's source."""
    exec_ = example.exec_json()
    if code is not None:
        exec_["code"] = code
    body = {"exec": exec_}
    if limits:
        body["limits"] = limits
    return client.call("PUT", ACTIONS + name + "?overwrite=true", body).json()


def invoke_path(name: str, result_only: bool = True) -> str:
    return ACTIONS + name + ("?blocking=true&result=true" if result_only else "?blocking=true")


def invoke(client: Client, name: str, params: dict | None = None, result_only: bool = True):
    """A blocking invocation that must succeed; returns the result or the activation record."""
    return client.call("POST", invoke_path(name, result_only), params or {}).json()


def annotation(record: dict, key: str):
    for kv in record.get("annotations", []):
        if kv.get("key") == key:
            return kv.get("value")
    return None


def encode(params: dict) -> bytes:
    return json.dumps(params).encode()
