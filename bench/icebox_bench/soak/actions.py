"""The actions the soak deploys: the repository's examples (Python and Node.js), plus a short
sleep in each language so that kills also land in the middle of activations."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import paths

SLEEP_PY = """import time


def main(args):
    time.sleep(args.get("ms", 50) / 1000.0)
    return {"slept_ms": args.get("ms", 50)}
"""

SLEEP_JS = """function main(params) {
  const ms = params.ms || 50;
  return new Promise((resolve) => setTimeout(() => resolve({ slept_ms: ms }), ms));
}
"""


@dataclass(frozen=True)
class SoakAction:
    name: str
    kind: str
    source: str  # an examples/ path, or "inline"
    weight: int
    params: dict = field(default_factory=dict)
    inline: str = ""
    # Runtime sharing (docs/isolates.md): concurrent activations in one instance, so a kill
    # takes several activations with it and a killed isolate must fail only its own.
    sharing: str = "process"
    concurrency: int = 1
    # Isolate mode's engine (None: the daemon's default, v8).
    engine: str | None = None

    def code(self) -> str:
        return self.inline or (paths.REPO_ROOT / self.source).read_text()

    def put_body(self) -> dict:
        body: dict = {"exec": {"kind": self.kind, "code": self.code()}}
        if self.concurrency > 1:
            body["limits"] = {"concurrency": self.concurrency}
        if self.sharing != "process":
            body["annotations"] = [{"key": "icebox.sharing", "value": self.sharing}]
        if self.engine is not None:
            body["annotations"].append({"key": "icebox.isolate_engine", "value": self.engine})
        return body

    def path(self) -> str:
        return f"/api/v1/namespaces/_/actions/{self.name}"


SOAK_ACTIONS = (
    SoakAction("soak-hello-py", "python:3", "examples/python/hello.py", 3, {"name": "soak"}),
    SoakAction("soak-hello-js", "nodejs:20", "examples/nodejs/hello.js", 3, {"name": "soak"}),
    SoakAction("soak-alloc-py", "python:3", "examples/python/alloc.py", 1, {"mb": 8}),
    SoakAction("soak-alloc-js", "nodejs:20", "examples/nodejs/alloc.js", 1, {"mb": 8}),
    SoakAction("soak-sleep-py", "python:3", "inline", 1, {"ms": 50}, SLEEP_PY),
    SoakAction("soak-sleep-js", "nodejs:20", "inline", 1, {"ms": 50}, SLEEP_JS),
    SoakAction(
        "soak-sleep-js-isolate", "nodejs:20", "inline", 1, {"ms": 50}, SLEEP_JS, sharing="isolate", concurrency=8
    ),
    # alloc.js measures its heap with Node's v8 module, which only the worker engine has.
    SoakAction(
        "soak-alloc-js-isolate",
        "nodejs:20",
        "examples/nodejs/alloc.js",
        1,
        {"mb": 8},
        sharing="isolate",
        concurrency=8,
        engine="worker",
    ),
    SoakAction("soak-sleep-js-shared", "nodejs:20", "inline", 1, {"ms": 50}, SLEEP_JS, sharing="shared", concurrency=8),
    SoakAction("soak-sleep-py-shared", "python:3", "inline", 1, {"ms": 50}, SLEEP_PY, sharing="shared", concurrency=8),
)
