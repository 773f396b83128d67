// Not a Node.js module: lib/v8-isolate.js evaluates this expression inside every V8 isolate of
// isolate mode's v8 engine and calls it once. A bare V8 context has only the language's own
// built-ins, so this gives the action the part of Node's API that needs no host access
// (README.md, "The v8 engine"), built on `host`, the host's callbacks (lib/v8-host.js), and
// returns the functions the host calls: load, run, fire, restored, collect. `parts` are the
// pieces kept in files of their own (lib/v8-web.js, lib/v8-node-modules.js). Everything the
// action can reach goes through `host`, which only ever copies values across: nothing of the
// host's heap is visible in here.
// eslint-disable-next-line no-unused-expressions -- the file is one expression, evaluated for its value
(function bootstrap(host, options, parts) {
  'use strict';

  const g = globalThis;
  // V8's gc(), there because lib/v8-isolate.js starts each context with --expose-gc, kept for
  // the host's collections (collect below) and taken from the action: the property cannot be
  // deleted (V8 makes it non-configurable), so it stays, undefined.
  const fullGc = typeof g.gc === 'function' ? g.gc : null;
  if (fullGc) g.gc = undefined;
  const define = (target, name, value) => Object.defineProperty(target, name, {
    value, writable: true, configurable: true, enumerable: false,
  });
  // Loaded on first use only, so that an isolate whose action never touches Buffer does not
  // pay for its ~50 KB of code in every isolate's heap.
  const lazy = (target, name, make) => Object.defineProperty(target, name, {
    get() { const value = make(); define(target, name, value); return value; },
    set(value) { define(target, name, value); },
    configurable: true,
    enumerable: false,
  });

  // --- errors of the running activation ---------------------------------------------------
  // One activation runs in an isolate at a time, so an error thrown from one of the action's
  // callbacks is the running activation's (between activations a leftover: logged).
  let failCurrent = null;
  function describe(err) {
    if (err !== null && typeof err === 'object' && typeof err.message === 'string') {
      const name = typeof err.name === 'string' && err.name ? err.name : 'Error';
      return err.message ? `${name}: ${err.message}` : name;
    }
    if (typeof err === 'string') return err;
    try {
      const text = JSON.stringify(err);
      if (text !== undefined) return text;
    } catch (ignored) { /* circular or BigInt */ }
    try { return String(err); } catch (ignored) { return Object.prototype.toString.call(err); }
  }
  const stackOf = (err) => (err !== null && typeof err === 'object' && typeof err.stack === 'string' ? err.stack : describe(err));
  function stray(err) {
    if (failCurrent) failCurrent(err);
    else host.log(2, `Uncaught error in action code: ${stackOf(err)}\n`);
  }

  // --- console ----------------------------------------------------------------------------
  // Formatted by the host's util.format, which gets a structured-clone copy of the arguments;
  // what cannot be cloned (a function, a symbol) is shown by name.
  function formatOne(arg) {
    if (typeof arg === 'string') return arg;
    try {
      return host.format([arg]);
    } catch (ignored) {
      if (typeof arg === 'function') return `[Function: ${arg.name || '(anonymous)'}]`;
      try { return String(arg); } catch (ignoredToo) { return Object.prototype.toString.call(arg); }
    }
  }
  function format(args) {
    try {
      return host.format(args);
    } catch (ignored) {
      return args.map(formatOne).join(' ');
    }
  }
  const write = (fd) => (...args) => host.log(fd, `${format(args)}\n`);
  const counts = new Map();
  const times = new Map();
  const console = {
    log: write(1),
    info: write(1),
    debug: write(1),
    dir: (value) => host.log(1, `${formatOne(value)}\n`),
    warn: write(2),
    error: write(2),
    trace: (...args) => host.log(2, `Trace: ${format(args)}\n${new Error().stack.split('\n').slice(2).join('\n')}\n`),
    assert: (ok, ...args) => { if (!ok) host.log(2, `Assertion failed${args.length ? `: ${format(args)}` : ''}\n`); },
    count: (label = 'default') => { const n = (counts.get(label) || 0) + 1; counts.set(label, n); host.log(1, `${label}: ${n}\n`); },
    countReset: (label = 'default') => counts.delete(label),
    time: (label = 'default') => times.set(label, host.now()),
    timeEnd: (label = 'default') => {
      if (!times.has(label)) return;
      host.log(1, `${label}: ${(host.now() - times.get(label)).toFixed(3)}ms\n`);
      times.delete(label);
    },
  };
  define(g, 'console', console);

  // --- timers -----------------------------------------------------------------------------
  // The host keeps the real timer and calls fire(id) when it is due.
  const timers = new Map();
  let nextTimer = 1;
  const MAX_DELAY = 2 ** 31 - 1;
  class Timeout {
    constructor(id) { this.id = id; }
    ref() { return this; }
    unref() { return this; }
    hasRef() { return true; }
    refresh() { const t = timers.get(this.id); if (t) host.timer(this.id, t.delay); return this; }
    [Symbol.toPrimitive]() { return this.id; }
  }
  function schedule(fn, ms, args, repeat) {
    if (typeof fn !== 'function') throw new TypeError(`The "callback" argument must be of type function. Received ${typeof fn}`);
    let delay = Number(ms);
    if (!(delay >= 1 && delay <= MAX_DELAY)) delay = 1; // as Node: NaN, < 1 or too large
    const id = nextTimer++;
    timers.set(id, { fn, args, delay, repeat });
    host.timer(id, delay);
    return new Timeout(id);
  }
  function clear(timer) {
    const id = timer !== null && typeof timer === 'object' ? timer.id : Number(timer);
    if (timers.delete(id)) host.clearTimer(id);
  }
  function fire(id) {
    const t = timers.get(id);
    if (!t) return;
    if (t.repeat) host.timer(id, t.delay);
    else timers.delete(id);
    try {
      t.fn(...t.args);
    } catch (err) {
      stray(err);
    }
  }
  define(g, 'setTimeout', (fn, ms, ...args) => schedule(fn, ms, args, false));
  define(g, 'setInterval', (fn, ms, ...args) => schedule(fn, ms, args, true));
  define(g, 'setImmediate', (fn, ...args) => schedule(fn, 0, args, false));
  define(g, 'clearTimeout', clear);
  define(g, 'clearInterval', clear);
  define(g, 'clearImmediate', clear);
  define(g, 'queueMicrotask', (fn) => {
    if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
    Promise.resolve().then(() => { try { fn(); } catch (err) { stray(err); } });
  });

  // --- structuredClone, performance -------------------------------------------------------
  // The host's callback copies its argument in and its result out by the structured clone
  // algorithm, so the identity function there is a structured clone here.
  define(g, 'structuredClone', (value) => host.clone(value));
  // host.now(): the host's clock in ms since the epoch, fractional; the isolate's time origin
  // is its creation, as a Worker's is.
  const timeOrigin = host.now();
  define(g, 'performance', { timeOrigin, now: () => host.now() - timeOrigin });

  // --- web APIs (lib/v8-web.js) and Node modules (lib/v8-node-modules.js) ----------------
  const web = parts.web(host);
  const {
    TextEncoder, TextDecoder, URL, URLSearchParams, webcrypto,
  } = web;
  for (const [name, value] of Object.entries({ TextEncoder, TextDecoder, URL, URLSearchParams, crypto: webcrypto })) {
    define(g, name, value);
  }
  const nodeModules = parts.node(host, web);

  // --- process ----------------------------------------------------------------------------
  // A subset: the environment (the instance's, with the activation's __OW_* values), exit() that
  // ends only this isolate and its activation, nextTick, and what describes the runtime.
  class ExitSignal {
    constructor(code) { this.code = code; }
  }
  const processObject = {
    env: options.env,
    argv: ['node'],
    platform: options.platform,
    arch: options.arch,
    version: options.version,
    versions: options.versions,
    exit(code) {
      const status = code === undefined ? 0 : Number(code) | 0;
      host.exit(status);
      throw new ExitSignal(status);
    },
    nextTick(fn, ...args) { g.queueMicrotask(() => fn(...args)); },
    cwd: () => options.cwd,
    emitWarning: (warning) => host.log(2, `Warning: ${describe(warning)}\n`),
    hrtime: Object.assign((previous) => {
      const ns = BigInt(Math.round((host.now()) * 1e6));
      const now = [Number(ns / 1000000000n), Number(ns % 1000000000n)];
      if (!previous) return now;
      let [s, n] = [now[0] - previous[0], now[1] - previous[1]];
      if (n < 0) { s -= 1; n += 1e9; }
      return [s, n];
    }, { bigint: () => BigInt(Math.round(host.now() * 1e6)) }),
  };
  define(g, 'process', processObject);
  define(g, 'global', g);

  // --- Math.random ------------------------------------------------------------------------
  // lib/random.js's generator, reseedable in place (README.md, "/icebox/restored").
  // eslint-disable-next-line no-eval
  const generator = (0, eval)(options.randomFactory)();
  Math.random = generator.random;
  generator.setState(...options.seedWords);

  // --- require ----------------------------------------------------------------------------
  // The host resolves a name as Node would (the action's directory, its node_modules, NODE_PATH)
  // and sends the file's source; it is evaluated here, in a module cache of this isolate.
  const cache = Object.create(null);
  let builtins = null; // name -> exports, made on first require of each
  const BUILTIN_MAKERS = {
    buffer: () => nodeModules.withBase64url(loadFile(host.internalModule('buffer'))),
    crypto: () => nodeModules.makeCrypto(builtin('buffer').Buffer),
    url: () => ({ URL, URLSearchParams }),
    util: () => ({
      format: (...args) => format(args),
      inspect: (value) => formatOne(value),
      promisify: (fn) => (...args) => new Promise((resolve, reject) => fn(...args, (err, value) => (err ? reject(err) : resolve(value)))),
      inherits: (ctor, superCtor) => { Object.setPrototypeOf(ctor.prototype, superCtor.prototype); Object.setPrototypeOf(ctor, superCtor); },
      TextEncoder,
      TextDecoder,
    }),
  };
  function builtin(name) {
    if (builtins === null) builtins = Object.create(null);
    if (!(name in builtins)) builtins[name] = BUILTIN_MAKERS[name]();
    return builtins[name];
  }
  function notFound(found) {
    const err = new Error(found.error);
    err.code = found.code;
    return err;
  }
  function makeRequire(from) {
    function require(spec) {
      if (typeof spec !== 'string' || spec === '') throw new TypeError('The "id" argument must be a non-empty string');
      const found = host.resolve(spec, from);
      if (found.builtin) return builtin(found.builtin);
      if (found.error) throw notFound(found);
      return loadFound(found);
    }
    require.resolve = (spec) => {
      const found = host.resolve(String(spec), from);
      if (found.error) throw notFound(found);
      return found.builtin || found.filename;
    };
    require.cache = cache;
    return require;
  }
  function loadFile(filename) {
    return loadFound(host.load(filename));
  }
  function loadFound(found) {
    const cached = cache[found.filename];
    if (cached) return cached.exports;
    const module = { id: found.filename, filename: found.filename, exports: {}, loaded: false, children: [], paths: [] };
    cache[found.filename] = module;
    try {
      if (found.json) {
        module.exports = JSON.parse(found.source);
      } else {
        // eslint-disable-next-line no-eval
        const fn = (0, eval)(`(function (exports, require, module, __filename, __dirname) {${found.source}\n})\n//# sourceURL=${found.filename}`);
        fn.call(module.exports, module.exports, makeRequire(found.filename), module, found.filename, found.dirname);
      }
    } catch (err) {
      delete cache[found.filename];
      throw err;
    }
    module.loaded = true;
    return module.exports;
  }
  lazy(g, 'Buffer', () => builtin('buffer').Buffer);

  // --- icebox.shared ----------------------------------------------------------------------
  // lib/shared-api.js's remoteSharedApi, its requests answered by the main thread's store.
  const request = (op, fields) => host.shared.apply(undefined, [op, fields], {
    arguments: { copy: true }, result: { copy: true, promise: true },
  }).then((reply) => {
    if (reply.error !== undefined) throw new Error(reply.error);
    return reply;
  });
  // eslint-disable-next-line no-eval
  const sharedApi = (0, eval)(`(${options.sharedApi})`)(request);
  Object.defineProperty(g, 'icebox', {
    value: Object.freeze({ shared: Object.freeze(sharedApi), sharing: 'isolate' }),
    configurable: true,
    enumerable: false,
    writable: false,
  });

  // --- the action -------------------------------------------------------------------------
  let entry = null;
  let hook;
  const OW_KEYS = ['namespace', 'action_name', 'activation_id', 'transaction_id', 'api_key', 'deadline', 'action_version'];

  function resolveEntry(exportsValue, main, where) {
    const parts = main.split('.');
    let owner = null;
    let value = exportsValue;
    for (const part of parts) {
      owner = value;
      value = value === null || value === undefined ? undefined : value[part];
    }
    if (typeof value !== 'function') {
      return { initError: `The action has no function "${main}": ${where} must declare it or export it (module.exports.${main} = ...).` };
    }
    return { fn: parts.length > 1 ? value.bind(owner) : value };
  }

  // `kind` 'source': `source` is the single-file action with lib/source.js's lookup appended;
  // 'file': `source` is the zip's main module, already resolved by the host.
  function load(kind, source, main, where) {
    try {
      let exportsValue;
      let declared;
      let declaredHook;
      if (kind === 'source') {
        const module = { id: '.', filename: options.sourceFile, exports: {}, loaded: false, children: [], paths: [] };
        // eslint-disable-next-line no-eval
        const fn = (0, eval)(`(function (exports, require, module, __filename, __dirname, ${options.found}) {${source}\n})\n//# sourceURL=${options.sourceFile}`);
        fn.call(module.exports, module.exports, makeRequire(options.sourceFile), module, options.sourceFile, options.cwd,
          (found, foundHook) => { declared = found; declaredHook = foundHook; });
        module.loaded = true;
        exportsValue = module.exports;
      } else {
        exportsValue = loadFile(source);
      }
      const resolved = declared ? { fn: declared } : resolveEntry(exportsValue, main, where);
      if (resolved.initError) return resolved;
      entry = resolved.fn;
      hook = declaredHook;
      if (hook === undefined && exportsValue !== null && exportsValue !== undefined) hook = exportsValue.iceboxRestored;
      if (typeof hook === 'function' && hook !== declaredHook) hook = hook.bind(exportsValue);
      return { ok: true };
    } catch (err) {
      if (err instanceof ExitSignal) return { exit: err.code };
      return { error: err instanceof SyntaxError ? `SyntaxError: ${err.message}` : describe(err), stack: stackOf(err) };
    }
  }

  function isObject(value) {
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  }
  const reply = (status, value) => ({ status, body: JSON.stringify(value) });
  // lib/response.js's toResponse.
  function toResponse(result) {
    if (!isObject(result)) return reply(502, { error: 'The action did not return an object.' });
    let text;
    try {
      text = JSON.stringify(result);
    } catch (err) {
      return reply(502, { error: `The action's result cannot be serialized as JSON: ${describe(err)}` });
    }
    if (text === undefined || text[0] !== '{') return reply(502, { error: 'The action did not return an object.' });
    return { status: Object.prototype.hasOwnProperty.call(result, 'error') ? 502 : 200, body: text };
  }
  // V8's words when the ArrayBuffer allocator (isolated-vm's, which counts ArrayBuffers against
  // the isolate's memory limit) refuses: the isolate has reached its limit.
  const isAllocationFailure = (err) => err instanceof RangeError && /Array buffer allocation failed/.test(err.message);

  // One activation: its outcome as {status, body}, or {exit: code}, or {memory: message}; a
  // failure's stack is in `log`.
  async function run(params, activation) {
    for (const key of OW_KEYS) {
      const name = `__OW_${key.toUpperCase()}`;
      const value = activation[key];
      if (value === undefined || value === null) delete options.env[name];
      else options.env[name] = String(value);
    }
    const strayError = new Promise((resolve, reject) => { failCurrent = reject; });
    try {
      return toResponse(await Promise.race([(async () => entry(params))(), strayError]));
    } catch (err) {
      if (err instanceof ExitSignal) return { exit: err.code };
      if (isAllocationFailure(err)) return { memory: describe(err), log: `${stackOf(err)}\n` };
      return { ...reply(502, { error: describe(err) }), log: `${stackOf(err)}\n` };
    } finally {
      failCurrent = null;
    }
  }

  // /icebox/restored: new environment values, a new seed, then the action's hook.
  async function restored(env, seedWords) {
    for (const [name, value] of env) options.env[name] = value;
    generator.setState(...seedWords);
    if (hook === undefined || hook === null) return { hook: false };
    if (typeof hook !== 'function') return { error: `The action's iceboxRestored is not a function (it is a ${typeof hook}).` };
    try {
      await hook();
    } catch (err) {
      if (err instanceof ExitSignal) return { exit: err.code };
      host.log(2, `${stackOf(err)}\n`);
      return { error: describe(err) };
    }
    return { hook: true };
  }

  // A full collection, between activations: see lib/v8-isolate.js, maybeCollect.
  function collect() {
    if (fullGc) fullGc();
  }

  return { load, run, fire, restored, collect };
});
