"""Measure the proxy's start-up time and idle memory (numbers quoted in ../README.md).

Usage (from the repository root):  python3 runtimes/python/tools/measure.py [--runs N]

start-up   = time from spawning /usr/bin/python3 until a connect() to the socket succeeds
             (iceboxd's readiness criterion);
first init = time from spawning until the reply to POST /init of examples/python/hello.py;
memory     = VmRSS / RssAnon / Pss of the proxy right after it became ready, idle after
             /init + one /run of hello.py, and after a first GET /icebox/stats (loads ctypes).
Baselines: `/usr/bin/python3 [-S] -c pass` (spawn to exit), interleaved with the proxy runs,
and the memory of an idle bare `/usr/bin/python3 -S` interpreter.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(RUNTIME_DIR))
PYTHON = "/usr/bin/python3"


def command():
    with open(os.path.join(RUNTIME_DIR, "runtime.json")) as spec:
        argv = json.load(spec)["command"]
    return [arg.replace("{runtime_dir}", RUNTIME_DIR) for arg in argv]


def request(path, sock_path, method, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(sock_path)
        conn.sendall(
            (
                "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close"
                "\r\n\r\n" % (method, path, len(data))
            ).encode()
            + data
        )
        reply = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def memory(pid):
    result = {}
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                result[key] = int(value.split()[0])
    with open("/proc/%d/smaps_rollup" % pid) as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                result["Pss"] = int(line.split()[1])
    return result


def one_run(tmp, index, hello_code):
    sock_path = os.path.join(tmp, "p%d.sock" % index)
    env = dict(os.environ, ICEBOX_PROXY_SOCKET=sock_path, ICEBOX_CONCURRENCY="1")
    started = time.perf_counter()
    proc = subprocess.Popen(command(), env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(sock_path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.0002)
        ready = time.perf_counter() - started
        request("/init", sock_path, "POST", {"value": {"name": "hello", "code": hello_code}})
        first_init = time.perf_counter() - started
        return ready, first_init, proc, sock_path
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with open(os.path.join(REPO, "examples", "python", "hello.py")) as source:
        hello_code = source.read()

    bare, bare_site, readies, inits = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        # Interleaved so that background load hits the baselines and the proxy alike.
        for index in range(runs):
            for argv, samples in (([PYTHON, "-S", "-c", "pass"], bare), ([PYTHON, "-c", "pass"], bare_site)):
                started = time.perf_counter()
                subprocess.run(argv, check=True)
                samples.append(time.perf_counter() - started)
            ready, first_init, proc, _ = one_run(tmp, index, hello_code)
            readies.append(ready)
            inits.append(first_init)
            proc.terminate()
            proc.wait()

        # Memory right after readiness (no request yet), then idle after init + run.
        sock_path = os.path.join(tmp, "mem.sock")
        env = dict(os.environ, ICEBOX_PROXY_SOCKET=sock_path)
        proc = subprocess.Popen(command(), env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        idle_bare = subprocess.Popen([PYTHON, "-S", "-c", "import time; time.sleep(30)"])
        try:
            while not os.path.exists(sock_path):
                time.sleep(0.001)
            time.sleep(0.3)
            at_ready = memory(proc.pid)
            request("/init", sock_path, "POST", {"value": {"name": "hello", "code": hello_code}})
            request("/run", sock_path, "POST", {"value": {"name": "x"}})
            time.sleep(0.3)
            after_run = memory(proc.pid)
            request("/icebox/stats", sock_path, "GET")
            time.sleep(0.3)
            after_stats = memory(proc.pid)
            bare_mem = memory(idle_bare.pid)
        finally:
            proc.terminate()
            idle_bare.kill()
            proc.wait()
            idle_bare.wait()

    def ms(values):
        values = sorted(values)
        return "median %.1f ms, p90 %.1f ms" % (
            statistics.median(values) * 1000,
            values[int(len(values) * 0.9) - 1] * 1000,
        )

    print("runs: %d, command: %s" % (runs, " ".join(command())))
    print("bare `python3 -S -c pass` (spawn->exit): %s" % ms(bare))
    print("bare `python3 -c pass` (spawn->exit):    %s" % ms(bare_site))
    print("proxy start-up (spawn->connect ok):      %s" % ms(readies))
    print("spawn -> first /init reply (hello.py):   %s" % ms(inits))
    print("memory kB, bare idle python3 -S:         %s" % bare_mem)
    print("memory kB, proxy idle after start:       %s" % at_ready)
    print("memory kB, proxy idle after init+run:    %s" % after_run)
    print("memory kB, ... and after /icebox/stats:  %s" % after_stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
