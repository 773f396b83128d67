'use strict';
// Shared mode's unit of isolation (Photons-style): a V8 context with its own globals, in which
// the action's module is evaluated once. Contexts share the heap, the GC and the compiled code
// (the scripts are compiled once, at /init, and run in every context), and Node's built-in
// modules, which live in the main context. A zipped action's own files get a module cache per
// context, so their module-level state is private too; packages outside the archive
// (NODE_PATH) are loaded once, in the main context, and shared.

const Module = require('module');
const path = require('path');
const vm = require('vm');
const { InitError } = require('./errors');
const { resolveEntry, loaded } = require('./entry-point');
const random = require('./random');
const { withLookup, located, FOUND } = require('./source');
const { install } = require('./shared-api');

const WRAPPER = ['exports', 'require', 'module', '__filename', '__dirname'];
// Node's globals that are not part of the language, so a fresh context lacks them. Functions
// and classes are the main context's: `x instanceof Buffer` holds across contexts.
const NODE_GLOBALS = [
  'Buffer', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'AbortController', 'AbortSignal',
  'Event', 'EventTarget', 'MessageChannel', 'MessagePort', 'MessageEvent', 'BroadcastChannel', 'Blob',
  'DOMException', 'atob', 'btoa', 'fetch', 'FormData', 'Headers', 'Request', 'Response', 'structuredClone',
  'queueMicrotask', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate',
  'clearImmediate', 'performance', 'crypto', 'console',
];
const INVOKE = Symbol.for('icebox.invoke');
const CALL = new vm.Script('globalThis[Symbol.for("icebox.invoke")]()', { filename: 'icebox-invoke.js' });

// A vm context's global object answers every lookup through Node's interceptors, which makes
// each free reference to a global (`Math`, `Array`, `Buffer` ...) in a hot loop some 70 times
// slower than in the main context. So the wrapper copies the globals into local variables of an
// outer function once per context, and the module's code finds them there. (Code that replaces
// one of them through globalThis later is not seen by the module's own free references.)
const SHADOWED = (() => {
  const names = new Set(Object.getOwnPropertyNames(vm.runInNewContext('globalThis')));
  for (const name of [...NODE_GLOBALS, 'global', 'process', 'icebox']) names.add(name);
  // eval must stay the real one for direct eval; the rest cannot or need not be variables.
  for (const name of ['eval', 'globalThis', 'undefined', 'NaN', 'Infinity', 'arguments']) names.delete(name);
  return [...names].filter((name) => /^[A-Za-z_$][\w$]*$/.test(name));
})();
const PRELUDE = `var ${SHADOWED.map((name) => `${name} = globalThis.${name}`).join(', ')};`;

function wrap(code, params) {
  // The prefix stays on the code's first line, so line numbers in stacks are the file's own.
  return `(function () { ${PRELUDE} return function (${params.join(', ')}) {${code.replace(/^#!.*/, '')}\n}; })()`;
}

function compile(source, filename) {
  try {
    return new vm.Script(source, { filename });
  } catch (err) {
    throw located(err);
  }
}

// The action's code, compiled once; `instantiate(context)` evaluates it in a context.
class ActionCode {
  // A single-file action.
  static fromSource(code, main) {
    const filename = path.resolve('action.js');
    const script = compile(wrap(withLookup(code, main), [...WRAPPER, FOUND]), filename);
    return new ActionCode({ main, filename, script, root: null });
  }

  // A zipped CommonJS action extracted to `dir`.
  static fromDir(dir, main) {
    const { file, esm } = require('./archive').moduleFile(dir);
    if (esm) {
      throw new InitError('ES module actions cannot run in shared mode (vm contexts need --experimental-vm-modules); '
        + 'use a CommonJS module, or the process or isolate mode');
    }
    return new ActionCode({ main, filename: file, script: null, root: dir });
  }

  constructor({ main, filename, script, root }) {
    this.main = main;
    this.filename = filename;
    this.root = root;
    this.scripts = new Map(); // file -> vm.Script, shared by all contexts
    if (script) this.scripts.set(filename, script);
    if (root) this.scriptFor(filename); // syntax errors of the entry module fail /init
  }

  scriptFor(filename) {
    let script = this.scripts.get(filename);
    if (!script) {
      const fs = require('fs');
      script = compile(wrap(fs.readFileSync(filename, 'utf8'), WRAPPER), filename);
      this.scripts.set(filename, script);
    }
    return script;
  }

  // Evaluates the action's module in `context`; returns {entry, hook} (lib/entry-point.js).
  instantiate(context) {
    if (this.root === null) {
      const mod = new Module(this.filename, null);
      mod.filename = this.filename;
      mod.paths = Module._nodeModulePaths(path.dirname(this.filename));
      let declared;
      let declaredHook;
      const fn = this.scripts.get(this.filename).runInContext(context);
      fn.call(mod.exports, mod.exports, Module.createRequire(this.filename), mod, this.filename,
        path.dirname(this.filename), (found, hook) => { declared = found; declaredHook = hook; });
      mod.loaded = true;
      return loaded(declared || resolveEntry(mod.exports, this.main, 'the code'), mod.exports, declaredHook);
    }
    const modules = new ModuleCache(this, context);
    const exportsValue = modules.load(this.filename);
    return loaded(resolveEntry(exportsValue, this.main, `the module ${path.relative(this.root, this.filename)}`), exportsValue);
  }

  inRoot(filename) {
    return filename.startsWith(this.root + path.sep);
  }
}

// The modules of a zipped action as one context sees them.
class ModuleCache {
  constructor(code, context) {
    this.code = code;
    this.context = context;
    this.modules = new Map();
  }

  load(filename) {
    const cached = this.modules.get(filename);
    if (cached) return cached.exports;
    const mod = { id: filename, filename, exports: {}, loaded: false, children: [], paths: Module._nodeModulePaths(path.dirname(filename)) };
    this.modules.set(filename, mod);
    if (filename.endsWith('.json')) {
      mod.exports = JSON.parse(require('fs').readFileSync(filename, 'utf8'));
    } else {
      const fn = this.code.scriptFor(filename).runInContext(this.context);
      fn.call(mod.exports, mod.exports, this.requireFor(filename), mod, filename, path.dirname(filename));
    }
    mod.loaded = true;
    return mod.exports;
  }

  requireFor(parent) {
    const nodeRequire = Module.createRequire(parent);
    const req = (id) => {
      const resolved = nodeRequire.resolve(id);
      const own = path.isAbsolute(resolved) && this.code.inRoot(resolved) && !resolved.endsWith('.node');
      return own ? this.load(resolved) : nodeRequire(id);
    };
    req.resolve = nodeRequire.resolve;
    req.cache = nodeRequire.cache;
    return req;
  }
}

// `process` as a context sees it: the real one, except for its own `env` (so __OW_* are per
// activation) and an `exit` that ends only the activation instead of every one in the process.
function processView(env) {
  const own = {
    env,
    exit(code) {
      throw new Error(`process.exit(${code === undefined ? '' : code}) was called; in shared mode it ends only this activation`);
    },
  };
  return new Proxy(process, {
    get: (target, prop) => (Object.prototype.hasOwnProperty.call(own, prop) ? own[prop] : Reflect.get(target, prop, target)),
    set: (target, prop, value) => {
      if (prop === 'env') own.env = value;
      else Reflect.set(target, prop, value, target);
      return true;
    },
  });
}

class ActionContext {
  // `baseEnv`: the environment at /init; `shared`: the icebox.shared API; `seed`: 32 bytes for
  // the context's own Math.random (lib/random.js).
  constructor(code, baseEnv, shared, seed) {
    this.env = { ...baseEnv };
    const sandbox = {};
    for (const name of NODE_GLOBALS) if (globalThis[name] !== undefined) sandbox[name] = globalThis[name];
    this.process = processView(this.env);
    sandbox.process = this.process;
    this.context = vm.createContext(sandbox, { name: 'icebox action' });
    this.global = vm.runInContext('globalThis', this.context);
    Object.defineProperty(this.global, 'global', { value: this.global, writable: true, configurable: true });
    install(this.global, shared, 'shared');
    // Before the action's code runs, so a reference to Math.random it keeps is the reseedable
    // one; compiled in the context, where calls to it are as fast as to V8's own.
    this.random = random.install(this.global.Math, seed, random.factoryIn(this.context));
    ({ entry: this.entry, hook: this.hook } = code.instantiate(this.context));
  }

  // Sets variables in the context's process.env (/icebox/restored): whichever object that is
  // now, as the action may have replaced it; its other names (the __OW_* of the last
  // activation, the action's own) are kept.
  setEnv(entries) {
    const env = this.process.env;
    if (env === null || typeof env !== 'object') return;
    for (const [name, value] of entries) env[name] = value;
  }

  // Calls the entry point; its synchronous part is cut off after `timeoutMs` (null: no limit),
  // throwing an error with code ERR_SCRIPT_EXECUTION_TIMEOUT.
  call(params, timeoutMs) {
    const { entry } = this; // called as a plain function, as in process mode
    this.global[INVOKE] = () => entry(params);
    try {
      return CALL.runInContext(this.context, timeoutMs === null ? {} : { timeout: Math.min(2 ** 31 - 1, Math.max(1, Math.ceil(timeoutMs))) });
    } finally {
      delete this.global[INVOKE];
    }
  }
}

module.exports = { ActionCode, ActionContext };
