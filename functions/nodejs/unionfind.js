'use strict';
// unionfind (Desiccant's JavaScript set): a stream of `ops` random operations drawn from `seed`
// over a disjoint-set forest of `n` elements — unions (union by size) and connectivity queries
// (find with path halving) — then the component statistics of the final partition.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed performs the same operations.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class DisjointSet {
  constructor(n) {
    this.parent = new Int32Array(n);
    this.size = new Int32Array(n).fill(1);
    for (let i = 0; i < n; i++) this.parent[i] = i;
    this.count = n;
  }

  find(x) {
    const parent = this.parent;
    while (parent[x] !== x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }

  // Returns whether a and b were in different sets (and so were merged).
  union(a, b) {
    let ra = this.find(a);
    let rb = this.find(b);
    if (ra === rb) return false;
    if (this.size[ra] < this.size[rb]) [ra, rb] = [rb, ra];
    this.parent[rb] = ra;
    this.size[ra] += this.size[rb];
    this.count--;
    return true;
  }
}

// The operation stream: kind 0 = union, 1 = query; 55% unions keeps the partition evolving
// through the whole stream instead of collapsing into one set early.
function operations(n, ops, seed) {
  const random = rng(seed);
  const kind = new Uint8Array(ops);
  const a = new Int32Array(ops);
  const b = new Int32Array(ops);
  for (let i = 0; i < ops; i++) {
    kind[i] = random() < 0.55 ? 0 : 1;
    a[i] = Math.floor(random() * n);
    b[i] = Math.floor(random() * n);
  }
  return { kind, a, b };
}

function main(params = {}) {
  const n = intParam(params, 'n', 200000, 1, 20000000);
  const ops = intParam(params, 'ops', 400000, 0, 50000000);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const { kind, a, b } = operations(n, ops, seed);

  const set = new DisjointSet(n);
  let merged = 0;
  let connected = 0;
  for (let i = 0; i < ops; i++) {
    if (kind[i] === 0) {
      if (set.union(a[i], b[i])) merged++;
    } else if (set.find(a[i]) === set.find(b[i])) {
      connected++;
    }
  }
  let largest = 0;
  let singletons = 0;
  for (let i = 0; i < n; i++) {
    if (set.parent[i] === i) {
      largest = Math.max(largest, set.size[i]);
      if (set.size[i] === 1) singletons++;
    }
  }
  return { n, ops, unions: ops - kind.reduce((s, k) => s + k, 0), merged, queries_connected: connected,
    components: set.count, largest_component: largest, singletons };
}

module.exports = { main, operations };
