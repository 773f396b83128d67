"""Shared helpers of the icebox node benchmarks (standard library only).

Each benchmark script in bench/node/ exposes `run() -> Section`; these modules start and stop
daemons and bare proxies, speak HTTP over TCP and UNIX sockets, compute statistics and render
the markdown report.
"""

import sys
from pathlib import Path

# The daemon launcher, the leak checks and /proc readers are icebox_bench's (standard library
# only). `make bench` runs these scripts with the system python3, where icebox-bench is not
# installed: import it from this checkout, ahead of any other installed copy.
_BENCH = str(Path(__file__).resolve().parents[2])
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

from icebox_bench import procfs  # noqa: E402,F401  (nodebench.procfs for the scripts)
