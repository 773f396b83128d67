'use strict';
// POST /icebox/restored (README.md, "/icebox/restored"): iceboxd's first call on an instance
// restored from a snapshot. Every instance restored from one snapshot starts with the same
// memory; this reseeds Math.random everywhere the action runs from the daemon's seed, then calls
// the action's iceboxRestored hook in every copy of the action, through the sharing mode's
// module (restoreCopies).

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

// `mode`: the sharing mode's module, or null before the first /init loaded it.
function restored(body, mode) {
  const done = queue.then(() => restore(body, mode));
  queue = done.catch(() => {});
  return done;
}

async function restore(body, mode) {
  if (mode === null || !mode.initialized()) return json(403, { error: NOT_INITIALIZED });
  seeds.restore(seedOf(body));
  try {
    const { reseeded, hook } = await mode.restoreCopies();
    return json(200, { ok: true, reseeded: ['Math.random', ...reseeded], hook });
  } catch (err) {
    if (err instanceof HookError) return json(502, { error: err.message });
    throw err;
  }
}

module.exports = { restored };
