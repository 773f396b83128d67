// Not a Node.js module: part of what lib/v8-bootstrap.js builds inside each V8 isolate
// (lib/v8-isolate.js composes the parts into one script): the Node built-in modules an isolate's `require` gives
// beyond the npm buffer package, and base64url on that package. `web` is lib/v8-web.js's part.
// eslint-disable-next-line no-unused-expressions -- the file is one expression, evaluated for its value
(function nodeModules(host, web) {
  'use strict';

  const { bytesOf, bytesForHost, getRandomValues, webcrypto } = web;

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
  // crypto's synchronous subset for pure-JS code (hashes, HMACs, PBKDF2, random bytes); the
  // work is done by the host's crypto on copies of the inputs.
  function makeCrypto(Buffer) {
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

  return { withBase64url, makeCrypto };
})
