'use strict';
// fibonacci (Desiccant's JavaScript set): the n-th Fibonacci number by the naive doubly
// recursive definition, the classic CPU-bound micro-benchmark (about 1.6^n calls, no
// allocation). The result is exact up to n = 78, where it still fits in a double's mantissa.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function main(params = {}) {
  // Capped at 45: beyond that the recursion takes minutes.
  const n = intParam(params, 'n', 32, 0, 45);
  const value = fib(n);
  // The recursion makes fib(n+1) leaf calls returning 1 and 2*fib(n+1)-1 calls in all.
  return { n, value, calls: 2 * fib2(n + 1) - 1 };
}

// Linear-time Fibonacci, only for reporting the call count without counting at run time.
function fib2(n) {
  let a = 0;
  let b = 1;
  for (let i = 0; i < n; i++) [a, b] = [b, a + b];
  return a;
}

module.exports = { main, fib };
