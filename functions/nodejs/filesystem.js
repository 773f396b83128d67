'use strict';
// filesystem (Desiccant's JavaScript set): exercises the file system the way a function may,
// in the only writable place, the instance's /tmp: creates a private directory, writes `files`
// files of `size_kb` KiB generated from `seed`, lists and stats them, reads every file back
// and checks its SHA-256 against the data written, appends a manifest, renames, and removes
// everything again so that nothing is left behind between invocations.

const crypto = require('crypto');
const fs = require('fs/promises');
const os = require('os');
const path = require('path');

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// The content of file `index`: xorshift32 words from a per-file seed, so any file can be
// regenerated on its own (the tests do) and every run writes the same bytes.
function fileContent(seed, index, bytes) {
  const words = new Uint32Array(Math.ceil(bytes / 4));
  let x = (Math.imul(seed ^ 0x9E3779B9, 0x85EBCA6B) ^ Math.imul(index + 1, 0xC2B2AE35)) >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  return Buffer.from(words.buffer, 0, bytes);
}

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');

async function main(params = {}) {
  const files = intParam(params, 'files', 64, 1, 10000);
  const sizeKb = intParam(params, 'size_kb', 64, 1, 16384);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  // The sandbox's /tmp is a small tmpfs: refuse plainly rather than fail half-way with ENOSPC.
  if (files * sizeKb > 32768) throw new RangeError('files * size_kb must not exceed 32768 (32 MiB)');

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'icebox-fs-'));
  try {
    const written = [];
    let bytesWritten = 0;
    for (let i = 0; i < files; i++) {
      const data = fileContent(seed, i, sizeKb * 1024);
      const name = `data-${String(i).padStart(5, '0')}.bin`;
      await fs.writeFile(path.join(dir, name), data);
      written.push({ name, digest: sha256(data) });
      bytesWritten += data.length;
    }

    const names = (await fs.readdir(dir)).sort();
    let statBytes = 0;
    for (const name of names) statBytes += (await fs.stat(path.join(dir, name))).size;

    let bytesRead = 0;
    let mismatches = 0;
    for (const { name, digest } of written) {
      const data = await fs.readFile(path.join(dir, name));
      bytesRead += data.length;
      if (sha256(data) !== digest) mismatches++;
    }

    const manifest = path.join(dir, 'manifest.txt');
    for (const { name, digest } of written) await fs.appendFile(manifest, `${digest}  ${name}\n`);
    await fs.rename(manifest, path.join(dir, 'SHA256SUMS'));
    const sums = await fs.readFile(path.join(dir, 'SHA256SUMS'), 'utf8');

    return {
      files,
      size_kb: sizeKb,
      bytes_written: bytesWritten,
      bytes_read: bytesRead,
      listed: names.length,
      stat_bytes: statBytes,
      mismatches,
      // One digest over the per-file digests: identical for every run with the same input.
      digest: sha256(sums),
    };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

module.exports = { main, fileContent };
