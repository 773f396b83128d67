'use strict';
// V8's full (mark-compact) collection, for /icebox/stats?gc=1, the gc-trim reclaim and eager
// mode. It is the `gc()` of --expose-gc: V8 runs it without kReduceMemoryFootprint, so maps and
// compiled code survive, unlike the addon's memory-reducing collections (see reclaim.js).
//
// Starting node with --expose-gc would put a global `gc` in every action's scope, unlike stock
// Node and OpenWhisk, where user code could call it or test for it. Instead the flag is switched
// on just long enough to create one context, whose `gc` collects the whole isolate, and switched
// off again so that contexts user code creates later do not get it either. Paid once, on first use.

let gc = null;

function fullGc() {
  if (!gc) {
    const v8 = require('v8');
    const vm = require('vm');
    v8.setFlagsFromString('--expose-gc');
    try {
      gc = vm.runInNewContext('gc');
    } finally {
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  gc();
}

module.exports = { fullGc };
