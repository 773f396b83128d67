'use strict';
// Counts garbage collections and their time, for /icebox/stats. V8 has no cumulative GC
// counter that JavaScript can read, so this watches perf_hooks 'gc' entries. The observer is
// started right after the socket listens (off the path to readiness) and its callback only
// adds numbers; Node hands it entries in batches, a turn of the event loop after each GC.

const { PerformanceObserver, constants } = require('perf_hooks');

const KINDS = new Map([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

const totals = { count: 0, timeMs: 0, byKind: { minor: 0, major: 0, incremental: 0, weakcb: 0 } };
let observer = null;

function start() {
  if (observer) return;
  observer = new PerformanceObserver((list) => {
    for (const gc of list.getEntries()) {
      totals.count += 1;
      totals.timeMs += gc.duration;
      const kind = KINDS.get(gc.detail && gc.detail.kind);
      if (kind) totals.byKind[kind] += 1;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
}

module.exports = { start, totals };
