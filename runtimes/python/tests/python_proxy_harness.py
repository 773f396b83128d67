"""Test harness: runs the real proxy as runtime.json launches it; speaks HTTP on its socket."""

import base64
import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import zipfile

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
RUNTIME_DIR = os.path.dirname(TESTS_DIR)
REPO_DIR = os.path.dirname(os.path.dirname(RUNTIME_DIR))
EXAMPLES_DIR = os.path.join(REPO_DIR, "examples", "python")
SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX"
READY_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


def proxy_command():
    with open(os.path.join(RUNTIME_DIR, "runtime.json")) as spec:
        argv = json.load(spec)["command"]
    return [arg.replace("{runtime_dir}", RUNTIME_DIR) for arg in argv]


def example_source(name):
    with open(os.path.join(EXAMPLES_DIR, name)) as source:
        return source.read()


def zip_base64(files):
    """Base64 of a zip holding {name: text}; names are written verbatim (even unsafe ones)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(zipfile.ZipInfo(name), text)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(self._path)
        self.sock = sock


class Response:
    def __init__(self, status, body, headers):
        self.status = status
        self.raw = body
        self.headers = headers
        self.json = json.loads(body) if body else None

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.raw[:200])


class Proxy:
    """One proxy process with its own temp dir (socket, TMPDIR, captured stdout/stderr)."""

    def __init__(self, concurrency=1, extra_env=None, socket_path=None):
        # Short path: sun_path is limited to 108 bytes.
        self.dir = tempfile.mkdtemp(prefix="icebox-pytest-")
        self.socket_path = socket_path or os.path.join(self.dir, "proxy.sock")
        self.tmp = os.path.join(self.dir, "tmp")
        os.mkdir(self.tmp)
        self._stdout_path = os.path.join(self.dir, "stdout")
        self._stderr_path = os.path.join(self.dir, "stderr")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ICEBOX_PROXY_SOCKET": self.socket_path,
            "ICEBOX_CONCURRENCY": str(concurrency),
            "__OW_API_HOST": "",
            "TMPDIR": self.tmp,
        }
        env.update(extra_env or {})
        with open(self._stdout_path, "wb") as out, open(self._stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                proxy_command(), env=env, cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        self._connection = None
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise AssertionError("proxy exited with %s: %s" % (self.process.returncode, self.stderr()))
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(self.socket_path)
                    return
                except (FileNotFoundError, ConnectionRefusedError):
                    pass
            if time.monotonic() > deadline:
                raise AssertionError("proxy did not become ready")
            time.sleep(0.005)

    def connection(self):
        return _UnixConnection(self.socket_path)

    def request(self, method, path, body=None, raw=None, connection=None):
        """Send one request on the shared keep-alive connection (or the given one)."""
        conn = connection or self._shared()
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        reply = conn.getresponse()
        return Response(reply.status, reply.read(), dict(reply.getheaders()))

    def _shared(self):
        if self._connection is None:
            self._connection = self.connection()
        return self._connection

    def init(self, code, main=None, binary=False, env=None, name="test-action"):
        value = {"name": name, "code": code, "binary": binary}
        if main is not None:
            value["main"] = main
        if env is not None:
            value["env"] = env
        return self.request("POST", "/init", {"value": value})

    def run(self, value=None, **metadata):
        return self.run_on(None, value, **metadata)

    def run_on(self, connection, value=None, **metadata):
        body = {"value": value if value is not None else {}}
        body.update(metadata)
        return self.request("POST", "/run", body, connection=connection)

    def stdout(self):
        with open(self._stdout_path, encoding="utf-8", errors="replace") as out:
            return out.read()

    def stderr(self):
        with open(self._stderr_path, encoding="utf-8", errors="replace") as err:
            return err.read()

    def action_dirs(self):
        return [name for name in os.listdir(self.tmp) if name.startswith("icebox-python-action-")]

    def terminate(self):
        """SIGTERM and wait; returns the exit code."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def close(self):
        try:
            self.terminate()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.dir, ignore_errors=True)
