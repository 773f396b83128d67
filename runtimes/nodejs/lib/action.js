'use strict';
// The action's life cycle: one /init that loads the user's entry point, then any number of /run
// activations, each closed by the log sentinel on stdout and stderr.

const { stackOf } = require('./errors');
const { callHook } = require('./hook');
const seeds = require('./seeds');
const {
  json, isObject, setActivationEnv, applyInitEnv, writeSentinels, initializedTwice, initTarget, initFailed, settle,
} = require('./response');

let config = null;
let state = 'uninitialized'; // -> 'initializing' -> 'ready'; a failed init goes back
let entry = null;
let hook; // the action's iceboxRestored, if it has one
// One `fail` callback per activation currently running user code (see onStrayError).
const inFlight = new Set();

// Node would exit on an error thrown from a user callback (a timer, an event handler, a
// promise nobody awaits). The proxy must outlive its activations, so such errors are caught
// here instead. When exactly one activation is running the error is almost surely its own
// (a leftover timer of an earlier one is the exception) and fails it at once, rather than
// leaving it hanging until its deadline; otherwise (between activations, or with several in
// flight) it cannot be attributed and is only logged.
function onStrayError(err) {
  if (inFlight.size === 1) {
    for (const fail of inFlight) fail(err);
  } else {
    process.stderr.write(`Uncaught error in action code: ${stackOf(err)}\n`);
  }
}
process.on('uncaughtException', onStrayError);
process.on('unhandledRejection', onStrayError);

async function init(body) {
  if (state !== 'uninitialized') return initializedTwice();
  state = 'initializing';
  try {
    const value = isObject(body.value) ? body.value : {};
    applyInitEnv(process.env, value.env);
    installSharedApi();
    seeds.installMain();
    ({ entry, hook } = await load(value));
    state = 'ready';
    return json(200, { ok: true });
  } catch (err) {
    state = 'uninitialized';
    return initFailed(err);
  }
}

function load(value) {
  const main = initTarget(value);
  return value.binary === true
    ? require('./archive').load(value.code, main)
    : require('./source').load(value.code, main);
}

async function run(body) {
  if (state !== 'ready') return json(403, { error: 'Cannot invoke an uninitialized action.' });
  setActivationEnv(process.env, body);
  const response = await activate(body.value === undefined ? {} : body.value);
  if (config.eagerGc) require('./full-gc').fullGc();
  await writeSentinels();
  return response;
}

async function activate(params) {
  let fail;
  try {
    return await settle(entry, params, (reject) => { fail = reject; inFlight.add(fail); });
  } finally {
    inFlight.delete(fail);
  }
}

// globalThis.icebox.shared: in one process, a Map (lib/shared-store.js). Built on first use:
// loading its two small modules at every /init measurably grew the idle instance (about 4 MiB
// of RSS, V8 growing a heap space), and most actions never touch it.
function installSharedApi() {
  Object.defineProperty(globalThis, 'icebox', {
    configurable: true,
    enumerable: false,
    get() {
      const { localSharedApi, install } = require('./shared-api');
      install(globalThis, localSharedApi(require('./shared-store').processStore()), 'process');
      return globalThis.icebox;
    },
  });
}

function configure(value) {
  config = value;
}

function initialized() {
  return state === 'ready';
}

// /icebox/restored (lib/restored.js): the main context, reseeded there and whose process.env
// lib/restored.js has already updated, is the only one here.
async function restoreCopies() {
  return { reseeded: [], hook: await callHook(hook) };
}

function sharingStats() {
  return { mode: 'process', capacity: config.capacity, in_flight: inFlight.size };
}

module.exports = {
  configure, init, run, sharingStats, initialized, restoreCopies,
};
