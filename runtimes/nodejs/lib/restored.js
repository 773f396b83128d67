'use strict';
// POST /icebox/restored (README.md, "/icebox/restored"): iceboxd's first call on an instance
// restored from a snapshot. Every instance restored from one snapshot starts with the same
// memory, the template's environment included; this sets the variables whose value differs for
// the new instance (`env`), reseeds Math.random everywhere the action runs from the daemon's
// seed, then calls the action's iceboxRestored hook in every copy of the action, through the
// sharing mode's module (restoreCopies), which also hands `env` to its contexts or isolates.

const { HttpError } = require('./http');
const { json } = require('./response');
const { HookError } = require('./hook');
const seeds = require('./seeds');

const SEED = /^[0-9a-fA-F]{64}$/;
const NOT_INITIALIZED = 'Cannot restore an uninitialized action: /icebox/restored needs a successful /init first.';

// Overlapping calls would interleave reseeding and hooks: they run one after the other.
let queue = Promise.resolve();

function seedOf(body) {
  if (typeof body.instance !== 'string' || body.instance === '') {
    throw new HttpError(400, 'The /icebox/restored body needs "instance": the new instance\'s id as a non-empty string.');
  }
  if (typeof body.seed !== 'string' || !SEED.test(body.seed)) {
    const shown = typeof body.seed === 'string' && body.seed.length <= 80 ? JSON.stringify(body.seed) : typeof body.seed;
    throw new HttpError(400, `The /icebox/restored "seed" must be 64 hex digits (32 bytes), got ${shown}.`);
  }
  return Buffer.from(body.seed, 'hex');
}

// The body's optional `env` as [name, value] pairs (none when absent), all checked before any is
// set, so that a bad one applies nothing.
function envOf(body) {
  if (!Object.prototype.hasOwnProperty.call(body, 'env')) return [];
  const { env } = body;
  if (env === null || typeof env !== 'object' || Array.isArray(env)) {
    throw new HttpError(400, `The /icebox/restored "env" must be an object of environment variable names to string values, got ${jsonType(env)}.`);
  }
  const entries = Object.entries(env);
  for (const [name, value] of entries) {
    // What the OS environment cannot hold (a Worker's copy or a child process would lose it).
    if (name === '' || name.includes('=') || name.includes('\0')) {
      throw new HttpError(400, `The /icebox/restored "env" has an invalid variable name ${JSON.stringify(name)} (empty, or with '=' or a NUL).`);
    }
    if (typeof value !== 'string') {
      throw new HttpError(400, `The /icebox/restored "env" value of ${name} must be a string, got ${jsonType(value)}.`);
    }
    if (value.includes('\0')) {
      throw new HttpError(400, `The /icebox/restored "env" value of ${name} contains a NUL character.`);
    }
  }
  return entries;
}

function jsonType(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

// `mode`: the sharing mode's module, or null before the first /init loaded it.
function restored(body, mode) {
  const done = queue.then(() => restore(body, mode));
  queue = done.catch(() => {});
  return done;
}

async function restore(body, mode) {
  if (mode === null || !mode.initialized()) return json(403, { error: NOT_INITIALIZED });
  // Both checked before anything changes.
  const seed = seedOf(body);
  const env = envOf(body);
  // The environment first, so the hooks see the new values. The main thread's process.env is
  // the process mode's, the one shared mode's new contexts copy, and the one isolate mode's new
  // Workers are started with; restoreCopies hands it to the copies that exist.
  for (const [name, value] of env) process.env[name] = value;
  seeds.restore(seed);
  try {
    const { reseeded, hook } = await mode.restoreCopies(env);
    const names = env.map(([name]) => name).sort();
    return json(200, { ok: true, reseeded: ['Math.random', ...reseeded], hook, env: names });
  } catch (err) {
    if (err instanceof HookError) return json(502, { error: err.message });
    throw err;
  }
}

module.exports = { restored };
