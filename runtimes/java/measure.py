#!/usr/bin/env python3
"""Measures the Java proxy: start-up (exec -> socket accepts a connection) and idle memory.

Usage (from the repository root, after `make`, which builds the jar and the CDS archive):
    python3 runtimes/java/measure.py [--runs N] [--instances K] [--action JAR MAIN]
                                     [-- COMMAND...]

Without COMMAND the command of runtimes/java/runtime.json is used. Each run starts K proxies
side by side (as iceboxd keeps many idle instances), times each from exec until its socket
accepts a connection (wall clock, and the CPU time the JVM used by then, which a busy machine
distorts less), and samples memory one second later. With --action the jar is sent to /init
and run once (value {"name": "x"}) in every instance, and memory is sampled after the run and
again after `/icebox/stats?gc=1`.
Memory is read from /proc: RSS, and PSS, which divides pages shared between processes (libjvm,
the CDS archive) among them; with K > 1 the mean PSS is the cost of one more instance.
"""

import argparse
import base64
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def runtime_command():
    with open(os.path.join(HERE, "runtime.json")) as f:
        spec = json.load(f)
    return [arg.replace("{runtime_dir}", HERE) for arg in spec["command"]], spec.get("env", {})


def request(sock_path, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock_path)
        s.sendall(
            f"{method} {path} HTTP/1.1\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data
        )
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def cpu_ms(pid):
    """CPU time the live threads of the process have used so far (schedstat is in ns)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total / 1e6


def memory_kib(pid):
    rss = pss = None
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def start(command, extra_env, tmp, index):
    sock_path = os.path.join(tmp, f"proxy{index}.sock")
    env = dict(os.environ, ICEBOX_PROXY_SOCKET=sock_path, ICEBOX_CONCURRENCY="1", **extra_env)
    began = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, sock_path, began


def wait_ready(proc, sock_path, began):
    while True:
        if proc.poll() is not None:
            sys.exit(f"proxy exited with {proc.returncode} before accepting")
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock_path)
            return (time.perf_counter() - began) * 1000, cpu_ms(proc.pid)
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.0005)


def one_run(command, extra_env, action, instances):
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        try:
            # Started one after another so each start-up is timed on an otherwise idle machine.
            startups, cpu = [], []
            for i in range(instances):
                proc, sock_path, began = start(command, extra_env, tmp, i)
                procs.append((proc, sock_path))
                wall_ms, cpu_used_ms = wait_ready(proc, sock_path, began)
                startups.append(wall_ms)
                cpu.append(cpu_used_ms)
            time.sleep(1.0)
            result = {
                "startup_ms": startups,
                "startup_cpu_ms": cpu,
                "idle": [memory_kib(proc.pid) for proc, _ in procs],
            }
            if action:
                jar, main = action
                with open(jar, "rb") as f:
                    code = base64.b64encode(f.read()).decode()
                result["init_run_ms"] = []
                for _, sock_path in procs:
                    t0 = time.perf_counter()
                    status, _ = request(
                        sock_path, "POST", "/init", {"value": {"main": main, "code": code, "binary": True}}
                    )
                    assert status == 200, status
                    status, _ = request(sock_path, "POST", "/run", {"value": {"name": "x"}})
                    assert status == 200, status
                    result["init_run_ms"].append((time.perf_counter() - t0) * 1000)
                result["after_run"] = [memory_kib(proc.pid) for proc, _ in procs]
                for _, sock_path in procs:
                    request(sock_path, "GET", "/icebox/stats?gc=1")
                time.sleep(0.5)
                result["after_run_gc"] = [memory_kib(proc.pid) for proc, _ in procs]
            return result
        finally:
            for proc, _ in procs:
                proc.kill()
                proc.wait()
                # Outside a sandbox the proxy stores the action jar in the shared /tmp.
                for jar in glob.glob(f"/tmp/icebox-action-{proc.pid}-*.jar"):
                    os.remove(jar)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--action", nargs=2, metavar=("JAR", "MAIN"))
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    command, extra_env = (args.command, {}) if args.command else runtime_command()
    runs = [one_run(command, extra_env, args.action, args.instances) for _ in range(args.runs)]

    def values(key, index=None):
        flat = [v for r in runs for v in r[key]]
        return flat if index is None else [v[index] / 1024 for v in flat]

    def summary(samples):
        return f"median {statistics.median(samples):.1f}, min {min(samples):.1f}"

    def memory(key):
        return f"RSS MiB {summary(values(key, 0))} | PSS MiB {summary(values(key, 1))}"

    print("command:", " ".join(command))
    print(f"{args.runs} runs x {args.instances} instances")
    print("start-up ms:", summary(values("startup_ms")), "| CPU ms used by then:", summary(values("startup_cpu_ms")))
    print("idle:", memory("idle"))
    if args.action:
        print("init + first run ms:", summary(values("init_run_ms")))
        print("after run:", memory("after_run"))
        print("after run + ?gc=1:", memory("after_run_gc"))


if __name__ == "__main__":
    main()
