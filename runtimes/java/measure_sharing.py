#!/usr/bin/env python3
"""Memory of n concurrent activations: the shared mode (one JVM, n class loader slots) against
the process mode (n JVMs, one activation each).

Usage (from the repository root, after `make`):
    python3 runtimes/java/measure_sharing.py JAR MAIN VALUE_JSON [--n 1,2,4,8] [--rounds 3]

For each n: a proxy with ICEBOX_SHARING=shared and ICEBOX_CONCURRENCY=n gets `rounds` rounds of
n simultaneous /run requests (the stats' `contexts.created` says how many slots that made),
then `/icebox/stats?gc=1`, then its PSS and USS from /proc/PID/smaps_rollup; the same for n
process-mode proxies side by side, summed. PSS divides pages shared between the JVMs (libjvm,
the CDS archive) among them, so the process-mode sum is what the n instances cost together.
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from measure import request as http_request
from measure import runtime_command, wait_ready


def request(sock, method, url, body=None):
    """The reply's JSON body (measure.request gives the status too)."""
    return http_request(sock, method, url, body)[1]


class Proxy:
    def __init__(self, env):
        self.dir = tempfile.mkdtemp(prefix="icebox-sharing-")
        self.sock = os.path.join(self.dir, "proxy.sock")
        command, runtime_env = runtime_command()
        began = time.perf_counter()
        self.process = subprocess.Popen(
            command,
            env=dict(os.environ, ICEBOX_PROXY_SOCKET=self.sock, **runtime_env, **env),
            cwd=self.dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_ready(self.process, self.sock, began)

    def memory_mib(self):
        fields = {}
        with open("/proc/%d/smaps_rollup" % self.process.pid) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    fields[name] = int(rest.split()[0]) / 1024
        return fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"]

    def close(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def concurrently(calls):
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jar")
    parser.add_argument("main")
    parser.add_argument("value", help="the /run value, JSON")
    parser.add_argument("--n", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with open(args.jar, "rb") as f:
        init = {"value": {"main": args.main, "binary": True, "code": base64.b64encode(f.read()).decode()}}
    run = {"value": json.loads(args.value)}
    print("| n | shared: slots | shared PSS / USS MiB | process: PSS / USS MiB (sum of n) |")
    print("| --- | --- | --- | --- |")
    for n in (int(x) for x in args.n.split(",")):
        shared = Proxy({"ICEBOX_SHARING": "shared", "ICEBOX_CONCURRENCY": str(n)})
        processes = []
        try:
            request(shared.sock, "POST", "/init", init)
            for _ in range(args.rounds):
                concurrently([lambda sock=shared.sock: request(sock, "POST", "/run", run)] * n)
            slots = request(shared.sock, "GET", "/icebox/stats?gc=1")["sharing"]["contexts"]
            shared_pss, shared_uss = shared.memory_mib()
            shared.close()
            processes = [Proxy({}) for _ in range(n)]
            for proxy in processes:
                request(proxy.sock, "POST", "/init", init)
            for _ in range(args.rounds):
                concurrently([lambda p=p: request(p.sock, "POST", "/run", run) for p in processes])
            for proxy in processes:
                request(proxy.sock, "GET", "/icebox/stats?gc=1")
            memory = [proxy.memory_mib() for proxy in processes]
            print(
                "| %d | %d | %.1f / %.1f | %.1f / %.1f |"
                % (n, slots["created"], shared_pss, shared_uss, sum(m[0] for m in memory), sum(m[1] for m in memory)),
                flush=True,
            )
        finally:
            shared.close()
            for proxy in processes:
                proxy.close()


if __name__ == "__main__":
    main()
