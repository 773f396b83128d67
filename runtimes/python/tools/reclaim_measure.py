"""Measure POST /icebox/reclaim and eager GC on real proxies (numbers quoted in ../README.md).

Usage (from the repository root):
    python3 runtimes/python/tools/reclaim_measure.py [--reps 5] [--warmup 130]
        [--workloads alloc,json_dumps_loads,graph_bfs] [--variants none,gc,gc-trim]

Per workload and repetition, one fresh proxy per variant (started as runtime.json says,
PYTHONPATH included, so functions import runtimes/python/packages):
  /init, `warmup` runs, the last 10 timed; USS and anonymous memory (smaps_rollup, read from
  outside); POST /icebox/reclaim with the variant (`none`: no reclaim, the noise floor); again;
  10 more timed runs. Latency is the /run round trip over a keep-alive connection; next to it
  the proxy's on-CPU time per run (/proc/PID/schedstat), which the machine's load hardly moves.
Plus one proxy with ICEBOX_EAGER_GC=1: USS after the warm-up and its last-10 latency, against
the `none` proxy (vanilla) of the same repetition. Variants are interleaved within a
repetition so that background load hits all of them alike; medians over repetitions.
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(RUNTIME_DIR))
WINDOW = 10
MIB = 1024 * 1024


def _manifest_inputs():
    # Paths in the manifest are relative to functions/; input A is the standard one.
    with open(os.path.join(REPO, "functions", "python", "functions.json")) as spec:
        return {
            entry["name"]: (os.path.join(REPO, "functions", entry["path"]), entry["inputs"]["A"])
            for entry in json.load(spec)
        }


def workload(name):
    """(source file, /run value) of a workload: `alloc` or a functions/python benchmark."""
    if name == "alloc":
        return os.path.join(REPO, "examples", "python", "alloc.py"), {"mb": 64}
    return _manifest_inputs()[name]


def launch_spec():
    with open(os.path.join(RUNTIME_DIR, "runtime.json")) as spec:
        document = json.load(spec)
    argv = [arg.replace("{runtime_dir}", RUNTIME_DIR) for arg in document["command"]]
    env = {key: value.replace("{runtime_dir}", RUNTIME_DIR) for key, value in document.get("env", {}).items()}
    return argv, env


class _Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self._path)


class Proxy:
    def __init__(self, tmp, tag, eager=False):
        argv, env = launch_spec()
        self.socket_path = os.path.join(tmp, tag + ".sock")
        env.update(
            PATH=os.environ.get("PATH", "/usr/bin:/bin"),
            ICEBOX_PROXY_SOCKET=self.socket_path,
            ICEBOX_EAGER_GC="1" if eager else "0",
            TMPDIR=tmp,
        )
        self.process = subprocess.Popen(
            argv, env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while not self._connectable():  # iceboxd's readiness test
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("proxy did not start")
            time.sleep(0.002)
        self.conn = _Unix(self.socket_path)

    def _connectable(self):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.socket_path)
                return True
            except (FileNotFoundError, ConnectionRefusedError):
                return False

    def post(self, path, body):
        self.conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        reply = self.conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError("%s -> %d %s" % (path, reply.status, data[:300]))
        return json.loads(data)

    def cpu_ns(self):
        # Time on CPU of the proxy's (only, at concurrency 1) thread, in ns: unlike the round
        # trip it hardly moves with the machine's load. Page faults count: they are CPU time.
        with open("/proc/%d/schedstat" % self.process.pid) as schedstat:
            return int(schedstat.read().split()[0])

    def timed_runs(self, value, count):
        """[(round-trip seconds, proxy CPU seconds)] of `count` runs."""
        samples = []
        for _ in range(count):
            cpu = self.cpu_ns()
            started = time.perf_counter()
            self.post("/run", {"value": value})
            samples.append((time.perf_counter() - started, (self.cpu_ns() - cpu) / 1e9))
        return samples

    def memory(self):
        """(USS, anonymous resident bytes). USS also counts file pages (the python binary,
        libraries) that no *other* process maps at the moment, so it moves by ~3.5 MiB with
        unrelated Python processes on the machine; the anonymous part does not."""
        uss = anon = 0
        with open("/proc/%d/smaps_rollup" % self.process.pid) as rollup:
            for line in rollup:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    uss += int(line.split()[1]) * 1024
                elif line.startswith("Anonymous:"):
                    anon = int(line.split()[1]) * 1024
        return uss, anon

    def close(self):
        if getattr(self, "conn", None) is not None:
            self.conn.close()
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def one_variant(tmp, name, variant, warmup):
    source, value = workload(name)
    proxy = Proxy(tmp, "%s-%s" % (name, variant), eager=(variant == "eager"))
    try:
        with open(source) as code:
            proxy.post("/init", {"value": {"name": name, "code": code.read()}})
        before = proxy.timed_runs(value, warmup)[-WINDOW:]
        row = {"before": statistics.mean(s[0] for s in before), "before_cpu": statistics.mean(s[1] for s in before)}
        row["uss_frozen"], row["anon_frozen"] = proxy.memory()
        if variant in ("none", "eager"):
            row["uss_reclaimed"], row["anon_reclaimed"] = row["uss_frozen"], row["anon_frozen"]
        else:
            row["answer"] = proxy.post("/icebox/reclaim", {"variant": variant})
            row["uss_reclaimed"], row["anon_reclaimed"] = proxy.memory()
        after = proxy.timed_runs(value, WINDOW)
        row["after"] = statistics.mean(s[0] for s in after)
        row["after_cpu"] = statistics.mean(s[1] for s in after)
        row["uss_after_runs"], row["anon_after_runs"] = proxy.memory()
        return row
    finally:
        proxy.close()


def _median(rows, key):
    return statistics.median(row[key] for row in rows)


def _answer_median(rows, path):
    values = []
    for row in rows:
        value = row["answer"]
        for key in path:
            value = value[key]
        values.append(value)
    return statistics.median(values)


def report(name, results, vanilla_rows):
    print("\n== %s (%d repetitions; medians) ==" % (name, len(vanilla_rows)))
    print(
        "%-8s %9s %9s %9s %8s %8s | %9s %9s %8s | %9s %9s %8s"
        % (
            "variant",
            "frozen",
            "reclaimed",
            "after10",
            "live",
            "cpu_ms",
            "before_ms",
            "after_ms",
            "slowdown",
            "cpu_bef",
            "cpu_aft",
            "cpu_slow",
        )
    )
    for variant, rows in results.items():
        slowdown = statistics.median(row["after"] / row["before"] - 1 for row in rows)
        cpu_slowdown = statistics.median(row["after_cpu"] / row["before_cpu"] - 1 for row in rows)
        has_answer = "answer" in rows[0]
        print(
            "%-8s %8.1fM %8.1fM %8.1fM %8s %8s | %9.2f %9.2f %+7.1f%% | %9.2f %9.2f %+7.1f%%"
            % (
                variant,
                _median(rows, "uss_frozen") / MIB,
                _median(rows, "uss_reclaimed") / MIB,
                _median(rows, "uss_after_runs") / MIB,
                "%.1fM" % (_answer_median(rows, ["live_bytes"]) / MIB) if has_answer else "-",
                "%.1f" % _answer_median(rows, ["cpu_ms"]) if has_answer else "-",
                _median(rows, "before") * 1000,
                _median(rows, "after") * 1000,
                slowdown * 100,
                _median(rows, "before_cpu") * 1000,
                _median(rows, "after_cpu") * 1000,
                cpu_slowdown * 100,
            )
        )
        print(
            "         anonymous: frozen %.1fM reclaimed %.1fM after10 %.1fM"
            % (
                _median(rows, "anon_frozen") / MIB,
                _median(rows, "anon_reclaimed") / MIB,
                _median(rows, "anon_after_runs") / MIB,
            )
        )
        if has_answer:
            print(
                "         reported: uss_before %.1fM uss_after %.1fM wall_ms %.1f"
                % (
                    _answer_median(rows, ["uss_before"]) / MIB,
                    _answer_median(rows, ["uss_after"]) / MIB,
                    _answer_median(rows, ["wall_ms"]),
                )
            )
            pymalloc = rows[len(rows) // 2]["answer"]["details"]["pymalloc"]
            print("         pymalloc after collection (one run): %s" % json.dumps(pymalloc))
    if "eager" in results:
        eager = results["eager"]
        overhead = statistics.median(e["before"] / v["before"] - 1 for e, v in zip(eager, vanilla_rows, strict=False))
        cpu_overhead = statistics.median(
            e["before_cpu"] / v["before_cpu"] - 1 for e, v in zip(eager, vanilla_rows, strict=False)
        )
        print(
            "eager vs vanilla: USS after warm-up %.1fM vs %.1fM (anonymous %.1fM vs %.1fM); "
            "last-10 latency %+.1f%%, CPU per run %+.1f%%"
            % (
                _median(eager, "uss_frozen") / MIB,
                _median(vanilla_rows, "uss_frozen") / MIB,
                _median(eager, "anon_frozen") / MIB,
                _median(vanilla_rows, "anon_frozen") / MIB,
                overhead * 100,
                cpu_overhead * 100,
            )
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=130)
    parser.add_argument("--workloads", default="alloc,json_dumps_loads,graph_bfs")
    parser.add_argument("--variants", default="none,gc,gc-trim,eager")
    parser.add_argument("--json", help="also write every row to this file")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if "none" not in variants:
        variants.insert(0, "none")
    all_rows = {}
    tmp = tempfile.mkdtemp(prefix="icebox-reclaim-")
    try:
        for name in args.workloads.split(","):
            results = {variant: [] for variant in variants}
            for rep in range(args.reps):
                # Rotate the order so no variant always runs first (page cache, CPU boost).
                for variant in variants[rep % len(variants) :] + variants[: rep % len(variants)]:
                    results[variant].append(one_variant(tmp, name, variant, args.warmup))
            report(name, results, results["none"])
            all_rows[name] = results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(all_rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
