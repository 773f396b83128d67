"""matmul (FunctionBench): multiply two n x n random float64 matrices with numpy (BLAS).

Input: {"n": int, "seed": int}. The matrices come from numpy's PCG64 generator with the given
seed, so every run of the same input multiplies the same numbers. Three n x n float64 arrays
are live at once (24·n² bytes: 96 MB for n = 2000).
"""

import os
import time

# One BLAS thread unless the deployment says otherwise (set before numpy loads OpenBLAS):
# an action gets a share of a CPU among many instances, and OpenBLAS threads spinning on a
# contended core make run times erratic (FaaSMem ran its BERT with torch threads = 1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

MAX_N = 2500  # A, B and C (50 MB each at 2500) must fit a 256 MB action


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
    """The two input matrices for (n, seed); the tests rebuild them with this too."""
    rng = np.random.default_rng(seed)
    return rng.random((n, n)), rng.random((n, n))


def main(args):
    n = _int_param(args, "n", 1000, 1, MAX_N)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    a, b = generate(n, seed)
    start = time.perf_counter()
    c = np.matmul(a, b)
    latency = time.perf_counter() - start
    # Sum and trace summarise the product: sum(AB) = colsums(A) · rowsums(B) checks it.
    return {
        "n": n,
        "seed": seed,
        "sum": float(c.sum()),
        "trace": float(np.trace(c)),
        "latency_ms": round(latency * 1000, 3),
    }
