'use strict';
// web-server (Desiccant's JavaScript set): launches an HTTP server and processes requests.
// Each invocation starts a Node http server on a UNIX socket in /tmp (the sandbox has no
// network of its own), then a keep-alive client sends it `requests` GETs, `concurrency` at a
// time. Page popularity follows a Pareto distribution with shape `alpha`, drawn from `seed`, as
// web traffic does; the server renders a page on a miss and keeps up to `cache_size` rendered
// pages in an LRU cache, so popular pages are served from memory. Ids past `pages` get a 404.

const http = require('http');
const fs = require('fs');
const os = require('os');
const path = require('path');

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed sends the same requests.
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

const WORDS = ('lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor '
  + 'incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation '
  + 'ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit '
  + 'voluptate velit esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non '
  + 'proident sunt culpa qui officia deserunt mollit anim id est laborum').split(' ');

// A page's content depends only on (seed, id): 4 to 24 paragraphs of 40 to 120 words.
function renderPage(seed, id) {
  const random = rng((seed ^ Math.imul(id + 1, 0x9E3779B1)) >>> 0);
  const word = () => WORDS[Math.floor(random() * WORDS.length)];
  const parts = [`<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page ${id}</title></head><body>\n`,
    `<h1>Page ${id}: ${word()} ${word()}</h1>\n`];
  const paragraphs = 4 + Math.floor(random() * 21);
  for (let p = 0; p < paragraphs; p++) {
    const words = [];
    const count = 40 + Math.floor(random() * 81);
    for (let w = 0; w < count; w++) words.push(word());
    parts.push(`<p>${words.join(' ')}.</p>\n`);
  }
  parts.push(`<footer><a href="/page/${(id + 1) % 1000}">next</a></footer></body></html>\n`);
  return Buffer.from(parts.join(''));
}

// Map iteration order is insertion order, so re-inserting on a hit keeps the LRU at the front.
class LruCache {
  constructor(capacity) {
    this.capacity = capacity;
    this.map = new Map();
    this.hits = 0;
    this.misses = 0;
    this.evictions = 0;
  }

  get(key, make) {
    let value = this.map.get(key);
    if (value !== undefined) {
      this.hits++;
      this.map.delete(key);
    } else {
      this.misses++;
      value = make();
      if (this.capacity === 0) return value;
      if (this.map.size >= this.capacity) {
        this.map.delete(this.map.keys().next().value);
        this.evictions++;
      }
    }
    this.map.set(key, value);
    return value;
  }
}

function handler(cache, pages, seed) {
  return (req, res) => {
    const match = /^\/page\/(\d+)$/.exec(req.url);
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET' }).end();
    } else if (!match || Number(match[1]) >= pages) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    } else {
      const id = Number(match[1]);
      const body = cache.get(id, () => renderPage(seed, id));
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': body.length });
      res.end(body);
    }
  };
}

function get(agent, socketPath, url) {
  return new Promise((resolve, reject) => {
    const req = http.get({ agent, socketPath, path: url }, (res) => {
      let bytes = 0;
      res.on('data', (chunk) => { bytes += chunk.length; });
      res.on('end', () => resolve({ status: res.statusCode, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

let serial = 0;

async function main(params = {}) {
  const requests = intParam(params, 'requests', 1000, 1, 1000000);
  const pages = intParam(params, 'pages', 1000, 1, 1000000);
  const cacheSize = intParam(params, 'cache_size', 64, 0, 1000000);
  const concurrency = intParam(params, 'concurrency', 4, 1, 256);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const alpha = params.alpha === undefined ? 0.9 : Number(params.alpha);
  if (!(alpha > 0 && alpha <= 10)) throw new RangeError(`alpha must be a number in (0, 10], got ${JSON.stringify(params.alpha)}`);

  // Pareto(x_m = 1, alpha) by inversion; page id = floor(x) - 1, so P(id >= k) = (k + 1)^-alpha.
  const random = rng(seed);
  const schedule = new Array(requests);
  for (let i = 0; i < requests; i++) schedule[i] = Math.floor((1 - random()) ** (-1 / alpha)) - 1;

  const cache = new LruCache(cacheSize);
  const server = http.createServer(handler(cache, pages, seed));
  const socketPath = path.join(os.tmpdir(), `icebox-web-${process.pid}-${++serial}.sock`);
  fs.rmSync(socketPath, { force: true });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, resolve);
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const status = {};
  const hits = new Map();
  let bytes = 0;
  try {
    let next = 0;
    const client = async () => {
      while (next < requests) {
        const id = schedule[next++];
        const res = await get(agent, socketPath, `/page/${id}`);
        status[res.status] = (status[res.status] || 0) + 1;
        bytes += res.bytes;
        if (res.status === 200) hits.set(id, (hits.get(id) || 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, client));
  } finally {
    agent.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(socketPath, { force: true });
  }
  const top = [...hits].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 5);
  return {
    requests,
    status,
    bytes_received: bytes,
    distinct_pages: hits.size,
    cache: { capacity: cacheSize, hits: cache.hits, misses: cache.misses, evictions: cache.evictions },
    top_pages: top.map(([id, count]) => ({ id, count })),
  };
}

module.exports = { main, renderPage };
