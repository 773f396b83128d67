'use strict';
// Finding the function named by /init's "main" among a module's exports, and the action's
// optional iceboxRestored hook (README.md, "/icebox/restored").

const { InitError } = require('./errors');

// `main` may be a dotted path ("handlers.resize"), as OpenWhisk evaluates it as an expression
// on the exports; a method found that way keeps its object as `this`.
function resolveEntry(exportsValue, main, where) {
  const parts = main.split('.');
  let owner = null;
  let value = exportsValue;
  for (const part of parts) {
    owner = value;
    value = value === null || value === undefined ? undefined : value[part];
  }
  if (typeof value !== 'function') {
    throw new InitError(`The action has no function "${main}": ${where} must declare it or export `
      + `it (module.exports.${main} = ...).`);
  }
  return parts.length > 1 ? value.bind(owner) : value;
}

const HOOK = 'iceboxRestored';

// The loaded action: its entry point and its hook (undefined without one). The hook is an
// exported iceboxRestored, or a top-level function of that name in a single-file action
// (`declaredHook`), as a top-level `function main` is found; a method keeps its object as
// `this`. Anything else defined under that name is kept as it is, for /icebox/restored to
// refuse: only that call needs the hook, so /init does not fail over it.
function loaded(entry, exportsValue, declaredHook) {
  let hook = declaredHook;
  if (hook === undefined && exportsValue !== null && exportsValue !== undefined) hook = exportsValue[HOOK];
  if (typeof hook === 'function' && hook !== declaredHook) hook = hook.bind(exportsValue);
  return { entry, hook };
}

module.exports = { resolveEntry, loaded, HOOK };
