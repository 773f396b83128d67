'use strict';
// image (the isolates thesis' Image Classification, in pure JavaScript): no decoder, no native
// code. Each activation generates a seeded RGBA image (gradients, rectangles and noise, like a
// photo-sized input), converts it to grayscale, blurs it with a 3x3 box filter (edges clamped),
// halves it by 2x2 averaging, and "classifies" the result: 8x8 average-pooled features against
// the nearest of `classes` seeded centroids. The centroids are the model: the thesis kept its
// model in the shared isolate, so here it lives in globalThis.icebox.shared when the runtime
// has it (made by the first activation, read by the rest), and in the module otherwise.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG.
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

function generate(width, height, seed) {
  const random = rng(seed);
  const rgba = new Uint8ClampedArray(width * height * 4);
  const [fx, fy] = [random() * 255 / width, random() * 255 / height];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      rgba[i] = x * fx;
      rgba[i + 1] = y * fy;
      rgba[i + 2] = (x + y) * (fx + fy) * 0.5;
      rgba[i + 3] = 255;
    }
  }
  for (let r = 0; r < 24; r++) {
    const [x0, y0] = [Math.floor(random() * width), Math.floor(random() * height)];
    const [w, h] = [Math.ceil(random() * width / 4), Math.ceil(random() * height / 4)];
    const color = [random() * 255, random() * 255, random() * 255];
    for (let y = y0; y < Math.min(height, y0 + h); y++) {
      for (let x = x0; x < Math.min(width, x0 + w); x++) {
        const i = (y * width + x) * 4;
        for (let c = 0; c < 3; c++) rgba[i + c] = color[c];
      }
    }
  }
  let n = (seed ^ 0x5bd1e995) >>> 0 || 1;
  for (let i = 0; i < rgba.length; i += 4) {
    n ^= n << 13; n >>>= 0; n ^= n >>> 17; n ^= n << 5; n >>>= 0;
    const noise = (n & 31) - 16;
    rgba[i] += noise;
    rgba[i + 1] += noise;
    rgba[i + 2] += noise;
  }
  return rgba;
}

// ITU-R BT.601 luma in 8-bit fixed point.
function grayscale(rgba, width, height) {
  const gray = new Uint8Array(width * height);
  for (let p = 0, i = 0; p < gray.length; p++, i += 4) {
    gray[p] = (77 * rgba[i] + 150 * rgba[i + 1] + 29 * rgba[i + 2]) >> 8;
  }
  return gray;
}

function blur3(gray, width, height) {
  const out = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    const up = Math.max(0, y - 1) * width;
    const row = y * width;
    const down = Math.min(height - 1, y + 1) * width;
    for (let x = 0; x < width; x++) {
      const l = Math.max(0, x - 1);
      const r = Math.min(width - 1, x + 1);
      const sum = gray[up + l] + gray[up + x] + gray[up + r]
        + gray[row + l] + gray[row + x] + gray[row + r]
        + gray[down + l] + gray[down + x] + gray[down + r];
      out[row + x] = ((sum + 4) / 9) | 0;
    }
  }
  return out;
}

function halve(gray, width, height) {
  const w = width >> 1;
  const h = height >> 1;
  const out = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = 2 * y * width + 2 * x;
      out[y * w + x] = (gray[i] + gray[i + 1] + gray[i + width] + gray[i + width + 1] + 2) >> 2;
    }
  }
  return { pixels: out, width: w, height: h };
}

function features(img) {
  const f = new Array(64).fill(0);
  const counts = new Array(64).fill(0);
  for (let y = 0; y < img.height; y++) {
    const cy = Math.floor((y * 8) / img.height);
    for (let x = 0; x < img.width; x++) {
      const cell = cy * 8 + Math.floor((x * 8) / img.width);
      f[cell] += img.pixels[y * img.width + x];
      counts[cell] += 1;
    }
  }
  return f.map((sum, i) => (counts[i] ? sum / counts[i] : 0));
}

function makeModel(classes) {
  const random = rng(0xC1A55);
  return { classes, centroids: Array.from({ length: classes }, () => Array.from({ length: 64 }, () => random() * 255)) };
}

let localModel = null;
async function model(classes) {
  const shared = globalThis.icebox && globalThis.icebox.shared;
  if (!shared) {
    if (!localModel || localModel.classes !== classes) localModel = makeModel(classes);
    return { model: localModel, from: 'module' };
  }
  const key = `image-model-${classes}`;
  let found = await shared.get(key);
  if (!found) found = await shared.update(key, (current) => current || makeModel(classes));
  return { model: found, from: 'icebox.shared' };
}

function classify(f, m) {
  let best = 0;
  let bestDistance = Infinity;
  m.centroids.forEach((c, k) => {
    let d = 0;
    for (let i = 0; i < 64; i++) d += (f[i] - c[i]) ** 2;
    if (d < bestDistance) [best, bestDistance] = [k, d];
  });
  return best;
}

// FNV-1a over the bytes.
function fnv1a(bytes) {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 16777619) >>> 0;
  return h.toString(16).padStart(8, '0');
}

function pipeline(width, height, seed) {
  const rgba = generate(width, height, seed);
  return halve(blur3(grayscale(rgba, width, height), width, height), width, height);
}

async function main(params) {
  const width = intParam(params, 'width', 1024, 2, 8192);
  const height = intParam(params, 'height', 768, 2, 8192);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 31 - 1);
  const classes = intParam(params, 'classes', 16, 1, 1000);
  const small = pipeline(width, height, seed);
  const { model: m, from } = await model(classes);
  let sum = 0;
  for (const v of small.pixels) sum += v;
  return {
    width,
    height,
    out_width: small.width,
    out_height: small.height,
    checksum: fnv1a(small.pixels),
    mean: Math.round((sum / small.pixels.length) * 1000) / 1000,
    class: classify(features(small), m),
    model: from,
  };
}

module.exports = { main, generate, pipeline, fnv1a };
