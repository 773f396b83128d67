"""chameleon (FunctionBench; FaaSnap's "chameleon"): render a big HTML table with the
Chameleon page-template engine (the classic "bigtable" template benchmark).

Input: {"rows": int, "cols": int}. As in FunctionBench the template is compiled on every
request (PageTemplate parses and compiles to Python on first render), then rendered for a
rows x cols table. Chameleon compiles in memory (MemoryLoader) unless CHAMELEON_CACHE or
CHAMELEON_DEBUG is set, so nothing is written to the read-only filesystem.

Note: this module shares its name with the chameleon package. The proxy loads an action as
module `main__`, and the tests load it under another name, so `import chameleon` below finds
the package, not this file.
"""

import hashlib
import time

from chameleon import PageTemplate

BIGTABLE_ZPT = """\
<table xmlns="http://www.w3.org/1999/xhtml"
xmlns:tal="http://xml.zope.org/namespaces/tal">
<tr tal:repeat="row python: options['table']">
<td tal:repeat="c python: row.values()">
<span tal:define="d python: c + 1"
tal:attributes="class python: 'column-' + str(d)"
tal:content="python: d" />
</td>
</tr>
</table>"""

MAX_CELLS = 2_000_000


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def render(rows, cols):
    template = PageTemplate(BIGTABLE_ZPT)
    row = {str(i): i for i in range(cols)}
    return template.render(options={"table": [row] * rows})


def main(args):
    rows = _int_param(args, "rows", 100, 1, MAX_CELLS)
    cols = _int_param(args, "cols", 100, 1, MAX_CELLS)
    if rows * cols > MAX_CELLS:
        raise ValueError("table too large: at most %d cells" % MAX_CELLS)
    start = time.perf_counter()
    html = render(rows, cols)
    latency = time.perf_counter() - start
    return {
        "rows": rows,
        "cols": cols,
        "html_chars": len(html),
        "html_sha256": hashlib.sha256(html.encode("utf-8")).hexdigest(),
        "latency_ms": round(latency * 1000, 3),
    }
