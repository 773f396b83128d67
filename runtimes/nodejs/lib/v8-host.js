'use strict';
// The host's callbacks that an isolate of the v8 engine is given (lib/v8-bootstrap.js calls
// them `host`): console output, clocks, structured clone, text decoding, URL parsing, crypto
// and require. Each takes and returns copies only. Those that belong to one isolate (its
// timers, exit, shared state) come from lib/v8-isolate.js.

const crypto = require('crypto');
const util = require('util');
const loader = require('./v8-require');

const URL_PARTS = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];

function partsOf(url) {
  const parts = {};
  for (const part of URL_PARTS) parts[part] = url[part];
  return parts;
}

// A [data, encoding] pair from the isolate: a string in that encoding, or bytes.
function dataOf([data, encoding]) {
  return typeof data === 'string' ? Buffer.from(data, encoding || 'utf8') : data;
}

const now = () => performance.timeOrigin + performance.now();

// name -> plain function; lib/v8-isolate.js wraps each in an ivm.Callback (called synchronously).
const shared = {
  log: (fd, text) => (fd === 1 ? process.stdout : process.stderr).write(String(text)),
  format: (args) => util.format(...args),
  now,
  clone: (value) => value,
  decoderEncoding: (label) => new TextDecoder(label).encoding,
  decode: (encoding, fatal, ignoreBOM, bytes) => new TextDecoder(encoding, { fatal, ignoreBOM }).decode(bytes),
  url: (input, base) => partsOf(base === undefined ? new URL(input) : new URL(input, base)),
  setUrl: (href, part, value) => {
    const url = new URL(href);
    url[part] = value;
    return partsOf(url);
  },
  parseQuery: (text) => [...new URLSearchParams(text)],
  serializeQuery: (pairs) => new URLSearchParams(pairs).toString(),
  // new Uint8Array(buffer) copies: a small Buffer is a view of an 8 KB pool, all of which a
  // copy of the view would carry along.
  randomBytes: (size) => new Uint8Array(crypto.randomBytes(size)),
  randomUUID: () => crypto.randomUUID(),
  randomInt: (min, max) => crypto.randomInt(min, max),
  digest: (kind, algorithm, key, chunks, encoding) => {
    const h = kind === 'hash' ? crypto.createHash(algorithm) : crypto.createHmac(algorithm, dataOf(key));
    for (const piece of chunks) h.update(dataOf(piece));
    const out = h.digest();
    return encoding ? out.toString(encoding) : new Uint8Array(out);
  },
  pbkdf2: (password, salt, iterations, keylen, digest) => new Uint8Array(crypto.pbkdf2Sync(dataOf(password), dataOf(salt), iterations, keylen, digest)),
  hashes: () => crypto.getHashes(),
  resolve: loader.resolve,
  load: loader.load,
  internalModule: loader.internalModule,
};

module.exports = { shared, now };
