'use strict';
// The sharing modes keep the proxy's start-up as it was: vm, worker_threads and isolated-vm are
// loaded by the first /init, not before the socket listens.

const assert = require('node:assert/strict');
const path = require('node:path');
const { test } = require('node:test');
const { startProxy } = require('../testlib/proxy');

const HOOK = path.join(__dirname, '..', 'testlib', 'require-log.js');

for (const [mode, engine, module] of [['shared', '', 'vm'], ['isolate', 'worker', 'worker_threads'], ['isolate', 'v8', 'isolated-vm']]) {
  test(`${mode} mode ${engine} loads ${module} on the first /init`, async (t) => {
    const proxy = await startProxy(t, {
      ICEBOX_SHARING: mode,
      ICEBOX_ISOLATE_ENGINE: engine,
      ICEBOX_CONCURRENCY: '2',
      NODE_OPTIONS: `--require ${HOOK} --no-node-snapshot`,
      ICEBOX_TEST_WATCH_MODULES: 'vm,worker_threads,isolated-vm',
    });
    // The hook's own require of worker_threads comes before it starts watching.
    assert.equal((await proxy.request('GET', '/icebox/stats')).status, 200);
    assert.doesNotMatch(proxy.stderr.text, new RegExp(`loaded ${module}`));
    assert.equal((await proxy.init({ code: 'function main() { return {}; }' })).status, 200);
    await proxy.stderr.waitFor((text) => text.includes(`loaded ${module}\n`), `${module} loaded`);
  });
}
