// Not a Node.js module: part of what lib/v8-bootstrap.js builds inside each V8 isolate
// (lib/v8-isolate.js composes the parts into one script): the web APIs an isolate gets on the host's callbacks,
// TextEncoder/TextDecoder, URL/URLSearchParams and crypto.getRandomValues/randomUUID.
// eslint-disable-next-line no-unused-expressions -- the file is one expression, evaluated for its value
(function webApis(host) {
  'use strict';

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

  return {
    bytesOf, bytesForHost, TextEncoder, TextDecoder, URL, URLSearchParams, getRandomValues, webcrypto,
  };
})
