// Not a Node.js module: lib/v8-isolate.js evaluates this expression inside every V8 isolate of
// isolate mode's v8 engine and calls it once. A bare V8 context has only the language's own
// built-ins, so this gives the action the part of Node's API that needs no host access
// (README.md, "The v8 engine"), built on `host`, the host's callbacks (lib/v8-host.js), and
// returns the functions the host calls: load, run, fire, restored. Everything the action can
// reach goes through `host`, which only ever copies values across: nothing of the host's heap is
// visible in here.
(function bootstrap(host, options) {
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

  // --- TextEncoder / TextDecoder ----------------------------------------------------------
  function utf8(text) {
    const s = String(text);
    const out = new Uint8Array(s.length * 3);
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
      }
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd; // a lone surrogate
      if (c < 0x80) out[n++] = c;
      else if (c < 0x800) { out[n++] = 0xc0 | (c >> 6); out[n++] = 0x80 | (c & 63); }
      else if (c < 0x10000) { out[n++] = 0xe0 | (c >> 12); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
      else { out[n++] = 0xf0 | (c >> 18); out[n++] = 0x80 | ((c >> 12) & 63); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63); }
    }
    return out.slice(0, n);
  }
  function bytesOf(input, what) {
    if (input instanceof ArrayBuffer) return new Uint8Array(input);
    if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    throw new TypeError(`${what} must be an ArrayBuffer or an ArrayBufferView`);
  }
  // Bytes to hand to the host: a view is copied across with its whole ArrayBuffer, so one that
  // covers only part of it is cut out first; one that covers all of it goes as it is (a copy
  // here would be garbage as large as the data, which this isolate collects only late).
  function bytesForHost(input, what) {
    const bytes = bytesOf(input, what);
    return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
  }
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input = '') { return utf8(input); }
    encodeInto(input, dest) {
      const s = String(input);
      let read = 0;
      let written = 0;
      for (const ch of s) { // whole code points only, as the standard says
        const bytes = utf8(ch);
        if (written + bytes.length > dest.length) break;
        dest.set(bytes, written);
        written += bytes.length;
        read += ch.length;
      }
      return { read, written };
    }
  }
  class TextDecoder {
    #encoding;
    #fatal;
    #ignoreBOM;
    constructor(label = 'utf-8', opts = {}) {
      this.#fatal = Boolean(opts && opts.fatal);
      this.#ignoreBOM = Boolean(opts && opts.ignoreBOM);
      this.#encoding = host.decoderEncoding(String(label));
    }
    get encoding() { return this.#encoding; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input = new Uint8Array(0), opts = {}) {
      if (opts && opts.stream) throw new TypeError('TextDecoder: { stream: true } is not supported in isolate mode\'s v8 engine');
      return host.decode(this.#encoding, this.#fatal, this.#ignoreBOM, bytesForHost(input, 'The "input" argument'));
    }
  }
  define(g, 'TextEncoder', TextEncoder);
  define(g, 'TextDecoder', TextDecoder);

  // --- URL / URLSearchParams --------------------------------------------------------------
  // Parsed and serialized by the host's WHATWG URL; the isolate keeps the parts.
  const URL_PARTS = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];
  const partsOf = new WeakMap(); // URL -> its parts
  const queryOf = new WeakMap(); // URL -> its URLSearchParams, once asked for
  const ownerOf = new WeakMap(); // URLSearchParams -> its URL
  const pairsOf = new WeakMap(); // URLSearchParams -> [[name, value], ...]
  class URL {
    constructor(input, base) {
      partsOf.set(this, host.url(String(input), base === undefined ? undefined : String(base)));
    }
    static canParse(input, base) {
      try { host.url(String(input), base === undefined ? undefined : String(base)); return true; } catch (ignored) { return false; }
    }
    get searchParams() {
      let query = queryOf.get(this);
      if (!query) {
        query = new URLSearchParams(partsOf.get(this).search);
        ownerOf.set(query, this);
        queryOf.set(this, query);
      }
      return query;
    }
    toString() { return partsOf.get(this).href; }
    toJSON() { return partsOf.get(this).href; }
  }
  for (const part of URL_PARTS) {
    const descriptor = { get() { return partsOf.get(this)[part]; }, configurable: true, enumerable: true };
    if (part !== 'origin') {
      descriptor.set = function set(value) {
        partsOf.set(this, host.setUrl(partsOf.get(this).href, part, String(value)));
        const query = queryOf.get(this);
        if (query) pairsOf.set(query, host.parseQuery(partsOf.get(this).search));
      };
    }
    Object.defineProperty(URL.prototype, part, descriptor);
  }
  class URLSearchParams {
    constructor(init = '') {
      let pairs;
      if (typeof init === 'string' || init instanceof String) pairs = host.parseQuery(String(init));
      else if (init !== null && typeof init === 'object' && typeof init[Symbol.iterator] === 'function') {
        pairs = [...init].map((pair) => {
          const list = [...pair];
          if (list.length !== 2) throw new TypeError('Each query pair must be an iterable [name, value] tuple');
          return [String(list[0]), String(list[1])];
        });
      } else if (init !== null && typeof init === 'object') pairs = Object.keys(init).map((k) => [k, String(init[k])]);
      else pairs = host.parseQuery(String(init));
      pairsOf.set(this, pairs);
    }
    get size() { return pairsOf.get(this).length; }
    append(name, value) { pairsOf.get(this).push([String(name), String(value)]); this.#changed(); }
    delete(name, value) {
      const keep = pairsOf.get(this).filter(([k, v]) => k !== String(name) || (value !== undefined && v !== String(value)));
      pairsOf.set(this, keep);
      this.#changed();
    }
    get(name) { const hit = pairsOf.get(this).find(([k]) => k === String(name)); return hit ? hit[1] : null; }
    getAll(name) { return pairsOf.get(this).filter(([k]) => k === String(name)).map(([, v]) => v); }
    has(name, value) { return pairsOf.get(this).some(([k, v]) => k === String(name) && (value === undefined || v === String(value))); }
    set(name, value) {
      const key = String(name);
      const pairs = pairsOf.get(this);
      const at = pairs.findIndex(([k]) => k === key);
      if (at === -1) pairs.push([key, String(value)]);
      else pairsOf.set(this, [...pairs.slice(0, at), [key, String(value)], ...pairs.slice(at + 1).filter(([k]) => k !== key)]);
      this.#changed();
    }
    sort() {
      // Stable, by UTF-16 code units, as the standard says.
      pairsOf.set(this, pairsOf.get(this).map((p, i) => [p, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map(([p]) => p));
      this.#changed();
    }
    forEach(fn, thisArg) { for (const [k, v] of pairsOf.get(this)) fn.call(thisArg, v, k, this); }
    * keys() { for (const [k] of pairsOf.get(this)) yield k; }
    * values() { for (const [, v] of pairsOf.get(this)) yield v; }
    * entries() { for (const [k, v] of pairsOf.get(this)) yield [k, v]; }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return host.serializeQuery(pairsOf.get(this)); }
    #changed() {
      const url = ownerOf.get(this);
      if (url) partsOf.set(url, host.setUrl(partsOf.get(url).href, 'search', this.toString()));
    }
  }
  define(g, 'URL', URL);
  define(g, 'URLSearchParams', URLSearchParams);

  // --- crypto -----------------------------------------------------------------------------
  const INTEGER_ARRAYS = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array'];
  function getRandomValues(view) {
    if (!ArrayBuffer.isView(view) || !INTEGER_ARRAYS.includes(Object.prototype.toString.call(view).slice(8, -1))) {
      throw new TypeError('crypto.getRandomValues needs an integer TypedArray');
    }
    if (view.byteLength > 65536) throw new RangeError(`crypto.getRandomValues: ${view.byteLength} bytes is more than 65536`);
    new Uint8Array(view.buffer, view.byteOffset, view.byteLength).set(host.randomBytes(view.byteLength));
    return view;
  }
  const webcrypto = { getRandomValues, randomUUID: () => host.randomUUID() };
  define(g, 'crypto', webcrypto);

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
    buffer: () => withBase64url(loadFile(host.internalModule('buffer'))),
    crypto: () => makeCrypto(),
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
  // The npm buffer package predates Node's 'base64url' encoding. Its base64 decoder already
  // takes the URL-safe alphabet and missing padding, so only the name and the encoder are added.
  function withBase64url(exports) {
    const { Buffer } = exports;
    const isUrl = (encoding) => typeof encoding === 'string' && encoding.toLowerCase() === 'base64url';
    const { toString, write } = Buffer.prototype;
    const { from, byteLength, isEncoding } = Buffer;
    Buffer.prototype.toString = function toStringWithUrl(encoding, ...rest) {
      if (!isUrl(encoding)) return toString.call(this, encoding, ...rest);
      return toString.call(this, 'base64', ...rest).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    };
    Buffer.prototype.write = function writeWithUrl(string, ...rest) {
      const at = rest.findIndex(isUrl);
      if (at !== -1) rest[at] = 'base64';
      return write.call(this, string, ...rest);
    };
    Buffer.from = (value, encoding, ...rest) => from(value, isUrl(encoding) ? 'base64' : encoding, ...rest);
    Buffer.byteLength = (value, encoding) => byteLength(value, isUrl(encoding) ? 'base64' : encoding);
    Buffer.isEncoding = (encoding) => isUrl(encoding) || isEncoding(encoding);
    return exports;
  }
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

  // crypto's synchronous subset for pure-JS code (hashes, HMACs, PBKDF2, random bytes); the
  // work is done by the host's crypto on copies of the inputs.
  function makeCrypto() {
    const { Buffer } = builtin('buffer');
    const chunk = (data, encoding) => {
      if (typeof data === 'string') return [data, encoding || 'utf8'];
      return [bytesForHost(data, 'The "data" argument'), null];
    };
    const result = (out, encoding) => (encoding ? out : Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    function digester(kind, algorithm, key) {
      const chunks = [];
      let done = false;
      return {
        update(data, encoding) {
          if (done) throw new Error('Digest already called');
          chunks.push(chunk(data, encoding));
          return this;
        },
        digest(encoding) {
          if (done) throw new Error('Digest already called');
          done = true;
          return result(host.digest(kind, algorithm, key, chunks, encoding || null), encoding);
        },
      };
    }
    return {
      webcrypto,
      getRandomValues,
      randomUUID: webcrypto.randomUUID,
      randomBytes: (size) => {
        if (!Number.isInteger(size) || size < 0 || size > 2 ** 31 - 1) throw new RangeError('The "size" argument is out of range');
        const out = host.randomBytes(size);
        return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
      },
      randomInt: (min, max) => {
        const [lo, hi] = max === undefined ? [0, min] : [min, max];
        return host.randomInt(lo, hi);
      },
      createHash: (algorithm) => digester('hash', String(algorithm), null),
      createHmac: (algorithm, key) => digester('hmac', String(algorithm), chunk(key)),
      pbkdf2Sync: (password, salt, iterations, keylen, digest) => result(
        host.pbkdf2(chunk(password), chunk(salt), iterations, keylen, String(digest)), null),
      timingSafeEqual: (a, b) => {
        const x = bytesOf(a, 'The "buf1" argument');
        const y = bytesOf(b, 'The "buf2" argument');
        if (x.length !== y.length) throw new RangeError('Input buffers must have the same byte length');
        let diff = 0;
        for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
        return diff === 0;
      },
      getHashes: () => host.hashes(),
    };
  }

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
