'use strict';
// memalloc (the isolates thesis' Memory Allocator): a memory-intensive activation that
// allocates about `mb` MiB of small objects (arrays of 1024 small records each), touches every
// one twice (fill, then a read pass), and returns a checksum. Everything is garbage once the
// activation returns, so how a runtime's GC copes with concurrent allocators (one shared heap,
// or a heap per isolate) decides its latency and memory.

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// Node's V8 is built without pointer compression: a record of three small-integer fields takes
// 48 bytes (map, properties, elements and three in-object fields, 8 bytes each) and 8 more for
// its slot in the chunk array (measured after a full GC: 9.3 MiB live for mb = 10).
const BYTES_PER_RECORD = 56;
const CHUNK = 1024;

function main(params) {
  const mb = intParam(params, 'mb', 10, 1, 4096);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 31 - 1);
  const records = Math.ceil((mb * 1024 * 1024) / BYTES_PER_RECORD / CHUNK) * CHUNK;
  const chunks = [];
  let x = seed >>> 0 || 1;
  for (let made = 0; made < records; made += CHUNK) {
    const chunk = new Array(CHUNK);
    for (let i = 0; i < CHUNK; i++) {
      x = (Math.imul(x, 1103515245) + 12345) & 0x3fffffff; // a 30-bit LCG: stays a small integer
      chunk[i] = { id: made + i, value: x, tag: x >>> 27 };
    }
    chunks.push(chunk);
  }
  let checksum = 0;
  const tags = new Array(8).fill(0);
  for (const chunk of chunks) {
    for (const rec of chunk) {
      checksum = (checksum + (rec.value ^ rec.id)) % 1000000007;
      tags[rec.tag] += 1;
    }
  }
  return { mb, records, chunks: chunks.length, checksum, tags };
}

module.exports = { main };
