"""Manifests, selection and the deployed action body."""

from __future__ import annotations

import base64
import io
import json
import zipfile

import pytest
from icebox_bench import manifest
from icebox_bench.archive import exec_body, zip_directory
from icebox_bench.deploy import action_body


def test_load_and_select(functions_dir):
    specs = manifest.load_all(functions_dir)
    assert [s.name for s in specs] == ["t-hello-js", "t-hello-py", "t-square-py"]
    assert [s.name for s in manifest.select("python", specs)] == ["t-hello-py", "t-square-py"]
    assert len(manifest.select("all", specs)) == 3
    assert [s.name for s in manifest.select("t-square-py, nodejs", specs)] == ["t-square-py", "t-hello-js"]
    with pytest.raises(manifest.ManifestError, match="nope"):
        manifest.select("nope", specs)
    with pytest.raises(manifest.ManifestError, match="java"):
        manifest.select("java", specs)


def test_inputs(functions_dir):
    spec = manifest.select("t-square-py", manifest.load_all(functions_dir))[0]
    assert spec.input("B") == {"n": 1000}
    with pytest.raises(manifest.ManifestError):
        spec.input("C")


def test_bad_manifest(tmp_path):
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "functions.json").write_text(json.dumps([{"name": "x", "language": "python"}]))
    with pytest.raises(manifest.ManifestError, match="kind, path"):
        manifest.load_all(tmp_path)


def test_action_body_for_a_source_file(functions_dir):
    spec = manifest.select("t-hello-py", manifest.load_all(functions_dir))[0]
    body = action_body(spec)
    assert body["exec"] == {"kind": "python:3", "code": spec.path.read_text(), "binary": False, "main": "main"}
    assert body["limits"] == {"memory": 128, "timeout": 10000}


def test_directory_is_zipped_deterministically_without_caches(tmp_path):
    src = tmp_path / "fn"
    (src / "__pycache__").mkdir(parents=True)
    (src / "__main__.py").write_text("def main(a):\n    return {}\n")
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("X = 1\n")
    (src / "__pycache__" / "x.pyc").write_bytes(b"junk")
    first = zip_directory(src)
    assert first == zip_directory(src)
    assert zipfile.ZipFile(io.BytesIO(first)).namelist() == ["__main__.py", "lib/util.py"]
    body = exec_body(src, "python:3", None)
    assert body["binary"] is True and base64.b64decode(body["code"]) == first
