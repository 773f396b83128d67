"""graph_bfs (FaaSMem's "Graph"): breadth-first search over a Barabási–Albert graph held in
memory since init, from start vertices drawn from a Pareto distribution.

Init (module load): igraph builds a Barabási–Albert graph of GRAPH_VERTICES vertices, each new
vertex attaching GRAPH_EDGES_PER_VERTEX edges, from the fixed seed GRAPH_SEED (~1 M edges,
~50 MB resident, ~0.7 s). Like FaaSMem's graph it is a large initialisation segment that every
request walks entirely. (FaaSMem used 100 k vertices x 50 edges and an 885 MB instance; the
edge count is scaled down to fit a 256 MB action.)

Input: {"seed": int, "traversals": int}. Each traversal picks a start vertex as FaaSMem's
load generator did (Pareto with shape 0.1, redrawn until it falls inside the graph) from
random.Random(seed), and runs a full BFS from it. Returns per traversal the start, how many
vertices were reached and the BFS depth.
"""

import os
import random
import time

# One OpenMP thread unless the deployment says otherwise (set before igraph loads libgomp):
# an action gets a share of a CPU among many instances, and spinning OpenMP workers on a
# contended core make run times erratic.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import igraph

GRAPH_VERTICES = 100_000
GRAPH_EDGES_PER_VERTEX = 10
GRAPH_SEED = 20240427
PARETO_SHAPE = 0.1


def build_graph(vertices, edges_per_vertex, seed):
    # igraph draws its random numbers through this object: a seeded Random makes the graph
    # the same in every instance (its C generator cannot be seeded from Python).
    igraph.set_random_number_generator(random.Random(seed))
    try:
        return igraph.Graph.Barabasi(vertices, edges_per_vertex)
    finally:
        igraph.set_random_number_generator(random)


GRAPH = build_graph(GRAPH_VERTICES, GRAPH_EDGES_PER_VERTEX, GRAPH_SEED)


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def pareto_index(rnd, shape, size):
    """FaaSMem's get_pareto_idx: an index in [0, size) with a Pareto-distributed weight."""
    while True:
        x = rnd.paretovariate(shape)
        if x < size + 1:
            return int(x - 1)


def bfs(graph, start):
    """Visited-vertex count and depth of a BFS from `start`."""
    vertices, layers, _parents = graph.bfs(start)
    return len(vertices), len(layers) - 2  # layers holds start offsets plus a final end


def main(args):
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    traversals = _int_param(args, "traversals", 1, 1, 1000)
    rnd = random.Random(seed)
    starts = [pareto_index(rnd, PARETO_SHAPE, GRAPH.vcount()) for _ in range(traversals)]
    start_time = time.perf_counter()
    results = []
    for start in starts:
        visited, depth = bfs(GRAPH, start)
        results.append({"start": start, "visited": visited, "depth": depth})
    latency = time.perf_counter() - start_time
    return {
        "vertices": GRAPH.vcount(),
        "edges": GRAPH.ecount(),
        "traversals": results,
        "latency_ms": round(latency * 1000, 3),
    }
