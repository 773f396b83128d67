'use strict';
// Calling the action's iceboxRestored hook (README.md, "/icebox/restored"), in whichever
// thread or context holds that copy of the action.

const { describeError, stackOf } = require('./errors');

// The hook failed; the message is the reply's `error`.
class HookError extends Error {}

// Calls `hook` (undefined or null: the action has none) and waits for a promise it returns;
// resolves to whether there was one to call.
async function callHook(hook) {
  if (hook === undefined || hook === null) return false;
  if (typeof hook !== 'function') {
    throw new HookError(`The action's iceboxRestored is not a function (it is a ${typeof hook}).`);
  }
  try {
    await hook();
  } catch (err) {
    process.stderr.write(`${stackOf(err)}\n`);
    throw new HookError(describeError(err));
  }
  return true;
}

module.exports = { HookError, callHook };
