"""pyaes (FunctionBench; FaaSnap's "pyaes"): AES-128 in CTR mode with the pure-Python `pyaes`
library: encrypt a message and decrypt it again, `iterations` times.

Input: {"length": int, "iterations": int, "seed": int}. The message is `length` lowercase
letters and digits drawn with Python's random.Random(seed), as FunctionBench's generator.
Pure-Python AES is slow (tens of microseconds per block), so this is a CPU- and
small-object-heavy function. The result includes a digest of the ciphertext and whether
decryption gave the message back.

Note: this module shares its name with the pyaes package; the proxy loads an action as module
`main__`, so `import pyaes` below finds the package, not this file.
"""

import hashlib
import random
import string
import time

import pyaes

# FunctionBench's fixed 128-bit key.
KEY = b"\xa1\xf6%\x8c\x87}_\xcd\x89dHE8\xbf\xc9,"
LETTERS = string.ascii_lowercase + string.digits


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def generate(length, seed):
    return "".join(random.Random(seed).choices(LETTERS, k=length))


def encrypt(plaintext):
    return pyaes.AESModeOfOperationCTR(KEY).encrypt(plaintext)


def main(args):
    length = _int_param(args, "length", 10_000, 1, 10_000_000)
    iterations = _int_param(args, "iterations", 1, 1, 1000)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    message = generate(length, seed)
    plaintext = message.encode("ascii")
    start = time.perf_counter()
    for _ in range(iterations):
        # A fresh cipher per round, as FunctionBench: CTR restarts from the initial counter.
        ciphertext = encrypt(plaintext)
        decrypted = pyaes.AESModeOfOperationCTR(KEY).decrypt(ciphertext)
    latency = time.perf_counter() - start
    return {
        "length": length,
        "iterations": iterations,
        "ciphertext_sha256": hashlib.sha256(ciphertext).hexdigest(),
        "roundtrip_ok": decrypted == plaintext,
        "latency_ms": round(latency * 1000, 3),
    }
