'use strict';
// dynamic-html (Desiccant's JavaScript set; SeBS's dynamic-html): renders an HTML page with a
// Mustache template — a greeting for `username`, the time of generation and a table of `size`
// pseudo-random numbers drawn from `seed`. Returns the page's size and digest (set `html: true`
// to get the page itself), so the result stays small while the whole page is really rendered.

const crypto = require('crypto');
const Mustache = require('mustache');

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed renders the same numbers.
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

const TEMPLATE = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Randomly generated data</title>
  <style>td.bar span { display: inline-block; height: 0.8em; background: #4a7; }</style>
</head>
<body>
  <h1>Welcome {{username}}!</h1>
  <p>Data generated at: {{cur_time}}, {{count}} numbers, mean {{mean}}.</p>
  <table>
    <thead><tr><th>#</th><th>value</th><th>hex</th><th>share</th><th></th></tr></thead>
    <tbody>
{{#rows}}
      <tr class="{{#even}}even{{/even}}{{^even}}odd{{/even}}"><td>{{index}}</td><td>{{value}}</td><td>{{hex}}</td><td>{{percent}}%</td><td class="bar"><span style="width: {{width}}px"></span></td></tr>
{{/rows}}
    </tbody>
  </table>
</body>
</html>
`;
// Parsed once at init; Mustache caches the token tree by template text.
Mustache.parse(TEMPLATE);

const MAX_VALUE = 1000000;

function render(username, size, seed, now) {
  const random = rng(seed);
  const values = new Array(size);
  let total = 0;
  for (let i = 0; i < size; i++) {
    values[i] = Math.floor(random() * MAX_VALUE);
    total += values[i];
  }
  const rows = values.map((value, i) => ({
    index: i + 1,
    value,
    hex: value.toString(16).padStart(5, '0'),
    percent: ((100 * value) / MAX_VALUE).toFixed(2),
    width: Math.round((200 * value) / MAX_VALUE),
    even: i % 2 === 0,
  }));
  return Mustache.render(TEMPLATE, {
    username,
    cur_time: now.toISOString(),
    count: size,
    mean: size ? (total / size).toFixed(1) : '0',
    rows,
  });
}

function main(params = {}) {
  const username = params.username === undefined ? 'icebox' : String(params.username);
  const size = intParam(params, 'size', 8000, 0, 1000000);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const html = render(username, size, seed, new Date());
  const result = {
    username,
    rows: size,
    html_bytes: Buffer.byteLength(html),
    sha256: crypto.createHash('sha256').update(html).digest('hex'),
  };
  if (params.html === true) result.html = html;
  return result;
}

module.exports = { main, render };
