'use strict';
// What every sharing mode does the same way around an activation: the __OW_* values it gets,
// the result it returns turned into a reply, and the log sentinels that close it.

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

function toResponse(result) {
  if (!isObject(result)) return json(502, { error: 'The action did not return an object.' });
  let text;
  try {
    text = JSON.stringify(result);
  } catch (err) {
    const { describeError } = require('./errors');
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
  SENTINEL, ACTIVATION_KEYS, TIMED_OUT, json, isObject, setActivationEnv, applyInitEnv, toResponse, writeSentinels,
  deadlineOf,
};
