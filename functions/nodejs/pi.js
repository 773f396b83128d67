'use strict';
// pi (Desiccant's JavaScript set): computes pi two ways. `digits` decimal digits exactly, with
// Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in BigInt fixed-point arithmetic (O(d^2)
// work); and `iterations` terms of the Nilakantha series in doubles, whose error shows the
// slow convergence of a plain series.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// atan(1/x) scaled by `unity` (a power of ten), by its Taylor series.
function arctanInv(x, unity) {
  const bx = BigInt(x);
  const x2 = bx * bx;
  let term = unity / bx;
  let sum = term;
  for (let k = 3n, sign = -1n; term !== 0n; k += 2n, sign = -sign) {
    term /= x2;
    sum += (sign * term) / k;
  }
  return sum;
}

// The first `digits` digits of pi after the "3.", truncated (not rounded).
function piDigits(digits) {
  // Ten guard digits absorb the truncation error of the ~1.4*digits series terms.
  const guard = 10n;
  const unity = 10n ** (BigInt(digits) + guard);
  const pi = 16n * arctanInv(5, unity) - 4n * arctanInv(239, unity);
  const text = (pi / 10n ** guard).toString();
  return text.slice(1);
}

function nilakantha(iterations) {
  // pi = 3 + 4/(2*3*4) - 4/(4*5*6) + 4/(6*7*8) - ...
  let pi = 3;
  let sign = 1;
  for (let i = 1; i <= iterations; i++) {
    const k = 2 * i;
    pi += (sign * 4) / (k * (k + 1) * (k + 2));
    sign = -sign;
  }
  return pi;
}

function main(params = {}) {
  const digits = intParam(params, 'digits', 12000, 1, 100000);
  const iterations = intParam(params, 'iterations', 10000000, 0, 1000000000);
  const decimals = piDigits(digits);
  const series = nilakantha(iterations);
  return {
    digits,
    head: `3.${decimals.slice(0, 50)}`,
    tail: decimals.slice(-20),
    digit_sum: [...decimals].reduce((s, d) => s + Number(d), 0),
    series: { iterations, value: series, error: Math.abs(series - Math.PI) },
  };
}

module.exports = { main, piDigits };
