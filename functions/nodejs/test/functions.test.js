'use strict';
// Checks every Node.js function with its input A from functions.json against known answers or
// an independent computation. Run from the repository root after the setup has installed the
// npm packages (dynamic-html needs mustache):
//     node --test functions/nodejs/test/
// NODE_PATH defaults to runtimes/nodejs/packages/node_modules, as the runtime sets it.

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const Module = require('node:module');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');

const ROOT = path.resolve(__dirname, '..');
if (!process.env.NODE_PATH) {
  process.env.NODE_PATH = path.resolve(ROOT, '../../runtimes/nodejs/packages/node_modules');
  Module._initPaths(); // NODE_PATH is only read at start-up otherwise
}

const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'functions.json'), 'utf8'));
const entry = (name) => manifest.find((f) => f.name === name);
const load = (name) => require(path.join(ROOT, '..', entry(name).path));
const inputA = (name) => structuredClone(entry(name).inputs.A);

test('manifest lists every function file with inputs A and B', () => {
  assert.equal(manifest.length, 16);
  for (const f of manifest) {
    assert.ok(fs.existsSync(path.join(ROOT, '..', f.path)), f.path);
    assert.equal(f.kind, 'nodejs:20');
    assert.ok(f.inputs.A && f.inputs.B, f.name);
    assert.equal(typeof load(f.name).main, 'function', f.name);
  }
});

test('clock', () => {
  const r = load('clock').main(inputA('clock'));
  assert.equal(r.samples, inputA('clock').samples);
  assert.equal(r.monotonic, true);
  assert.ok(r.resolution_ns > 0 && r.resolution_ns < 1e6);
  assert.ok(Math.abs(Date.parse(r.now) - Date.now()) < 60000);
  assert.ok(r.uptime_s > 0 && r.span_ns > 0);
});

test('dynamic-html', () => {
  let mod;
  try {
    mod = load('dynamic-html');
  } catch (err) {
    assert.fail(`cannot load dynamic-html (${err.message}); install the npm packages: see functions/README.md`);
  }
  const input = inputA('dynamic-html');
  const r = mod.main({ ...input, html: true });
  assert.equal(r.rows, input.size);
  assert.equal(r.html_bytes, Buffer.byteLength(r.html));
  assert.equal(r.sha256, crypto.createHash('sha256').update(r.html).digest('hex'));
  assert.equal((r.html.match(/<tr class="(even|odd)">/g) || []).length, input.size);
  assert.match(r.html, /<h1>Welcome icebox!<\/h1>/);
  // Mustache escapes the user's name.
  assert.match(mod.render('<script>', 1, 1, new Date(0)), /Welcome &lt;script&gt;!/);
});

test('factor', () => {
  const input = inputA('factor');
  const r = load('factor').main(input);
  assert.equal(r.verified, true);
  assert.equal(r.count, input.count);
  assert.equal(r.bits, input.bits);
  for (const { n, factors } of r.results) {
    assert.equal(factors.length, 2);
    const [p, q] = factors.map(BigInt);
    assert.equal(p * q, BigInt(n));
    assert.equal(BigInt(n).toString(2).length, input.bits);
    // Independent primality check by trial division (the factors are below 2^36).
    for (const f of [p, q]) {
      const v = Number(f);
      for (let d = 2; d * d <= v; d++) assert.notEqual(v % d, 0, `${v} divisible by ${d}`);
    }
  }
  assert.deepEqual(load('factor').main({ n: '600851475143' }).results[0].factors, ['71', '839', '1471', '6857']);
});

test('fft', () => {
  const mod = load('fft');
  const r = mod.main(inputA('fft'));
  assert.deepEqual(r.peaks.map((p) => p.bin), r.tones.map((t) => t.bin));
  r.peaks.forEach((p, i) => assert.ok(Math.abs(p.amplitude - r.tones[i].amplitude) < 0.02));
  assert.ok(r.max_roundtrip_error < 1e-9);
  assert.ok(r.parseval_relative_error < 1e-9);
  // The recursive transform agrees with the O(n^2) definition on a small input.
  const x = Array.from({ length: 64 }, (_, t) => ({ re: Math.sin(t * 0.7) + (t % 5), im: Math.cos(t) }));
  const X = mod.fft(x, -1);
  for (let k = 0; k < 64; k++) {
    let re = 0;
    let im = 0;
    for (let t = 0; t < 64; t++) {
      const a = (-2 * Math.PI * k * t) / 64;
      re += x[t].re * Math.cos(a) - x[t].im * Math.sin(a);
      im += x[t].re * Math.sin(a) + x[t].im * Math.cos(a);
    }
    assert.ok(Math.abs(X[k].re - re) < 1e-9 && Math.abs(X[k].im - im) < 1e-9, `bin ${k}`);
  }
});

test('fibonacci', () => {
  const input = inputA('fibonacci');
  const r = load('fibonacci').main(input);
  let [a, b] = [0, 1];
  for (let i = 0; i < input.n; i++) [a, b] = [b, a + b];
  assert.equal(r.value, a);
  assert.equal(load('fibonacci').main({ n: 30 }).value, 832040);
});

test('filesystem', async () => {
  const mod = load('filesystem');
  const input = inputA('filesystem');
  const before = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('icebox-fs-'));
  const r = await mod.main(input);
  const bytes = input.files * input.size_kb * 1024;
  assert.equal(r.mismatches, 0);
  assert.equal(r.listed, input.files);
  assert.equal(r.bytes_written, bytes);
  assert.equal(r.bytes_read, bytes);
  assert.equal(r.stat_bytes, bytes);
  let sums = '';
  for (let i = 0; i < input.files; i++) {
    const digest = crypto.createHash('sha256').update(mod.fileContent(input.seed, i, input.size_kb * 1024)).digest('hex');
    sums += `${digest}  data-${String(i).padStart(5, '0')}.bin\n`;
  }
  assert.equal(r.digest, crypto.createHash('sha256').update(sums).digest('hex'));
  const after = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('icebox-fs-'));
  assert.deepEqual(after, before, 'the function removes its directory');
});

test('matrix', () => {
  const mod = load('matrix');
  const input = inputA('matrix');
  const r = mod.main(input);
  const { a, b } = mod.generate(input.n, input.seed);
  const n = input.n;
  // sum(AB) = (1^T A)(B 1) and trace(AB) = sum_ik A_ik B_ki, both without forming AB.
  let sum = 0;
  let trace = 0;
  for (let k = 0; k < n; k++) {
    let col = 0;
    let row = 0;
    for (let i = 0; i < n; i++) {
      col += a[i][k];
      row += b[k][i];
      trace += a[i][k] * b[k][i];
    }
    sum += col * row;
  }
  assert.ok(Math.abs(r.sum - sum) < 1e-6 * Math.max(1, Math.abs(sum)));
  assert.ok(Math.abs(r.trace - trace) < 1e-8 * n);
  let c00 = 0;
  for (let k = 0; k < n; k++) c00 += a[0][k] * b[k][0];
  assert.ok(Math.abs(r.c00 - c00) < 1e-9);
});

test('pi', () => {
  const mod = load('pi');
  const input = inputA('pi');
  const r = mod.main(input);
  assert.equal(r.head, '3.14159265358979323846264338327950288419716939937510');
  // The A digits are a prefix of a longer run, so the guard digits were enough.
  assert.equal(mod.piDigits(input.digits + 30).slice(0, input.digits).slice(-20), r.tail);
  // Known: decimals 981-1000 of pi and the sum of the first 1000 decimals (mpmath).
  const thousand = mod.piDigits(1000);
  assert.equal(thousand.slice(-20), '66111959092164201989');
  assert.equal([...thousand].reduce((s, d) => s + Number(d), 0), 4476);
  assert.ok(r.series.error < 1e-12);
});

test('unionfind', () => {
  const mod = load('unionfind');
  const input = inputA('unionfind');
  const r = mod.main(input);
  // Independent: quick-find that relabels the smaller component, and answers each query.
  const { kind, a, b } = mod.operations(input.n, input.ops, input.seed);
  const label = Int32Array.from({ length: input.n }, (_, i) => i);
  const members = new Map();
  let components = input.n;
  let connected = 0;
  const list = (l) => members.get(l) || [l];
  for (let i = 0; i < input.ops; i++) {
    const la = label[a[i]];
    const lb = label[b[i]];
    if (kind[i] === 1) { if (la === lb) connected++; continue; }
    if (la === lb) continue;
    let [big, small] = [list(la), list(lb)];
    let [keep, drop] = [la, lb];
    if (big.length < small.length) { [big, small] = [small, big]; [keep, drop] = [drop, keep]; }
    for (const m of small) { label[m] = keep; big.push(m); }
    members.set(keep, big);
    members.delete(drop);
    components--;
  }
  assert.equal(r.components, components);
  assert.equal(r.queries_connected, connected);
  assert.equal(r.merged, input.n - components);
  const largest = Math.max(1, ...[...members.values()].map((m) => m.length));
  assert.equal(r.largest_component, largest);
});

test('web-server', async () => {
  const mod = load('web-server');
  const input = inputA('web-server');
  const r = await mod.main(input);
  const ok = r.status[200] || 0;
  assert.equal(Object.values(r.status).reduce((s, v) => s + v, 0), input.requests);
  assert.equal(r.cache.hits + r.cache.misses, ok);
  assert.equal(r.cache.evictions, Math.max(0, r.cache.misses - input.cache_size));
  assert.ok(r.cache.hits > r.cache.misses, 'a Pareto mix is mostly cache hits');
  assert.equal(r.top_pages[0].id, 0, 'page 0 is the most popular');
  const notFound = (r.status[404] || 0) * 'not found\n'.length;
  assert.ok(r.bytes_received > notFound);
  assert.equal(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(`icebox-web-${process.pid}-`)).length, 0);
  assert.equal(mod.renderPage(input.seed, 7).toString(), mod.renderPage(input.seed, 7).toString());
});

test('data-analysis', () => {
  const mod = load('data-analysis');
  const input = inputA('data-analysis');
  const r = mod.main(input);
  const { malformed, departments } = mod.generate(input.rows, input.seed);
  assert.equal(r.rejected, malformed);
  assert.equal(r.valid + r.rejected, input.rows);
  const roles = Object.values(r.by_role);
  assert.equal(roles.reduce((s, g) => s + g.count, 0), r.valid);
  for (const g of roles) assert.ok(g.min <= g.median && g.median <= g.max && g.min <= g.mean && g.mean <= g.max);
  const locations = Object.values(r.by_location);
  assert.equal(locations.reduce((s, l) => s + l.headcount, 0), r.valid);
  assert.equal(locations.reduce((s, l) => s + l.departments, 0), departments.length);
  assert.equal(locations.reduce((s, l) => s + l.budget, 0), departments.reduce((s, d) => s + d.budget, 0));
  assert.equal(mod.tax(10000), 0);
  assert.equal(mod.tax(40000), 3000);
  assert.equal(mod.tax(100000), 3000 + 10000 + 3000);
  assert.ok(r.merit.top.length === 5 && r.merit.total_cost > 0);
});

test('alexa', () => {
  const mod = load('alexa');
  const r = mod.main(inputA('alexa'));
  assert.equal(r.handled + r.failed, inputA('alexa').requests);
  assert.equal(Object.values(r.intents).reduce((s, v) => s + v, 0), r.requests);
  assert.equal(mod.main(inputA('alexa')).replies_sha256, r.replies_sha256, 'deterministic');

  const script = mod.main({ seed: 42, rooms: 8, utterances: [
    'Turn on the kitchen lamp', 'Set the kitchen light to blue', 'Unlock the back door',
    'Lock the front door', 'Is the back door locked?', 'Remind me to call mom at 7:30 pm',
    'Remind me to feed the cat at 8 am', 'Dim the kitchen light to 150 percent',
    'Play jazz in the kitchen', 'Tell me a fact', 'Unlock the patio door'] });
  assert.deepEqual(script.first_replies, ['The kitchen light is on.', 'The kitchen light is now blue.',
    'The back door is unlocked.', 'The front door is locked.', 'The back door is unlocked.']);
  assert.equal(script.home.lights_on, 1);
  assert.equal(script.home.doors_locked, 2);
  assert.equal(script.reminders, 2);
  assert.equal(script.next_reminder, 'feed the cat');
  assert.equal(script.intents.Unknown, 1);
  assert.equal(script.failed, 3); // brightness 150, no skill for music, no patio door
});

test('filehash', () => {
  const mod = load('filehash');
  const input = inputA('filehash');
  const r = mod.main(input);
  const bytes = input.size_kb * 1024;
  // Independent: the xorshift32 stream written word by word with DataView.
  const expected = Buffer.alloc(bytes);
  const view = new DataView(expected.buffer, expected.byteOffset, bytes);
  let x = (Math.imul(input.seed ^ 0x9E3779B9, 0x85EBCA6B) ^ Math.imul(1, 0xC2B2AE35)) >>> 0 || 1;
  for (let off = 0; off < bytes; off += 4) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    view.setUint32(off, x, true);
  }
  assert.equal(r.sha256, crypto.createHash('sha256').update(expected).digest('hex'));
  assert.equal(r.bytes_per_file, bytes);
  const again = mod.main({ ...input, files: 3 });
  assert.equal(again.cached, true, 'the second activation reuses the buffer');
  assert.equal(again.sha256, r.sha256);
  const digests = [0, 1, 2].map((i) => crypto.createHash('sha256').update(mod.fillFile(Buffer.alloc(bytes), input.seed, i)).digest('hex'));
  assert.equal(new Set(digests).size, 3);
  assert.equal(again.digests_sha256, crypto.createHash('sha256').update(digests.join('\n')).digest('hex'));
});

test('rest-login', () => {
  const mod = load('rest-login');
  const input = { ...inputA('rest-login'), requests: 16 };
  const r = mod.main(input);
  assert.deepEqual(r.status, { 200: 14, 401: 2 }, 'every eighth login has a wrong password');
  // Independent check of the first token: its HS256 signature and claims.
  const [head, claims, signature] = r.first_token.split('.');
  const key = crypto.createHash('sha256').update(`signing-${input.seed}`).digest();
  assert.equal(signature, crypto.createHmac('sha256', key).update(`${head}.${claims}`).digest('base64url'));
  const random = mod.rng(input.seed);
  const first = JSON.parse(mod.requestBody(input.seed, input.users, 0, random));
  assert.deepEqual(JSON.parse(Buffer.from(claims, 'base64url').toString()), {
    sub: first.user, role: Number(first.user.slice(5)) % 10 === 0 ? 'admin' : 'user', iat: first.time,
  });
  // One REST call given as a body.
  const ok = mod.main({ ...input, body: { user: 'user-3', password: mod.passwordOf(input.seed, 3) } });
  assert.equal(ok.status, 200);
  assert.equal(mod.main({ ...input, body: { user: 'user-3', password: 'nope' } }).status, 401);
  assert.equal(mod.main({ ...input, body: { user: 'user-99999', password: 'x' } }).status, 401);
  assert.equal(mod.main({ ...input, body: '{not json' }).status, 400);
  assert.equal(mod.main({ ...input, body: { user: 'user-3' } }).status, 400);
});

test('memalloc', () => {
  const input = inputA('memalloc');
  const r = load('memalloc').main(input);
  assert.equal(r.records, r.chunks * 1024);
  assert.ok(r.records * 56 >= input.mb * 1024 * 1024);
  // Independent: the same LCG without any objects.
  let x = input.seed;
  let checksum = 0;
  const tags = new Array(8).fill(0);
  for (let i = 0; i < r.records; i++) {
    x = Number((BigInt(x) * 1103515245n + 12345n) % (1n << 30n));
    checksum = (checksum + (x ^ i)) % 1000000007;
    tags[x >>> 27] += 1;
  }
  assert.equal(r.checksum, checksum);
  assert.deepEqual(r.tags, tags);
});

test('image', async () => {
  const mod = load('image');
  const r = await mod.main(inputA('image'));
  assert.deepEqual([r.out_width, r.out_height], [512, 384]);
  assert.ok(r.class >= 0 && r.class < 16);
  assert.equal(r.model, 'module');
  // Independent: the pipeline written per pixel with clamped reads, on an odd-sized image.
  const [w, h, seed] = [37, 23, 7];
  const rgba = mod.generate(w, h, seed);
  const gray = (x, y) => {
    const i = (Math.min(h - 1, Math.max(0, y)) * w + Math.min(w - 1, Math.max(0, x))) * 4;
    return Math.floor((77 * rgba[i] + 150 * rgba[i + 1] + 29 * rgba[i + 2]) / 256);
  };
  const blurred = (x, y) => {
    let sum = 0;
    for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) sum += gray(x + dx, y + dy);
    return Math.floor((sum + 4) / 9);
  };
  const expected = [];
  for (let y = 0; y < Math.floor(h / 2); y++) {
    for (let x = 0; x < Math.floor(w / 2); x++) {
      const s = blurred(2 * x, 2 * y) + blurred(2 * x + 1, 2 * y) + blurred(2 * x, 2 * y + 1) + blurred(2 * x + 1, 2 * y + 1);
      expected.push(Math.floor((s + 2) / 4));
    }
  }
  const small = mod.pipeline(w, h, seed);
  assert.deepEqual([...small.pixels], expected);
  assert.equal(mod.fnv1a(Uint8Array.from([0x61])), 'e40c292c'); // FNV-1a("a")
});
