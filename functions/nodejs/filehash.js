'use strict';
// filehash (the isolates thesis' File Hashing, from Photons): each activation "downloads" a
// file into a byte buffer and returns its SHA-256. The thesis fetched 2 MB from a MinIO server;
// here the file is generated from `seed` (no network), `files` of them per activation. Like the
// thesis' proxies, the function caches its download buffer: one per module instance, i.e. per
// process, per vm context (shared mode) or per isolate (isolate mode), reused while it is big
// enough. `cached` says whether this activation found the buffer already there.

const crypto = require('crypto');

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

let buffer = null; // the cached download buffer

// Fills `target` with file `index` of `seed`: xorshift32 words from a per-file seed, so any
// file can be regenerated on its own (the tests do).
function fillFile(target, seed, index) {
  const words = new Uint32Array(target.buffer, target.byteOffset, target.length >>> 2);
  let x = (Math.imul(seed ^ 0x9E3779B9, 0x85EBCA6B) ^ Math.imul(index + 1, 0xC2B2AE35)) >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  return target;
}

function main(params) {
  const sizeKb = intParam(params, 'size_kb', 2048, 1, 65536);
  const files = intParam(params, 'files', 1, 1, 256);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 31 - 1);
  const bytes = sizeKb * 1024;
  const cached = buffer !== null && buffer.length >= bytes;
  if (!cached) buffer = Buffer.allocUnsafeSlow(bytes); // its own memory, not a slice of Node's pool
  const file = buffer.subarray(0, bytes);
  const digests = [];
  for (let i = 0; i < files; i++) {
    fillFile(file, seed, i);
    digests.push(crypto.createHash('sha256').update(file).digest('hex'));
  }
  return { files, bytes_per_file: bytes, sha256: digests[0], digests_sha256: crypto.createHash('sha256').update(digests.join('\n')).digest('hex'), cached };
}

module.exports = { main, fillFile };
