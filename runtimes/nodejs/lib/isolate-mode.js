'use strict';
// ICEBOX_SHARING=isolate: the action runs in a pool of isolates (one activation per isolate at a
// time, each with its own heap and GC, limited to ICEBOX_ISOLATE_MEMORY_MB): V8 isolates of
// isolated-vm (ICEBOX_ISOLATE_ENGINE=v8, the default) or worker_threads Workers (=worker). The
// main thread, which only routes activations, is the shared isolate that keeps icebox.shared
// state. Loaded on the first /init, so neither engine costs anything before.

const fs = require('fs');
const {
  json, isObject, applyInitEnv, writeSentinels, initializedTwice, initTarget, initFailed,
} = require('./response');
const { IsolatePool } = require('./isolate-pool');
const { processStore } = require('./shared-store');
const seeds = require('./seeds');

let config = null;
let state = 'uninitialized'; // -> 'initializing' -> 'ready'; a failed init goes back
let pool = null;

function configure(value) {
  config = value;
}

async function init(body) {
  if (state !== 'uninitialized') return initializedTwice();
  state = 'initializing';
  let dir = null;
  try {
    const value = isObject(body.value) ? body.value : {};
    // Workers start with a copy of the main thread's environment, this included.
    applyInitEnv(process.env, value.env);
    const main = initTarget(value);
    // The main thread runs no action code; the isolates' seeds are derived from its root.
    seeds.installMain();
    if (value.binary === true) dir = require('./archive').extract(value.code);
    const Isolate = config.isolateEngine === 'v8' ? require('./v8-isolate').V8Isolate : require('./worker-isolate').WorkerIsolate;
    pool = new IsolatePool(config, { code: dir === null ? value.code : null, main, dir }, processStore(), Isolate);
    await pool.start();
    state = 'ready';
    return json(200, { ok: true });
  } catch (err) {
    state = 'uninitialized';
    if (pool) await pool.close();
    pool = null;
    if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
    return initFailed(err);
  }
}

async function run(body) {
  if (state !== 'ready') return json(403, { error: 'Cannot invoke an uninitialized action.' });
  const response = await pool.run(body);
  await writeSentinels();
  return response;
}

// POST /icebox/reclaim: a whole idle isolate is garbage that costs nothing to collect.
async function beforeReclaim() {
  return { isolates_terminated: pool ? await pool.terminateIdle() : 0 };
}

function initialized() {
  return state === 'ready';
}

// /icebox/restored (lib/restored.js): each isolate has its own process.env, Math.random and copy
// of the hook. Isolates started later copy the main thread's process.env, already updated.
async function restoreCopies(env = []) {
  const { isolates, hook } = await pool.restore(env);
  return { reseeded: [`Math.random in ${isolates} isolate${isolates === 1 ? '' : 's'}`], hook };
}

function sharingStats() {
  const isolates = pool ? pool.stats() : require('./mode').idleSharingStats(config).isolates;
  return { mode: 'isolate', capacity: config.capacity, in_flight: pool ? pool.busy.size : 0, isolates };
}

module.exports = {
  configure, init, run, beforeReclaim, sharingStats, initialized, restoreCopies,
};
