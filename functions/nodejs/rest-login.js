'use strict';
// rest-login (the isolates thesis' REST Request, from Photons and DeathStarBench): a small REST
// handler. Each request is a JSON login body; the handler parses it, looks the user up in a
// user table, checks the password against the stored salted PBKDF2-SHA256 hash in constant
// time, and answers 200 with a signed token (HS256, JWT-shaped) or 401. Little work and little
// allocation per call. The thesis compared a string with a record in MongoDB over a cached
// connection; here the "database" is a seeded table of `users` users built on first use and
// kept per module instance (per process, vm context or isolate), as the cached connection was.
//
// Without `body`, an activation handles `requests` seeded logins (every eighth with a wrong
// password); with `body` (a JSON string, or an object), it handles that one login.

const crypto = require('crypto');

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

const passwordOf = (seed, id) => `pw-${seed}-${id}-${((id * 2654435761) >>> 0).toString(36)}`;

// The user table of (seed, users, iterations); a record's hash is computed on first lookup.
let table = null;
function users(seed, count, iterations) {
  if (!table || table.seed !== seed || table.count !== count || table.iterations !== iterations) {
    table = { seed, count, iterations, records: new Map(), key: crypto.createHash('sha256').update(`signing-${seed}`).digest() };
  }
  return table;
}

function record(db, name) {
  const match = /^user-(\d+)$/.exec(name);
  if (!match || Number(match[1]) >= db.count) return null;
  let rec = db.records.get(name);
  if (!rec) {
    const salt = crypto.createHash('sha256').update(`salt-${db.seed}-${name}`).digest().subarray(0, 16);
    const hash = crypto.pbkdf2Sync(passwordOf(db.seed, Number(match[1])), salt, db.iterations, 32, 'sha256');
    rec = { salt, hash, role: Number(match[1]) % 10 === 0 ? 'admin' : 'user' };
    db.records.set(name, rec);
  }
  return rec;
}

const base64url = (buf) => Buffer.from(buf).toString('base64url');

function sign(db, claims) {
  const head = `${base64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${base64url(JSON.stringify(claims))}`;
  return `${head}.${base64url(crypto.createHmac('sha256', db.key).update(head).digest())}`;
}

// One REST call: a JSON body in, {status, body} out.
function login(db, text) {
  let creds;
  try {
    creds = JSON.parse(text);
  } catch (err) {
    return { status: 400, body: { error: 'malformed JSON' } };
  }
  if (!creds || typeof creds.user !== 'string' || typeof creds.password !== 'string') {
    return { status: 400, body: { error: 'user and password are required' } };
  }
  const rec = record(db, creds.user);
  const given = rec && crypto.pbkdf2Sync(creds.password, rec.salt, db.iterations, 32, 'sha256');
  if (!rec || !crypto.timingSafeEqual(given, rec.hash)) return { status: 401, body: { error: 'invalid credentials' } };
  // The issue time comes from the request, so the same request gets the same token.
  const iat = Number.isInteger(creds.time) ? creds.time : 0;
  return { status: 200, body: { token: sign(db, { sub: creds.user, role: rec.role, iat }) } };
}

function requestBody(seed, count, i, random) {
  const id = Math.floor(random() * count);
  const password = i % 8 === 7 ? 'wrong' : passwordOf(seed, id);
  return JSON.stringify({ user: `user-${id}`, password, time: 1700000000 + i });
}

function main(params) {
  const seed = intParam(params, 'seed', 42, 0, 2 ** 31 - 1);
  const db = users(seed, intParam(params, 'users', 1000, 1, 1e6), intParam(params, 'iterations', 1000, 1, 1e6));
  if (params.body !== undefined) {
    const text = typeof params.body === 'string' ? params.body : JSON.stringify(params.body);
    return login(db, text);
  }
  const requests = intParam(params, 'requests', 1, 1, 100000);
  const random = rng(seed);
  const status = {};
  const tokens = crypto.createHash('sha256');
  let first = null;
  for (let i = 0; i < requests; i++) {
    const res = login(db, requestBody(seed, db.count, i, random));
    status[res.status] = (status[res.status] || 0) + 1;
    if (res.status === 200) {
      tokens.update(`${res.body.token}\n`);
      if (first === null) first = res.body.token;
    }
  }
  return { requests, status, first_token: first, tokens_sha256: tokens.digest('hex') };
}

module.exports = { main, passwordOf, requestBody, rng };
