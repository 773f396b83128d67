#!/usr/bin/env python3
"""Counts the `unsafe { ... }` blocks of the Rust sources and those whose body calls libc.

A block is matched by its braces, so a call spread over several lines counts (a one-line grep
for `unsafe` and `libc::` misses it); line comments are skipped. `unsafe fn` and `unsafe impl`
are not blocks and are not counted. With `--files`, prints the libc-calling blocks per file.

Usage: scripts/unsafe-count.py [--files] [DIR...]   (default: crates tests)
"""

import argparse
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"\bunsafe\s*\{")
LINE_COMMENT = re.compile(r"//[^\n]*")


def blocks(text):
    """The bodies of the unsafe blocks of `text` (comments removed)."""
    text = LINE_COMMENT.sub("", text)
    for m in BLOCK.finditer(text):
        i, depth = m.end(), 1
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield text[m.end() : i]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="list libc-calling blocks per file")
    parser.add_argument("dirs", nargs="*", default=["crates", "tests"])
    args = parser.parse_args()
    total, per_file = 0, collections.Counter()
    for d in args.dirs:
        for path in sorted((ROOT / d).rglob("*.rs")):
            if "target" in path.relative_to(ROOT).parts:
                continue
            for body in blocks(path.read_text()):
                total += 1
                if "libc::" in body:
                    per_file[str(path.relative_to(ROOT))] += 1
    if args.files:
        for name, n in sorted(per_file.items()):
            print(f"{n:4} {name}")
    print(f"unsafe blocks: {total}; calling libc: {sum(per_file.values())}")


if __name__ == "__main__":
    main()
