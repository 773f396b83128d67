#!/usr/bin/env python3
"""Measures /icebox/reclaim in the Java proxy, and the JVM options' effect on execution.

Usage (from the repository root, after `make` and
`mvn -B -q -f functions/java/pom.xml package`):
    python3 runtimes/java/measure_reclaim.py [--reps R] [--warmup N] [--after M]
        [--variants shrink,gc,baseline] [--drop OPTION]... [--add OPTION]... [--env K=V]...
        JAR MAIN [JSON_INPUT]

Each repetition starts a fresh proxy with the command of runtimes/java/runtime.json (minus
--drop options, plus --add options, before -jar), runs /init, then N activations of MAIN with
JSON_INPUT (default {}), then a reclaim and M activations (Desiccant
§5.6: 130 warm-up runs, 10 after). Reported per variant, as medians over the repetitions:
USS before/after the reclaim (the proxy's own figures, checked against /proc/PID/smaps_rollup
read from outside), the reclaim's wall and CPU ms, and the mean latency of the M activations
after the reclaim against the last M before it. Each variant gets a fresh instance (interleaved
across repetitions); `baseline` is M more runs without a reclaim (the noise of the after/before
ratio), `none` only measures start-up: exec -> first /run answered (cold start, including
/init) and the mean latency of activations N-M+1..N (warm), reported over all instances.

Latency is measured by the client on a new connection per request, as iceboxd's invoker pays
it; the proxy answers on a UNIX socket, so the transport adds well under a millisecond. The
process CPU time per run (utime + stime from /proc/PID/stat: all threads, JIT and GC
included, 10 ms ticks over M runs) is reported beside it: on a loaded machine wall-clock latency
mostly measures the wait for a core.
"""

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def command(drop, add):
    with open(os.path.join(HERE, "runtime.json")) as f:
        spec = json.load(f)
    args = [a.replace("{runtime_dir}", HERE) for a in spec["command"]]
    args = [a for a in args if a not in drop]
    at = args.index("-jar")
    return args[:at] + add + args[at:], spec.get("env", {})


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


def uss_mib(pid):
    kib = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                kib += int(line.split()[1])
    return kib / 1024


def cpu_ms(pid):
    """CPU time of the whole process so far, exited threads included (the proxy serves each
    connection on its own thread): utime + stime of /proc/PID/stat, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def timed_runs(sock_path, value, count):
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        status, body = request(sock_path, "POST", "/run", {"value": value})
        out.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            sys.exit(f"/run answered {status}: {body}")
    return out


def cpu_per_run(pid, sock_path, value, count):
    """(latencies, mean process CPU ms per run): CPU is what load on the machine distorts least."""
    c0 = cpu_ms(pid)
    lat = timed_runs(sock_path, value, count)
    return lat, (cpu_ms(pid) - c0) / count


def one_rep(cmd, env, code, main, value, args, variant):
    with tempfile.TemporaryDirectory() as tmp:
        sock_path = os.path.join(tmp, "proxy.sock")
        full_env = dict(os.environ, ICEBOX_PROXY_SOCKET=sock_path, **env)
        t0 = time.perf_counter()
        err_path = os.path.join(tmp, "stderr")
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, env=full_env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err)
        try:
            while True:
                if proc.poll() is not None:
                    sys.exit(f"proxy exited with {proc.returncode}")
                try:
                    status, _ = request(
                        sock_path, "POST", "/init", {"value": {"main": main, "code": code, "binary": True}}
                    )
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.0005)
            assert status == 200, status
            first = timed_runs(sock_path, value, 1)
            rep = {
                "cold_ms": (time.perf_counter() - t0) * 1000,
                "first_run_ms": first[0],
                "cold_cpu_ms": cpu_ms(proc.pid),
            }
            timed_runs(sock_path, value, args.warmup - 1 - args.after)
            before, before_cpu = cpu_per_run(proc.pid, sock_path, value, args.after)
            rep["warm_ms"] = statistics.mean(before)
            rep["warm_cpu_ms"] = before_cpu
            if variant != "none":
                uss_outside_before = uss_mib(proc.pid)
                if variant == "baseline":
                    # No reclaim: how much "after" differs from "before" by itself.
                    r = {
                        "uss_before": 0,
                        "uss_after": 0,
                        "live_bytes": 0,
                        "wall_ms": 0,
                        "cpu_ms": 0,
                        "details": {"collections": 0},
                    }
                else:
                    status, r = request(sock_path, "POST", "/icebox/reclaim", {"variant": variant})
                    assert status == 200, (status, r)
                uss_outside_after = uss_mib(proc.pid)
                after, after_cpu = cpu_per_run(proc.pid, sock_path, value, args.after)
                rep[variant] = {
                    "uss_before_mib": r["uss_before"] / 2**20,
                    "uss_after_mib": r["uss_after"] / 2**20,
                    "outside_before_mib": uss_outside_before,
                    "outside_after_mib": uss_outside_after,
                    "live_mib": r["live_bytes"] / 2**20,
                    "wall_ms": r["wall_ms"],
                    "cpu_ms": r["cpu_ms"],
                    "collections": r["details"]["collections"],
                    "before_ms": statistics.mean(before),
                    "after_ms": statistics.mean(after),
                    "before_cpu_ms": before_cpu,
                    "after_cpu_ms": after_cpu,
                    "uss_after_runs_mib": uss_mib(proc.pid),
                    "trim": r["details"].get("native_trim") or r["details"].get("native_trim_error"),
                }
            return rep
        except Exception:
            # Say what became of the proxy before the traceback: an exit status and its stderr.
            time.sleep(0.5)
            print(f"proxy exit status {proc.poll()}; stderr:", file=sys.stderr)
            with open(err_path, errors="replace") as err:
                sys.stderr.write(err.read()[-4000:])
            raise
        finally:
            proc.kill()
            proc.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=130)
    p.add_argument("--after", type=int, default=10)
    p.add_argument("--variants", default="shrink,gc,baseline")
    p.add_argument("--drop", action="append", default=[])
    p.add_argument("--add", action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("jar")
    p.add_argument("main")
    p.add_argument("input", nargs="?", default="{}")
    args = p.parse_args()
    cmd, env = command(args.drop, args.add)
    env = dict(env, **dict(kv.split("=", 1) for kv in args.env))
    with open(args.jar, "rb") as f:
        code = base64.b64encode(f.read()).decode()
    variants = args.variants.split(",")
    value = json.loads(args.input)
    reps = []
    for _ in range(args.reps):
        # A fresh instance per variant, interleaved, so load drifts hit every variant alike.
        rep = {}
        for variant in variants:
            one = one_rep(cmd, env, code, args.main, value, args, variant)
            rep.setdefault("cold_ms", []).append(one.pop("cold_ms"))
            rep.setdefault("first_run_ms", []).append(one.pop("first_run_ms"))
            rep.setdefault("warm_ms", []).append(one.pop("warm_ms"))
            rep.setdefault("cold_cpu_ms", []).append(one.pop("cold_cpu_ms"))
            rep.setdefault("warm_cpu_ms", []).append(one.pop("warm_cpu_ms"))
            rep.update(one)
        reps.append(rep)
    variants = [v for v in variants if v != "none"]

    def med(get):
        return statistics.median(get(r) for r in reps)

    def med_all(key):
        return statistics.median(x for r in reps for x in r[key])

    print(
        f"{args.main} {args.input}: {args.reps} reps, {args.warmup} runs, then per variant "
        f"a reclaim and {args.after} runs; dropped {args.drop or '-'} added {args.add or '-'}"
    )
    print(
        f"  cold (exec -> /init + first /run answered) {med_all('cold_ms'):.1f} ms, "
        f"first run {med_all('first_run_ms'):.1f} ms, warm (mean of runs "
        f"{args.warmup - args.after + 1}..{args.warmup}) {med_all('warm_ms'):.2f} ms "
        f"(medians over {sum(len(r['warm_ms']) for r in reps)} instances)"
    )
    print(f"  process CPU: cold {med_all('cold_cpu_ms'):.1f} ms, warm {med_all('warm_cpu_ms'):.2f} ms per run")
    for v in variants:

        def m(key, v=v):
            return med(lambda r: r[v][key])

        slowdown = med(lambda r, v=v: r[v]["after_ms"] / r[v]["before_ms"] - 1) * 100
        cpu_slowdown = med(lambda r, v=v: r[v]["after_cpu_ms"] / r[v]["before_cpu_ms"] - 1) * 100
        print(
            f"  {v}: USS {m('uss_before_mib'):.1f} -> {m('uss_after_mib'):.1f} MiB "
            f"(outside {m('outside_before_mib'):.1f} -> {m('outside_after_mib'):.1f}; "
            f"after {args.after} more runs {m('uss_after_runs_mib'):.1f}), "
            f"live {m('live_mib'):.1f} MiB, reclaim {m('wall_ms'):.1f} ms wall "
            f"{m('cpu_ms'):.1f} ms CPU, {m('collections'):.0f} GC; runs after/before "
            f"{m('after_ms'):.2f}/{m('before_ms'):.2f} ms ({slowdown:+.1f} %), CPU per run "
            f"{m('after_cpu_ms'):.2f}/{m('before_cpu_ms'):.2f} ms ({cpu_slowdown:+.1f} %)"
        )
        print(f"    trim (last rep): {reps[-1][v]['trim']}")
    print(json.dumps(reps), file=sys.stderr)


if __name__ == "__main__":
    main()
