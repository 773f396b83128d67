'use strict';
// The isolates thesis' functions run, with the same answers, in every sharing mode of the real
// Node.js proxy (runtimes/nodejs): process, shared (vm contexts) and isolate (V8 isolates),
// with two activations in flight at a time.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { startProxy } = require('../../../runtimes/nodejs/testlib/proxy');

const ROOT = path.resolve(__dirname, '..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'functions.json'), 'utf8'));
const THESIS = manifest.filter((f) => f.paper === 'Isolates thesis');

// What may differ between modes and between activations.
function comparable(body) {
  const { cached, model, ...rest } = body; // eslint-disable-line no-unused-vars
  return rest;
}

test('the manifest has the four thesis functions', () => {
  assert.deepEqual(THESIS.map((f) => f.name).sort(), ['filehash', 'image', 'memalloc', 'rest-login']);
});

for (const f of THESIS) {
  test(`${f.name} gives the same answers in process, shared and isolate mode`, async (t) => {
    const code = fs.readFileSync(path.join(ROOT, '..', f.path), 'utf8');
    const expected = comparable(await require(path.join(ROOT, '..', f.path)).main(structuredClone(f.inputs.A)));
    for (const mode of ['process', 'shared', 'isolate']) {
      const proxy = await startProxy(t, {
        ICEBOX_SHARING: mode, ICEBOX_CONCURRENCY: mode === 'process' ? '1' : '2', ICEBOX_ISOLATE_MEMORY_MB: '128',
        // What iceboxd gives isolate mode's default v8 engine (runtime.json's sharing_env).
        ...(mode === 'isolate' ? { NODE_OPTIONS: '--no-node-snapshot' } : {}),
      });
      const init = await proxy.init({ code, main: f.main });
      assert.equal(init.status, 200, `${mode}: ${init.text}`);
      const runs = mode === 'process'
        ? [await proxy.run(f.inputs.A), await proxy.run(f.inputs.A)]
        : await Promise.all([proxy.run(f.inputs.A), proxy.run(f.inputs.A)]);
      for (const res of runs) {
        assert.equal(res.status, 200, `${mode}: ${res.text}`);
        assert.deepEqual(comparable(res.body), expected, mode);
      }
      if (f.name === 'image') assert.equal(runs[0].body.model, 'icebox.shared');
    }
  });
}
