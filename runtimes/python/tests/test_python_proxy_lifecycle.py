"""Start-up and shutdown: stale socket, fatal configuration errors, SIGTERM cleanup."""

import os
import subprocess

import pytest
from python_proxy_harness import Proxy, proxy_command, zip_base64


def test_sigterm_removes_socket_and_action_dir(proxy):
    code = zip_base64({"__main__.py": "def main(args):\n    return {}\n"})
    assert proxy.init(code, binary=True).status == 200
    assert len(proxy.action_dirs()) == 1
    assert proxy.terminate() == 0
    assert not os.path.exists(proxy.socket_path)
    assert proxy.action_dirs() == []


def test_stale_socket_file_is_replaced(start_proxy):
    first = start_proxy()
    path = first.socket_path
    first.process.kill()  # leaves the socket file behind
    first.process.wait()
    assert os.path.exists(path)
    second = start_proxy(socket_path=path)
    assert second.request("GET", "/icebox/stats").status == 200


def test_missing_socket_variable_is_fatal(tmp_path):
    result = subprocess.run(
        proxy_command(), env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert "ICEBOX_PROXY_SOCKET is not set" in result.stderr
    assert result.stdout == ""


def test_runtime_dir_is_not_on_the_action_path(proxy):
    code = """
import os, sys

def main(args):
    return {"dirs": [p for p in sys.path
                     if os.path.isdir(os.path.join(p or ".", "icebox_proxy"))]}
"""
    assert proxy.init(code).status == 200
    assert proxy.run({}).json == {"dirs": []}


def test_unbindable_socket_path_is_fatal():
    with pytest.raises(AssertionError, match="cannot listen on"):
        Proxy(socket_path="/proc/icebox-no-such-dir/proxy.sock")
