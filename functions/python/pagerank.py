"""pagerank (FaaSnap's "PageRank", from SeBS's graph-pagerank): build a Barabási–Albert graph
with igraph and compute its PageRank.

Input: {"size": int, "edges_per_vertex": int, "seed": int}. The graph is generated on every
request, as in SeBS, with igraph drawing its random numbers from random.Random(seed) so the
same input always gives the same graph. PageRank uses igraph's default (PRPACK) with damping
0.85. Returns the score sum (1 up to rounding) and the five highest-ranked vertices.
"""

import os
import random
import time

# One OpenMP thread unless the deployment says otherwise (set before igraph loads libgomp):
# an action gets a share of a CPU among many instances, and spinning OpenMP workers on a
# contended core make run times erratic.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import igraph

DAMPING = 0.85


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def build_graph(size, edges_per_vertex, seed):
    # A seeded Random as igraph's generator makes the graph reproducible; igraph's own C
    # generator cannot be seeded from Python. Restored afterwards: the setting is global.
    igraph.set_random_number_generator(random.Random(seed))
    try:
        return igraph.Graph.Barabasi(size, edges_per_vertex)
    finally:
        igraph.set_random_number_generator(random)


def main(args):
    size = _int_param(args, "size", 20_000, 2, 1_000_000)
    edges_per_vertex = _int_param(args, "edges_per_vertex", 10, 1, 100)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    if size * edges_per_vertex > 5_000_000:
        raise ValueError("graph too large: size x edges_per_vertex must be at most 5000000")
    start = time.perf_counter()
    graph = build_graph(size, edges_per_vertex, seed)
    generated = time.perf_counter()
    ranks = graph.pagerank(damping=DAMPING)
    done = time.perf_counter()
    top = sorted(range(len(ranks)), key=ranks.__getitem__, reverse=True)[:5]
    return {
        "vertices": graph.vcount(),
        "edges": graph.ecount(),
        "rank_sum": sum(ranks),
        "top": [{"vertex": v, "rank": ranks[v]} for v in top],
        "graph_ms": round((generated - start) * 1000, 3),
        "pagerank_ms": round((done - generated) * 1000, 3),
    }
