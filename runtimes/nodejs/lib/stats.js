'use strict';
// GET /icebox/stats: V8 heap statistics and GC counters, optionally after a full collection.

const v8 = require('v8');
const { fullGc } = require('./full-gc');
const gcWatch = require('./gc-watch');

// The GC observer hears of a collection two event-loop turns later (Node queues the entry,
// then the delivery, each with setImmediate).
async function observerCatchUp() {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
}

// `sharing` returns the sharing mode's own numbers (README.md, "Sharing modes").
async function collect(forceGc, sharing) {
  let liveBytes = null;
  if (forceGc) {
    fullGc();
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
    sharing: sharing(),
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
