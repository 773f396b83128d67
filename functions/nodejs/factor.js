'use strict';
// factor (Desiccant's JavaScript set): factorises large integers: `count` products of two
// random primes of bits/2 bits each, drawn from `seed` (or the one decimal string `n`), with
// trial division by small primes, Miller-Rabin primality tests and Pollard's rho (Brent's
// variant), all in BigInt arithmetic. Rho's running time varies from number to number; several
// numbers per invocation make the work proportional to `count`, and a seed fixes it exactly.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so a seed always yields the same number to factor.
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

const SMALL_PRIMES = [];
for (let p = 2; p < 1000; p++) if (SMALL_PRIMES.every((q) => p % q !== 0)) SMALL_PRIMES.push(p);
// With these bases Miller-Rabin is exact below 3.3e24 and a strong probable-prime test above.
const MR_BASES = [2n, 3n, 5n, 7n, 11n, 13n, 17n, 19n, 23n, 29n, 31n, 37n, 41n];

function modPow(b, e, m) {
  let r = 1n;
  b %= m;
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return r;
}

function isPrime(n) {
  if (n < 2n) return false;
  for (const p of SMALL_PRIMES) {
    const bp = BigInt(p);
    if (n === bp) return true;
    if (n % bp === 0n) return false;
  }
  let d = n - 1n;
  let s = 0;
  while ((d & 1n) === 0n) { d >>= 1n; s++; }
  outer: for (const a of MR_BASES) {
    let x = modPow(a, d, n);
    if (x === 1n || x === n - 1n) continue;
    for (let i = 1; i < s; i++) {
      x = (x * x) % n;
      if (x === n - 1n) continue outer;
    }
    return false;
  }
  return true;
}

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

const abs = (v) => (v < 0n ? -v : v);

// Brent's cycle finding with the gcd taken once per batch of 128 steps. Returns a non-trivial
// divisor of the composite n, or n itself when this choice of (y, c) fails.
function brent(n, y, c) {
  const f = (v) => (v * v + c) % n;
  let g = 1n;
  let q = 1n;
  let r = 1;
  let x;
  let ys;
  do {
    x = y;
    for (let i = 0; i < r; i++) y = f(y);
    for (let k = 0; k < r && g === 1n; k += 128) {
      ys = y;
      const steps = Math.min(128, r - k);
      for (let i = 0; i < steps; i++) {
        y = f(y);
        q = (q * abs(x - y)) % n;
      }
      g = gcd(q, n);
    }
    r *= 2;
  } while (g === 1n);
  if (g === n) {
    // The batch overshot: replay it one step at a time.
    do {
      ys = f(ys);
      g = gcd(abs(x - ys), n);
    } while (g === 1n);
  }
  return g;
}

function factorize(n, random) {
  const factors = [];
  for (const p of SMALL_PRIMES) {
    const bp = BigInt(p);
    while (n % bp === 0n) { factors.push(bp); n /= bp; }
  }
  const pending = n > 1n ? [n] : [];
  while (pending.length) {
    const m = pending.pop();
    if (isPrime(m)) { factors.push(m); continue; }
    let d = m;
    while (d === m) {
      const y = BigInt(Math.floor(random() * 2 ** 32)) % m;
      const c = 1n + (BigInt(Math.floor(random() * 2 ** 32)) % (m - 1n));
      d = brent(m, y, c);
    }
    pending.push(d, m / d);
  }
  return factors.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function randomPrime(bits, random) {
  // The two top bits set make each prime at least 1.5 * 2^(bits-1), so the product of two
  // has exactly the requested number of bits; odd, then walk up to the next prime.
  let v = 3n;
  for (let i = 2; i < bits; i++) v = (v << 1n) | (random() < 0.5 ? 1n : 0n);
  v |= 1n;
  while (!isPrime(v)) v += 2n;
  return v;
}

function main(params = {}) {
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const random = rng(seed);
  let numbers;
  if (params.n !== undefined && params.n !== null) {
    if (!/^[0-9]{1,60}$/.test(String(params.n))) throw new RangeError('n must be a decimal integer string of at most 60 digits');
    numbers = [BigInt(params.n)];
    if (numbers[0] < 2n) throw new RangeError('n must be at least 2');
  } else {
    const bits = intParam(params, 'bits', 64, 8, 100);
    const count = intParam(params, 'count', 4, 1, 10000);
    numbers = [];
    for (let i = 0; i < count; i++) {
      numbers.push(randomPrime(bits >> 1, random) * randomPrime(bits - (bits >> 1), random));
    }
  }
  let verified = true;
  const results = numbers.map((n) => {
    const factors = factorize(n, random);
    verified = verified && factors.reduce((a, b) => a * b, 1n) === n && factors.every(isPrime);
    return { n: n.toString(), factors: factors.map(String) };
  });
  return { bits: numbers[0].toString(2).length, count: numbers.length, results, verified };
}

module.exports = { main, isPrime, factorize };
