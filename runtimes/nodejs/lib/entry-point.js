'use strict';
// Finding the function named by /init's "main" among a module's exports.

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

module.exports = { resolveEntry };
