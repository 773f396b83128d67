"""linpack (FunctionBench): solve a dense n x n system Ax = b with numpy (LAPACK gesv) and
report the LINPACK rate in MFLOPS.

Input: {"n": int, "seed": int}. A holds uniform numbers in [-0.5, 0.5) from PCG64 with the
given seed and b is the row sums of A, so the exact solution is the all-ones vector: the
result reports how far the computed x is from it.
"""

import os
import time

# One BLAS thread unless the deployment says otherwise (set before numpy loads OpenBLAS):
# an action gets a share of a CPU among many instances, and OpenBLAS threads spinning on a
# contended core make run times erratic (FaaSMem ran its BERT with torch threads = 1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

MAX_N = 3000  # A and its LU copy (72 MB each at 3000) must fit a 256 MB action


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def generate(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    a -= 0.5
    return a, a.sum(axis=1)


def main(args):
    n = _int_param(args, "n", 1000, 2, MAX_N)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    a, b = generate(n, seed)
    # LU factorisation (2/3 n³) plus the two triangular solves (2 n²): LINPACK's count.
    ops = 2.0 * n * n * n / 3.0 + 2.0 * n * n
    start = time.perf_counter()
    x = np.linalg.solve(a, b)
    latency = time.perf_counter() - start
    residual = float(np.abs(a @ x - b).max())
    return {
        "n": n,
        "seed": seed,
        "mflops": round(ops * 1e-6 / latency, 1),
        "latency_ms": round(latency * 1000, 3),
        "max_error": float(np.abs(x - 1.0).max()),
        "residual": residual,
    }
