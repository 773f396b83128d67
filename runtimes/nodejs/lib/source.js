'use strict';
// Loads a single-file action (binary: false). The source is evaluated the way Node evaluates a
// CommonJS module, so `require` of Node's built-in modules, `module.exports` and `exports` work
// as usual; a plain top-level `function main` (the classic OpenWhisk style) is found too, and so
// is a top-level `function iceboxRestored`. Returns {entry, hook} (lib/entry-point.js).

const Module = require('module');
const path = require('path');
const vm = require('vm');
const { InitError } = require('./errors');
const { resolveEntry, loaded, HOOK } = require('./entry-point');

const FOUND = '__icebox_found__';
const PARAMS = ['exports', 'require', 'module', '__filename', '__dirname', FOUND];

function load(code, main) {
  // A name for stack traces and relative requires; nothing is written there.
  const filename = path.resolve('action.js');
  const dirname = path.dirname(filename);
  const mod = new Module(filename, null);
  mod.filename = filename;
  mod.paths = Module._nodeModulePaths(dirname);

  let compiled;
  try {
    compiled = vm.compileFunction(withLookup(code, main), PARAMS, {
      filename,
      // Lets the action use import() the way a module loaded by require() can.
      importModuleDynamically: vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
  } catch (err) {
    throw located(err);
  }
  let declared;
  let declaredHook;
  compiled.call(mod.exports, mod.exports, Module.createRequire(filename), mod, filename, dirname,
    (fn, hook) => { declared = fn; declaredHook = hook; });
  mod.loaded = true;
  return loaded(declared || resolveEntry(mod.exports, main, 'the code'), mod.exports, declaredHook);
}

// Inside the module wrapper a top-level `function main` is a local binding that nothing outside
// can see, so a statement appended to the source hands it (and the hook) out. `typeof` makes
// that safe when no such binding exists; a module that returns early at top level simply
// skips it.
function withLookup(code, main) {
  const lookup = (name) => (isIdentifier(name) ? `typeof ${name} === 'function' ? ${name} : undefined` : 'undefined');
  return `${code}\n;${FOUND}(${lookup(main)}, ${lookup(HOOK)});`;
}

function isIdentifier(name) {
  if (!/^[A-Za-z_$][\w$]*$/.test(name)) return false;
  try {
    // Rejects reserved words, including those reserved only in strict code.
    new Function(`'use strict'; var ${name};`); // eslint-disable-line no-new-func, no-new
    return true;
  } catch (ignored) {
    return false;
  }
}

// V8 keeps the position of a syntax error only in the decorated stack ("file:line" first).
function located(err) {
  if (!(err instanceof SyntaxError)) return err;
  const where = /^(.*:\d+)\n/.exec(err.stack || '');
  const suffix = where ? ` (${path.basename(where[1])})` : '';
  return new InitError(`SyntaxError: ${err.message}${suffix}`);
}

module.exports = { load, withLookup, located, FOUND };
