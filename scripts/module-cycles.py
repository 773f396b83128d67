#!/usr/bin/env python3
"""Lists the import cycles between source files of each crate.

A file depends on another when it names an item of the other's module: a `use crate::…`,
`use super::…`, `use self::…` or `use child::…` (groups and globs included) or such a path
written inline (`crate::x::f()`, `child::f()` for a child module `child`). Each
path resolves to the file of the deepest module it names, so `crate::api::Error` is a dependency
on whichever of `api.rs` / `api/mod.rs` exists, and a `pub use` re-export counts like any other
use. A `mod x;` declaration is not a dependency (a parent owning a child is not an import), and
a file's own inline `mod tests { use super::*; }` stays inside the file.

A cycle is a strongly connected set of two or more files: each reaches every other through
imports. Prints each crate's cycles with the edges inside them, then a total; the exit status is
0 either way (it measures, it does not gate), unless `--max N` is given and there are more than N.

Usage: scripts/module-cycles.py [--max N] [CRATE_DIR...]   (default: every crates/* member)
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

USE_RE = re.compile(r"\buse\s+([A-Za-z_{][^;]*);", re.S)
INLINE_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
INLINE_MOD_RE = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")


def strip_comments_and_strings(text):
    """Blanks comments and string literals (keeping newlines), so paths inside them are not read."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            # A char literal, not a lifetime.
            j = i + len(re.match(r"'(\\.[^']*|[^\\'])'", text[i:]).group(0))
            out.append("' '")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases and globs kept as written)."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    paths = []
    for part in filter(None, parts):
        for sub in expand_use_tree(part):
            paths.append((prefix + sub) if sub != "self" else prefix.rstrip(":"))
    return paths


def module_files(src):
    """Module path (tuple) -> file, for the library (or binary) rooted at src/lib.rs or src/main.rs."""
    modules = {}
    for root_name in ("lib.rs", "main.rs"):
        if (src / root_name).exists():
            modules[()] = src / root_name
            break
    else:
        return modules
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if rel.parts[0] == "bin" or rel.name in ("lib.rs", "main.rs") and len(rel.parts) == 1:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        modules.setdefault(tuple(parts), path)
    return modules


REEXPORT_RE = re.compile(r"\bpub(?:\s*\([^)]*\))?\s+use\s+([^;]*);", re.S)
DEFINES = r"\b(?:fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+{}\b"


class Crate:
    """The module files of one crate and what each re-exports (`pub use`), read once."""

    def __init__(self, src):
        self.src = src
        self.modules = module_files(src)
        self.module_of = {f: m for m, f in self.modules.items()}
        self.text = {f: strip_comments_and_strings(f.read_text()) for f in self.modules.values()}
        self.reexports = {}  # file -> (name -> path, [glob paths])
        for f, text in self.text.items():
            names, globs = {}, []
            for m in REEXPORT_RE.finditer(text):
                for p in expand_use_tree(m.group(1)):
                    if p.endswith("::*"):
                        globs.append(p)
                    else:
                        alias = p.split(" as ")[-1] if " as " in p else p.rsplit("::", 1)[-1]
                        names[alias.strip()] = p
            self.reexports[f] = (names, globs)

    def resolve(self, path, here, depth=0):
        """The file that defines what `path` (seen from module `here`) names, or None.

        A path resolves to the deepest module it names; if the next segment is an item that
        module only re-exports, the re-export is followed to where the item is defined."""
        segs = [s for s in path.split(" as ")[0].split("::") if s]
        if not segs:
            return None
        if segs[0] not in ("crate", "super", "self"):
            # 2018 paths: `child::item` names a child module of `here`; anything else is another crate.
            if tuple(here) + (segs[0],) not in self.modules:
                return None
            segs = ["self"] + segs
        if segs[0] == "crate":
            base, segs = [], segs[1:]
        else:
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        full = base + [s for s in segs if s != "*"]
        for k in range(len(full), -1, -1):
            mod = tuple(full[:k])
            if mod not in self.modules:
                continue
            file = self.modules[mod]
            if k < len(full) and depth < 8:
                item = full[k]
                names, globs = self.reexports[file]
                if item in names:
                    return self.resolve(names[item], mod, depth + 1) or file
                if not re.search(DEFINES.format(re.escape(item)), self.text[file]):
                    for g in globs:
                        target = self.resolve(g, mod, depth + 1)
                        if target and re.search(DEFINES.format(re.escape(item)), self.text[target]):
                            return target
            return file
        return None


def dependencies(path, crate):
    """Files `path` imports from, each with one example of the path that names it."""
    here = crate.module_of[path]
    text = crate.text[path]
    # Module path at each offset: inside an inline `mod x { … }` it is here + [x], whose
    # `super` is this file again.
    scopes = []  # (start, end, name)
    for m in INLINE_MOD_RE.finditer(text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        scopes.append((m.start(), j, m.group(1)))

    def module_at(offset):
        mod = list(here)
        for start, end, name in scopes:
            if start <= offset < end:
                mod.append(name)
        return tuple(mod)

    def target_of(p, at):
        if at != here:
            crate.modules.setdefault(at, path)
        return crate.resolve(p, at)

    found = {}
    use_spans = []
    for m in USE_RE.finditer(text):
        use_spans.append((m.start(), m.end()))
        for p in expand_use_tree(m.group(1)):
            target = target_of(p, module_at(m.start()))
            if target and target != path:
                found.setdefault(target, p)
    for m in INLINE_RE.finditer(text):
        if any(s <= m.start() < e for s, e in use_spans):
            continue
        if m.start() > 0 and text[m.start() - 1] == ":":
            continue  # `$crate::` or `other::crate`: not this crate's path
        target = target_of(m.group(1), module_at(m.start()))
        if target and target != path:
            found.setdefault(target, m.group(1))
    return found


def strongly_connected(graph):
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def crate_cycles(crate_dir):
    """File-level and module-level cycles of one crate.

    File level: a node is one file. Module level: for each module, a node is one of its child
    modules with all that child's descendants, and an edge says some file under one child names
    something under another; the parent's own file is not a node (a `mod.rs` re-exporting its
    children and the children using what it defines is how a module is built, not a circle)."""
    crate = Crate(crate_dir / "src")
    graph, via = {}, {}
    for file in list(crate.text):
        deps = dependencies(file, crate)
        graph[file] = set(deps)
        for target, p in deps.items():
            via[(file, target)] = p
    file_cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]

    module_cycles = []
    mods = sorted(crate.module_of[f] for f in crate.text)
    for parent in sorted({m[:-1] for m in mods if m}):
        children = sorted({m[: len(parent) + 1] for m in mods if len(m) > len(parent) and m[: len(parent)] == parent})
        child_of = {}
        for f in crate.text:
            m = crate.module_of[f]
            if len(m) > len(parent) and m[: len(parent)] == parent:
                child_of[f] = m[: len(parent) + 1]
        mgraph, mvia = {c: set() for c in children}, {}
        for f, deps in graph.items():
            for t in deps:
                a, b = child_of.get(f), child_of.get(t)
                if a and b and a != b:
                    mgraph[a].add(b)
                    mvia.setdefault((a, b), (f, t))
        for comp in strongly_connected(mgraph):
            if len(comp) > 1:
                module_cycles.append((sorted(comp), mgraph, mvia))
    return sorted(file_cycles), graph, via, crate.src, module_cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=None, help="fail if there are more cycles than this")
    parser.add_argument("--quiet", action="store_true", help="only the per-crate counts")
    parser.add_argument("crates", nargs="*", type=Path)
    args = parser.parse_args()
    crates = args.crates or sorted(p for p in (ROOT / "crates").iterdir() if (p / "Cargo.toml").exists())
    totals = {"module": 0, "file": 0}
    for crate in crates:
        file_cycles, graph, via, src, module_cycles = crate_cycles(crate.resolve())
        totals["module"] += len(module_cycles)
        totals["file"] += len(file_cycles)
        print(f"{crate.name}: {len(module_cycles)} module cycle(s), {len(file_cycles)} file cycle(s)")
        if args.quiet:
            continue
        for comp, mgraph, mvia in module_cycles:
            members = set(comp)
            print("  module cycle: " + " <-> ".join("::".join(c) for c in comp))
            for a in comp:
                for b in sorted(mgraph[a] & members):
                    f, t = mvia[(a, b)]
                    names = f"{'::'.join(a)} -> {'::'.join(b)}"
                    print(f"    {names}: {f.relative_to(src)} -> {t.relative_to(src)}  ({via[(f, t)]})")
        for comp in file_cycles:
            members = set(comp)
            print("  file cycle: " + ", ".join(str(f.relative_to(src)) for f in comp))
            for f in comp:
                for t in sorted(graph[f] & members):
                    print(f"    {f.relative_to(src)} -> {t.relative_to(src)}  ({via[(f, t)]})")
    print(f"total: {totals['module']} module cycle(s), {totals['file']} file cycle(s)")
    if args.max is not None and totals["module"] + totals["file"] > args.max:
        sys.exit(1)


if __name__ == "__main__":
    main()
