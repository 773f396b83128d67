"""One snapshot's files in the page cache, and nothing else's: dropped with
posix_fadvise(POSIX_FADV_DONTNEED) per file (the page-cache-cold variant: every page a restore
needs is read from the disk), or read in full (the cached variant). Never the machine's whole
cache (/proc/sys/vm/drop_caches): the runtime's own files stay cached, as they are on a node.

`resident` counts the files' pages in the page cache (mincore on a read-only shared mapping,
which faults nothing in), so a run can show that a drop or a load did what it says.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")
_CHUNK = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.restype = ctypes.c_int
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value


def files_under(directory: Path) -> list[Path]:
    """Every regular file below `directory` (symbolic links are not followed), sorted."""
    found = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                found.append(path)
    return found


def drop(files: list[Path]) -> None:
    """Evict the files' pages from the page cache. Dirty pages cannot be dropped, so each file
    is written back first (a snapshot written moments ago may still be dirty)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def load(files: list[Path]) -> int:
    """Read the files in full, into the page cache; the bytes read."""
    total = 0
    for path in files:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
        finally:
            os.close(fd)
    return total


def _resident_pages(fd: int, size: int) -> int:
    addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap: {os.strerror(err)}")
    try:
        pages = (size + _PAGE - 1) // _PAGE
        vec = (ctypes.c_ubyte * pages)()
        if _libc.mincore(addr, size, vec) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mincore: {os.strerror(err)}")
        return sum(b & 1 for b in vec)
    finally:
        _libc.munmap(addr, size)


def resident(files: list[Path]) -> tuple[int, int]:
    """(pages in the page cache, pages) over the files."""
    cached = total = 0
    for path in files:
        size = path.stat().st_size
        if size == 0:
            continue
        total += (size + _PAGE - 1) // _PAGE
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            cached += _resident_pages(fd, size)
        finally:
            os.close(fd)
    return cached, total


def size_bytes(files: list[Path]) -> int:
    """Bytes the files take on disk (sparse files count their data only)."""
    return sum(p.stat().st_blocks * 512 for p in files)
