'use strict';
// The code of one worker isolate (isolate mode, lib/isolate-pool.js): loads the action, then
// runs one activation at a time for the main thread. Everything the action writes to stdout or
// stderr travels to the main thread on the same port as the result, so its logs are written
// there before the activation's sentinels, in order.

const { parentPort, workerData } = require('worker_threads');
const { InitError, describeError, stackOf } = require('./errors');
const { setActivationEnv, settle } = require('./response');
const { remoteSharedApi, install } = require('./shared-api');
const random = require('./random');
const { callHook } = require('./hook');

// Before the action is loaded, so a reference to Math.random it keeps is the reseedable one.
const generator = random.install(Math, workerData.seed);

function forward(fd, stream) {
  stream.write = (chunk, encoding, callback) => {
    const done = typeof encoding === 'function' ? encoding : callback;
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('latin1');
    parentPort.postMessage({ type: 'log', fd, text, binary: typeof chunk !== 'string' });
    if (typeof done === 'function') process.nextTick(done);
    return true;
  };
}
forward(1, process.stdout);
forward(2, process.stderr);

const pending = new Map(); // shared-state request id -> {resolve, reject}
let nextRequest = 1;
function request(op, fields) {
  const id = nextRequest++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    try {
      parentPort.postMessage({ type: 'shared', id, op, ...fields });
    } catch (err) { // a value that cannot be cloned
      pending.delete(id);
      reject(err);
    }
  });
}
install(globalThis, remoteSharedApi(request), 'isolate');

// One activation at a time runs here, so an error thrown from one of the action's callbacks
// is, unlike in a shared process, certainly the running activation's (or, between
// activations, a leftover of an earlier one's: logged).
let failCurrent = null;
function onStrayError(err) {
  if (failCurrent) failCurrent(err);
  else process.stderr.write(`Uncaught error in action code: ${stackOf(err)}\n`);
}
process.on('uncaughtException', onStrayError);
process.on('unhandledRejection', onStrayError);

let entry = null;
let hook; // the action's iceboxRestored, if it has one

parentPort.on('message', (msg) => {
  if (msg.type === 'run') {
    run(msg);
  } else if (msg.type === 'restored') {
    restored(msg.seed, msg.env);
  } else if (msg.type === 'shared-reply') {
    const waiter = pending.get(msg.id);
    pending.delete(msg.id);
    if (!waiter) return;
    if (msg.error !== undefined) waiter.reject(new Error(msg.error));
    else waiter.resolve(msg);
  }
});

async function run(msg) {
  const started = performance.timeOrigin + performance.now();
  setActivationEnv(process.env, msg.activation);
  let response;
  try {
    response = await settle(entry, msg.params, (reject) => { failCurrent = reject; });
  } finally {
    failCurrent = null;
  }
  parentPort.postMessage({ type: 'result', started, response });
}

// /icebox/restored (lib/isolate-pool.js): the main thread checked `env` (name/value pairs) and
// derived this isolate's new seed. This Worker's process.env is its own copy, taken when it
// started, so the new values are set here, before the hook that may read them.
async function restored(seed, env) {
  for (const [name, value] of env) process.env[name] = value;
  generator.reseed(seed);
  let reply;
  try {
    reply = { type: 'restored', hook: await callHook(hook) };
  } catch (err) {
    reply = { type: 'restored', error: err.message };
  }
  parentPort.postMessage(reply);
}

async function load() {
  try {
    const { code, main, dir } = workerData;
    ({ entry, hook } = dir === null
      ? require('./source').load(code, main)
      : await require('./archive').loadDir(dir, main));
  } catch (err) {
    parentPort.postMessage({ type: 'init-error', reason: err instanceof InitError ? err.message : describeError(err) });
    return;
  }
  parentPort.postMessage({ type: 'ready' });
}

load();
