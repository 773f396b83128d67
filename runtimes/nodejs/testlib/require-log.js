'use strict';
// Preloaded into a proxy by test/lazy-load.test.js (NODE_OPTIONS=--require): writes a line to
// stderr the first time the proxy's main thread requires one of the modules named in
// ICEBOX_TEST_WATCH_MODULES (a built-in, or a package required by its path), so a test can tell when it was loaded.

const Module = require('module');
const path = require('path');
const { isMainThread } = require('worker_threads');

const watched = new Set((process.env.ICEBOX_TEST_WATCH_MODULES || '').split(',').filter(Boolean));
const seen = new Set();
const load = Module._load;
Module._load = function watchedLoad(request, ...rest) {
  // A package loaded by its path (isolated-vm) is watched by its directory's name.
  const name = path.isAbsolute(request) ? path.basename(request) : request.replace(/^node:/, '');
  if (isMainThread && watched.has(name) && !seen.has(name)) {
    seen.add(name);
    process.stderr.write(`loaded ${name}\n`);
  }
  return load.call(this, request, ...rest);
};
