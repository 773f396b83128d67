'use strict';
// fft (Desiccant's JavaScript set): fast Fourier transform of a generated signal — a sum of a
// few tones drawn from `seed` plus noise — then the inverse transform to check the round trip.
// This is the textbook recursive radix-2 Cooley-Tukey on arrays of complex objects, as typical
// JavaScript FFT code is written; its high allocation rate (fresh arrays and objects at every
// level) is what makes fft the paper's example of a young generation that grows and stays big.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed transforms the same signal.
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

// Recursive transform of `x` (length a power of two); sign -1 forward, +1 inverse (unscaled).
function fft(x, sign) {
  const n = x.length;
  if (n === 1) return [{ re: x[0].re, im: x[0].im }];
  const half = n >> 1;
  const even = new Array(half);
  const odd = new Array(half);
  for (let i = 0; i < half; i++) {
    even[i] = x[2 * i];
    odd[i] = x[2 * i + 1];
  }
  const e = fft(even, sign);
  const o = fft(odd, sign);
  const out = new Array(n);
  for (let k = 0; k < half; k++) {
    const angle = (sign * 2 * Math.PI * k) / n;
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    const tre = c * o[k].re - s * o[k].im;
    const tim = c * o[k].im + s * o[k].re;
    out[k] = { re: e[k].re + tre, im: e[k].im + tim };
    out[k + half] = { re: e[k].re - tre, im: e[k].im - tim };
  }
  return out;
}

function signal(n, tones, random) {
  const parts = [];
  const used = new Set();
  while (parts.length < tones) {
    // Distinct bins in the lower half, well clear of DC and Nyquist, with amplitudes 1..5.
    const bin = 1 + Math.floor(random() * (n / 2 - 2));
    if (used.has(bin)) continue;
    used.add(bin);
    parts.push({ bin, amplitude: 1 + Math.round(random() * 40) / 10 });
  }
  const x = new Array(n);
  for (let t = 0; t < n; t++) {
    let v = (random() - 0.5) * 0.2;
    for (const p of parts) v += p.amplitude * Math.sin((2 * Math.PI * p.bin * t) / n);
    x[t] = { re: v, im: 0 };
  }
  return { x, parts };
}

function main(params = {}) {
  const n = intParam(params, 'n', 16384, 2, 1 << 22);
  if ((n & (n - 1)) !== 0) throw new RangeError(`n must be a power of two, got ${n}`);
  const tones = intParam(params, 'tones', 4, 1, Math.max(1, n / 4));
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const { x, parts } = signal(n, tones, rng(seed));

  const spectrum = fft(x, -1);
  // A real sine of amplitude A at bin k has |X[k]| = A*n/2; report the strongest bins.
  const magnitudes = [];
  for (let k = 0; k <= n / 2; k++) magnitudes.push({ bin: k, amplitude: Math.hypot(spectrum[k].re, spectrum[k].im) * 2 / n });
  magnitudes.sort((a, b) => b.amplitude - a.amplitude);
  const peaks = magnitudes.slice(0, tones).sort((a, b) => a.bin - b.bin)
    .map((p) => ({ bin: p.bin, amplitude: Number(p.amplitude.toFixed(4)) }));

  const back = fft(spectrum, 1);
  let maxError = 0;
  let timeEnergy = 0;
  let freqEnergy = 0;
  for (let i = 0; i < n; i++) {
    maxError = Math.max(maxError, Math.abs(back[i].re / n - x[i].re), Math.abs(back[i].im / n));
    timeEnergy += x[i].re * x[i].re;
    freqEnergy += spectrum[i].re * spectrum[i].re + spectrum[i].im * spectrum[i].im;
  }
  return {
    n,
    tones: parts.sort((a, b) => a.bin - b.bin),
    peaks,
    max_roundtrip_error: maxError,
    // Parseval: sum |x|^2 = (1/n) sum |X|^2, up to rounding.
    parseval_relative_error: Math.abs(timeEnergy - freqEnergy / n) / timeEnergy,
  };
}

module.exports = { main, fft };
