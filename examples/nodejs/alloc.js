// Allocates about `mb` MiB (default 64) of ordinary JavaScript objects and arrays on the V8
// heap, returns a summary and drops them all: each activation leaves that much garbage behind
// for the garbage collector (or icebox) to deal with.
const v8 = require('v8');

function main(params) {
  const mb = params.mb === undefined ? 64 : Number(params.mb);
  if (!Number.isFinite(mb) || mb < 0) return { error: `mb must be a non-negative number, got ${params.mb}` };
  const target = mb * 1024 * 1024;
  // Growth is summed chunk by chunk: a collection that runs meanwhile frees earlier garbage
  // and would make "used now - used before" undercount what this call holds.
  let last = v8.getHeapStatistics().used_heap_size;

  // Grow until the heap has grown by the target, measured rather than estimated, since the
  // size of an object depends on V8's layout. Everything stays reachable until main returns.
  const chunks = [];
  let objects = 0;
  let grown = 0;
  while (grown < target) {
    const chunk = new Array(1024);
    for (let i = 0; i < chunk.length; i++) {
      chunk[i] = { id: objects + i, label: `item-${objects + i}`, values: [i, i * 2, i * 3] };
    }
    chunks.push(chunk);
    objects += chunk.length;
    const used = v8.getHeapStatistics().used_heap_size;
    grown += Math.max(0, used - last);
    last = used;
  }

  return {
    mb,
    objects,
    arrays: chunks.length + objects, // the chunks and each object's `values`
    heap_growth_bytes: grown,
  };
}
