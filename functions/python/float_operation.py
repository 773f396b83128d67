"""float_operation (FunctionBench): sin, cos and sqrt of 0..n-1 in an interpreted loop.

Input: {"n": int}. The work is pure CPython float arithmetic: no allocation beyond the
float objects the loop creates and frees (FaaSMem's "runtime segment" of short-lived pages).
Returns the sum of the three results so the loop cannot be skipped and the answer can be
checked.
"""

import math
import time

MAX_N = 50_000_000


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def float_operations(n):
    sin, cos, sqrt = math.sin, math.cos, math.sqrt
    total = 0.0
    for i in range(n):
        sin_i = sin(i)
        cos_i = cos(i)
        sqrt_i = sqrt(i)
        total += sin_i + cos_i + sqrt_i
    return total


def main(args):
    n = _int_param(args, "n", 100_000, 1, MAX_N)
    start = time.perf_counter()
    total = float_operations(n)
    latency = time.perf_counter() - start
    return {"n": n, "sum": total, "latency_ms": round(latency * 1000, 3)}
