# A process with known memory for the pager tests: zero pages, random pages, a private
# anonymous mmap, a large heap buffer. It answers commands on an abstract UNIX socket; every
# answer checks memory against hashes taken before the dump.
import hashlib
import mmap
import os
import socket
import sys

name, ready = sys.argv[1], sys.argv[2]
MB = 1 << 20
zeros = bytearray(16 * MB)
for i in range(0, len(zeros), 4096):
    zeros[i] = 0  # present pages that hold only zeros
pattern = bytearray(os.urandom(MB)) * 8
big = bytearray(b"\x01") * (4 * MB)
mapped = mmap.mmap(-1, 4 * MB, flags=mmap.MAP_PRIVATE)
mapped.write(b"\x5a" * (4 * MB))
expect = hashlib.sha256(pattern).hexdigest()


def check():
    ok = hashlib.sha256(pattern).hexdigest() == expect
    ok = ok and zeros.count(0) == len(zeros) and big.count(1) == len(big)
    return ok and mapped[:].count(0x5A) == len(mapped)


def forked():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The child reads memory the parent may not have touched since the restore.
        os.write(w, b"1" if hashlib.sha256(pattern).hexdigest() == expect else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    return got == b"1"


def removed():
    # madvise(DONTNEED) on half of the private mapping: it must read zeros afterwards, the
    # other half keeps its data, and the freed half takes new data.
    half = 2 * MB
    mapped.madvise(mmap.MADV_DONTNEED, 0, half)
    if mapped[:half].count(0) != half or mapped[half:].count(0x5A) != half:
        return False
    mapped[:half] = b"\x33" * half
    return mapped[:half].count(0x33) == half


def remapped():
    # Growing a large buffer moves it with mremap; its old content must follow.
    global big
    big.extend(b"\x02" * (8 * MB))
    return big[: 4 * MB].count(1) == 4 * MB and big[4 * MB :].count(2) == 8 * MB


sock = socket.socket(socket.AF_UNIX)
sock.bind("\0" + name)
sock.listen(4)
with open(ready, "w") as f:
    f.write(str(os.getpid()))
while True:
    conn, _ = sock.accept()
    cmd = conn.recv(64).decode()
    answer = {"check": check, "fork": forked, "remove": removed, "remap": remapped}[cmd]()
    conn.sendall(b"ok" if answer else b"bad")
    conn.close()
