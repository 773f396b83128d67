'use strict';
// The action's life cycle: one /init that loads the user's entry point, then any number of /run
// activations, each closed by the log sentinel on stdout and stderr.

const { InitError, describeError, stackOf } = require('./errors');

const SENTINEL = 'XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n';
// Top-level /run keys that OpenWhisk exports to the action as __OW_<KEY>.
const ACTIVATION_KEYS = [
  'namespace', 'action_name', 'activation_id', 'transaction_id', 'api_key', 'deadline', 'action_version',
];

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

function json(status, value) {
  return { status, body: JSON.stringify(value) };
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

async function init(body) {
  if (state !== 'uninitialized') {
    return json(403, { error: 'Internal error. Cannot initialize the action more than once.' });
  }
  state = 'initializing';
  try {
    const value = isObject(body.value) ? body.value : {};
    applyEnv(value.env);
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

// OpenWhisk passes strings through and JSON-encodes anything else.
function applyEnv(env) {
  if (!isObject(env)) return;
  for (const [key, val] of Object.entries(env)) {
    process.env[key] = typeof val === 'string' ? val : JSON.stringify(val);
  }
}

async function run(body) {
  if (state !== 'ready') return json(403, { error: 'Cannot invoke an uninitialized action.' });
  setActivationEnv(body);
  const response = await activate(body.value === undefined ? {} : body.value);
  if (EAGER_GC) require('./full-gc').fullGc();
  await writeSentinels();
  return response;
}

function setActivationEnv(body) {
  for (const key of ACTIVATION_KEYS) {
    const name = `__OW_${key.toUpperCase()}`;
    const val = body[key];
    if (val === undefined || val === null) delete process.env[name];
    else process.env[name] = String(val);
  }
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

function toResponse(result) {
  if (!isObject(result)) return json(502, { error: 'The action did not return an object.' });
  let text;
  try {
    text = JSON.stringify(result);
  } catch (err) {
    return json(502, { error: `The action's result cannot be serialized as JSON: ${describeError(err)}` });
  }
  // toJSON() may turn an object into something else (a Date becomes a string).
  if (text === undefined || text[0] !== '{') return json(502, { error: 'The action did not return an object.' });
  // OpenWhisk reports a returned {"error": ...} as an application error.
  return { status: Object.prototype.hasOwnProperty.call(result, 'error') ? 502 : 200, body: text };
}

// Resolves once both sentinels have been handed to the OS, so that iceboxd, which reads the
// activation's logs up to the sentinel, has them by the time it sees the response.
function writeSentinels() {
  return Promise.all([process.stdout, process.stderr].map(
    (stream) => new Promise((resolve) => stream.write(SENTINEL, () => resolve())),
  ));
}

module.exports = { init, run };
