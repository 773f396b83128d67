'use strict';
// ICEBOX_SHARING=shared (Photons-style): concurrent activations share the process, its heap and
// its GC, but each runs in its own vm context (lib/vm-context.js), so their globals are
// private. Contexts are pooled: created on demand, reused afterwards, so a context keeps its
// globals across the activations that reuse it, as a warm container would. Loaded on the first
// /init, so vm costs nothing before.

const fs = require('fs');
const { AsyncLocalStorage } = require('async_hooks');
const { describeError, stackOf } = require('./errors');
const {
  TIMED_OUT, json, isObject, applyInitEnv, setActivationEnv, toResponse, writeSentinels, deadlineOf,
  initializedTwice, initTarget, initFailed,
} = require('./response');
const { ActionCode, ActionContext } = require('./vm-context');
const { processStore } = require('./shared-store');
const { localSharedApi, install } = require('./shared-api');
const { callHook } = require('./hook');
const seeds = require('./seeds');


let config = null;
let state = 'uninitialized'; // -> 'initializing' -> 'ready'; a failed init goes back
let code = null;
let baseEnv = null;
let shared = null;
const idle = []; // a stack: the most recently used context is reused first
const busy = new Set();
let created = 0;

// Each activation runs inside its own async context, so an error thrown from one of its
// callbacks (a timer, an unawaited promise) fails exactly that activation, even with several
// in flight; an error no activation owns any more is only logged.
const activations = new AsyncLocalStorage();
function onStrayError(err) {
  const owner = activations.getStore();
  if (owner && !owner.done) owner.fail(err);
  else process.stderr.write(`Uncaught error in action code: ${stackOf(err)}\n`);
}

function configure(value) {
  config = value;
}

async function init(body) {
  if (state !== 'uninitialized') return initializedTwice();
  state = 'initializing';
  let dir = null;
  try {
    const value = isObject(body.value) ? body.value : {};
    applyInitEnv(process.env, value.env);
    baseEnv = { ...process.env };
    shared = localSharedApi(processStore());
    install(globalThis, shared, 'shared');
    process.on('uncaughtException', onStrayError);
    process.on('unhandledRejection', onStrayError);
    // NODE_PATH packages an action requires are loaded in the main context, with its Math.
    seeds.installMain();
    const main = initTarget(value);
    if (value.binary === true) {
      dir = require('./archive').extract(value.code);
      code = ActionCode.fromDir(dir, main);
    } else {
      code = ActionCode.fromSource(value.code, main);
    }
    idle.push(newContext());
    state = 'ready';
    return json(200, { ok: true });
  } catch (err) {
    state = 'uninitialized';
    process.off('uncaughtException', onStrayError);
    process.off('unhandledRejection', onStrayError);
    if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
    return initFailed(err);
  }
}

function newContext() {
  // Numbered in creation order: a context's Math.random seed is derived from its number.
  const id = created + 1;
  const context = new ActionContext(code, baseEnv, shared, seeds.seedFor('context', id));
  context.id = id;
  created = id;
  return context;
}

async function run(body) {
  if (state !== 'ready') return json(403, { error: 'Cannot invoke an uninitialized action.' });
  const response = await activate(body);
  if (config.eagerGc) require('./full-gc').fullGc();
  await writeSentinels();
  return response;
}

async function activate(body) {
  let context = idle.pop();
  if (!context) {
    try {
      context = newContext();
    } catch (err) {
      process.stderr.write(`${stackOf(err)}\n`);
      return json(502, { error: `A new context could not load the action: ${describeError(err)}` });
    }
  }
  busy.add(context);
  setActivationEnv(context.process.env, body);
  const { response, reusable } = await invoke(context, body.value === undefined ? {} : body.value, deadlineOf(body));
  busy.delete(context);
  // A context whose activation was cut off may still have code running or half-done state.
  if (reusable) idle.push(context);
  return response;
}

function invoke(context, params, deadline) {
  return new Promise((resolve) => {
    let timer = null;
    const owner = { done: false };
    const finish = (response, reusable) => {
      if (owner.done) return;
      owner.done = true;
      clearTimeout(timer);
      resolve({ response, reusable });
    };
    owner.fail = (err) => {
      process.stderr.write(`${stackOf(err)}\n`);
      finish(json(502, { error: describeError(err) }), true);
    };
    // A context that never ran the activation is as good as before; one cut off midway may
    // still have code running or half-done state.
    const timedOut = (started = true) => {
      process.stderr.write(`${TIMED_OUT}\n`);
      finish(json(504, { error: TIMED_OUT }), !started);
    };
    const remaining = deadline === null ? null : deadline - Date.now();
    if (remaining !== null) {
      if (remaining <= 0) {
        timedOut(false);
        return;
      }
      timer = setTimeout(timedOut, Math.min(2 ** 31 - 1, remaining));
    }
    activations.run(owner, () => {
      let result;
      try {
        result = context.call(params, remaining);
      } catch (err) {
        if (err && err.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') timedOut();
        else owner.fail(err);
        return;
      }
      Promise.resolve(result).then((value) => finish(toResponse(value), true), owner.fail);
    });
  });
}

// POST /icebox/reclaim: contexts beyond the one an idle instance needs hold their own copies
// of the action's globals and caches; dropping them (the most recently used stays) lets the
// collection that follows free them, as isolate mode terminates its idle isolates.
async function beforeReclaim() {
  const dropped = Math.max(0, idle.length - 1);
  idle.splice(0, dropped);
  return { contexts_dropped: dropped };
}

function initialized() {
  return state === 'ready';
}

// /icebox/restored (lib/restored.js): every live context holds a copy of the action loaded
// before this call, so each gets `env` (name/value pairs) in its own process.env and its own new
// seed, and then its copy of the hook is called; all are updated before the first hook runs.
// Contexts created later copy their environment from baseEnv, updated here too, and get seeds
// from the new root.
async function restoreCopies(env = []) {
  const contexts = [...idle, ...busy].sort((x, y) => x.id - y.id);
  for (const [name, value] of env) baseEnv[name] = value;
  for (const context of contexts) context.setEnv(env);
  for (const context of contexts) context.random.reseed(seeds.seedFor('context', context.id));
  let hook = false;
  for (const context of contexts) {
    if (await callHook(context.hook)) hook = true;
  }
  return { reseeded: [`Math.random in ${contexts.length} vm context${contexts.length === 1 ? '' : 's'}`], hook };
}

function sharingStats() {
  return {
    mode: 'shared',
    capacity: config.capacity,
    in_flight: busy.size,
    contexts: { live: idle.length + busy.size, busy: busy.size, created },
  };
}

module.exports = {
  configure, init, run, beforeReclaim, sharingStats, initialized, restoreCopies,
};
