'use strict';
// GET /icebox/stats: V8 heap statistics and GC counters, optionally after a full collection.

const v8 = require('v8');
const gcWatch = require('./gc-watch');

let fullGc = null;

// A full (mark-compact) collection needs V8's `gc` function. Starting node with --expose-gc
// would put a global `gc` in every action's scope, unlike stock Node and OpenWhisk, where user
// code could call it or test for it. Instead the flag is switched on just long enough to create
// one context, whose `gc` collects the whole isolate, and switched off again so that contexts
// user code creates later do not get it either. Paid once, on the first ?gc=1.
function collectGarbage() {
  if (!fullGc) {
    const vm = require('vm');
    v8.setFlagsFromString('--expose-gc');
    try {
      fullGc = vm.runInNewContext('gc');
    } finally {
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  fullGc();
}

// The GC observer hears of a collection two event-loop turns later (Node queues the entry,
// then the delivery, each with setImmediate).
async function observerCatchUp() {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
}

async function collect(forceGc) {
  let liveBytes = null;
  if (forceGc) {
    collectGarbage();
    liveBytes = v8.getHeapStatistics().used_heap_size;
    await observerCatchUp();
  }
  const heap = v8.getHeapStatistics();
  const gc = gcWatch.totals;
  return {
    runtime: 'nodejs',
    heap_used_bytes: heap.used_heap_size,
    heap_committed_bytes: heap.total_heap_size,
    gc_count: gc.count,
    gc_time_ms: Math.round(gc.timeMs * 1000) / 1000,
    live_bytes: liveBytes,
    details: {
      rss_bytes: process.memoryUsage.rss(),
      heap_physical_bytes: heap.total_physical_size,
      heap_limit_bytes: heap.heap_size_limit,
      malloced_bytes: heap.malloced_memory,
      external_bytes: heap.external_memory,
      native_contexts: heap.number_of_native_contexts,
      gc_by_kind: { ...gc.byKind },
      spaces: heapSpaces(),
    },
  };
}

function heapSpaces() {
  const spaces = {};
  for (const s of v8.getHeapSpaceStatistics()) {
    spaces[s.space_name] = {
      size_bytes: s.space_size,
      used_bytes: s.space_used_size,
      available_bytes: s.space_available_size,
      physical_bytes: s.physical_space_size,
    };
  }
  return spaces;
}

module.exports = { collect };
