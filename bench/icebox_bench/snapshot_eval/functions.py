"""The functions the recipe restores: any of the manifests' (functions/<lang>/functions.json),
plus the repository's Node.js and Java hello examples, which the manifests do not hold
(`nodejs-hello`, `java-hello`; Python's `hello` is a manifest function), and `read-part`,
FaaSnap's synthetic read-list scaled down (read_part.py next to this file)."""

from __future__ import annotations

from pathlib import Path

from .. import manifest, paths

_HELLO_INPUTS = {"A": {"name": "A"}, "B": {"name": "icebox benchmark B"}}
EXAMPLES = {
    "nodejs-hello": manifest.FunctionSpec(
        name="nodejs-hello",
        language="nodejs",
        kind="nodejs:20",
        path=paths.REPO_ROOT / "examples/nodejs/hello.js",
        memory_mb=256,
        timeout_ms=60000,
        inputs=_HELLO_INPUTS,
        description="examples/nodejs/hello.js",
    ),
    "java-hello": manifest.FunctionSpec(
        name="java-hello",
        language="java",
        kind="java:17",
        path=paths.REPO_ROOT / "examples/java/target/icebox-examples.jar",
        main="Hello",
        memory_mb=256,
        timeout_ms=60000,
        inputs=_HELLO_INPUTS,
        description="examples/java Hello (build: mvn -f examples/java/pom.xml package)",
    ),
    "read-part": manifest.FunctionSpec(
        name="read-part",
        language="python",
        kind="python:3",
        path=Path(__file__).with_name("read_part.py"),
        main="main",
        memory_mb=256,
        timeout_ms=60000,
        inputs={"A": {"blocks": 6000}, "B": {"blocks": 8000}},
        paper="FaaSnap (read-list, scaled)",
        description="bench/icebox_bench/snapshot_eval/read_part.py",
    ),
}


def select(selector: str, functions_dir: Path | None) -> list[manifest.FunctionSpec]:
    """A comma list of example names and manifest selectors (names, languages, `all`), in
    order; an example whose file is missing is an error that says how to build it."""
    specs: list[manifest.FunctionSpec] = []
    rest: list[str] = []
    for token in (t.strip() for t in selector.split(",")):
        if token in EXAMPLES:
            spec = EXAMPLES[token]
            if not spec.path.exists():
                raise manifest.ManifestError(f"{token}: {spec.path} is missing ({spec.description})")
            specs.append(spec)
        elif token:
            rest.append(token)
    if rest:
        specs += manifest.select(",".join(rest), manifest.load_all(functions_dir))
    order = [t.strip() for t in selector.split(",")]
    # Keep the order the selector gave (manifest.select keeps its own for sets).
    specs.sort(key=lambda s: order.index(s.name) if s.name in order else len(order))
    return specs
