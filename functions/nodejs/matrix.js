'use strict';
// matrix (Desiccant's JavaScript set): multiplies two n x n matrices of pseudo-random doubles
// generated from `seed`, with plain JavaScript arrays and the cache-friendly i-k-j loop order,
// and returns checksums of the product (its trace, sum and Frobenius norm).

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed multiplies the same matrices.
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

function randomMatrix(n, random) {
  const m = new Array(n);
  for (let i = 0; i < n; i++) {
    const row = new Array(n);
    for (let j = 0; j < n; j++) row[j] = random() * 2 - 1;
    m[i] = row;
  }
  return m;
}

function multiply(a, b) {
  const n = a.length;
  const p = b[0].length;
  const c = new Array(n);
  for (let i = 0; i < n; i++) {
    const row = new Array(p).fill(0);
    const ai = a[i];
    for (let k = 0; k < b.length; k++) {
      const aik = ai[k];
      const bk = b[k];
      for (let j = 0; j < p; j++) row[j] += aik * bk[j];
    }
    c[i] = row;
  }
  return c;
}

function generate(n, seed) {
  const random = rng(seed);
  return { a: randomMatrix(n, random), b: randomMatrix(n, random) };
}

function main(params = {}) {
  const n = intParam(params, 'n', 250, 1, 2000);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const { a, b } = generate(n, seed);
  const c = multiply(a, b);
  let trace = 0;
  let sum = 0;
  let squares = 0;
  for (let i = 0; i < n; i++) {
    trace += c[i][i];
    for (let j = 0; j < n; j++) {
      sum += c[i][j];
      squares += c[i][j] * c[i][j];
    }
  }
  return { n, trace, sum, frobenius: Math.sqrt(squares), c00: c[0][0] };
}

module.exports = { main, generate, multiply };
