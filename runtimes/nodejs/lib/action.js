'use strict';
// The action's life cycle: one /init that loads the user's entry point, then any number of /run
// activations, each closed by the log sentinel on stdout and stderr.

const { InitError, describeError, stackOf } = require('./errors');
const {
  json, isObject, setActivationEnv, applyInitEnv, toResponse, writeSentinels,
} = require('./response');

// Eager mode, Desiccant's "eager" baseline: a full GC at the end of every activation, before the
// reply, so the activation's latency pays for it. Read from the proxy's own environment when
// this module loads (on the first /init, before the action's `env` is applied).
const EAGER_GC = process.env.ICEBOX_EAGER_GC === '1';

let state = 'uninitialized'; // -> 'initializing' -> 'ready'; a failed init goes back
let entry = null;
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
  if (state !== 'uninitialized') {
    return json(403, { error: 'Internal error. Cannot initialize the action more than once.' });
  }
  state = 'initializing';
  try {
    const value = isObject(body.value) ? body.value : {};
    applyInitEnv(process.env, value.env);
    installSharedApi();
    entry = await load(value);
    state = 'ready';
    return json(200, { ok: true });
  } catch (err) {
    state = 'uninitialized';
    const reason = err instanceof InitError ? err.message : describeError(err);
    return json(502, { error: `Initialization has failed due to: ${reason}` });
  }
}

function load(value) {
  const main = typeof value.main === 'string' && value.main.trim() !== '' ? value.main.trim() : 'main';
  if (typeof value.code !== 'string' || value.code === '') {
    throw new InitError('Missing "code": there is no action source or zip to load.');
  }
  return value.binary === true
    ? require('./archive').load(value.code, main)
    : require('./source').load(value.code, main);
}

async function run(body) {
  if (state !== 'ready') return json(403, { error: 'Cannot invoke an uninitialized action.' });
  setActivationEnv(process.env, body);
  const response = await activate(body.value === undefined ? {} : body.value);
  if (EAGER_GC) require('./full-gc').fullGc();
  await writeSentinels();
  return response;
}

async function activate(params) {
  let fail;
  const strayError = new Promise((resolve, reject) => { fail = reject; });
  inFlight.add(fail);
  try {
    return toResponse(await Promise.race([invoke(params), strayError]));
  } catch (err) {
    process.stderr.write(`${stackOf(err)}\n`);
    return json(502, { error: describeError(err) });
  } finally {
    inFlight.delete(fail);
  }
}

// `async` turns a synchronous throw into a rejection and adopts a returned promise.
async function invoke(params) {
  return entry(params);
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

function sharingStats(config) {
  return { mode: 'process', capacity: config.capacity, in_flight: inFlight.size };
}

module.exports = { init, run, sharingStats };
