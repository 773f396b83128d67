'use strict';
// What every sharing mode does the same way around /init and an activation: the checks and
// replies of /init, the __OW_* values an activation gets, its result turned into a reply, and
// the log sentinels that close it.

const { InitError, describeError, stackOf } = require('./errors');

const SENTINEL = 'XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n';
// Top-level /run keys that OpenWhisk exports to the action as __OW_<KEY>.
const ACTIVATION_KEYS = [
  'namespace', 'action_name', 'activation_id', 'transaction_id', 'api_key', 'deadline', 'action_version',
];

function json(status, value) {
  return { status, body: JSON.stringify(value) };
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// Sets (or, when the body lacks them, deletes) the activation's __OW_* variables in `env`.
function setActivationEnv(env, body) {
  for (const key of ACTIVATION_KEYS) {
    const name = `__OW_${key.toUpperCase()}`;
    const val = body[key];
    if (val === undefined || val === null) delete env[name];
    else env[name] = String(val);
  }
}

// OpenWhisk passes /init's env strings through and JSON-encodes anything else.
function applyInitEnv(env, values) {
  if (!isObject(values)) return;
  for (const [key, val] of Object.entries(values)) {
    env[key] = typeof val === 'string' ? val : JSON.stringify(val);
  }
}

// /init's answer to a second /init.
function initializedTwice() {
  return json(403, { error: 'Internal error. Cannot initialize the action more than once.' });
}

// The entry point /init names (default "main"), once it is known there is code to load.
function initTarget(value) {
  if (typeof value.code !== 'string' || value.code === '') {
    throw new InitError('Missing "code": there is no action source or zip to load.');
  }
  return typeof value.main === 'string' && value.main.trim() !== '' ? value.main.trim() : 'main';
}

function initFailed(err) {
  const reason = err instanceof InitError ? err.message : describeError(err);
  return json(502, { error: `Initialization has failed due to: ${reason}` });
}

// Runs one activation of `entry`: its result as a reply, a throw or rejection (or an error
// `onFail` is handed a way to raise, from the activation's callbacks) as a logged 502.
async function settle(entry, params, onFail) {
  const strayError = new Promise((resolve, reject) => onFail(reject));
  try {
    // `async` turns a synchronous throw into a rejection and adopts a returned promise.
    return toResponse(await Promise.race([(async () => entry(params))(), strayError]));
  } catch (err) {
    process.stderr.write(`${stackOf(err)}\n`);
    return json(502, { error: describeError(err) });
  }
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

// The /run body's deadline (ms since the epoch, number or string), or null without one.
function deadlineOf(body) {
  if (body.deadline === undefined || body.deadline === null || body.deadline === '') return null;
  const ms = Number(body.deadline);
  return Number.isFinite(ms) ? ms : null;
}

const TIMED_OUT = 'The action did not finish before its deadline and timed out.';

module.exports = {
  TIMED_OUT, json, isObject, setActivationEnv, applyInitEnv, toResponse, writeSentinels, deadlineOf,
  initializedTwice, initTarget, initFailed, settle,
};
