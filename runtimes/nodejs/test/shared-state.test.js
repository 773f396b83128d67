'use strict';
// globalThis.icebox.shared behaves the same in every sharing mode.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');

async function main(params) {
  const { shared } = globalThis.icebox;
  if (params.op === 'count') {
    // Concurrent updates of one key, each yielding inside its update: none may be lost.
    return { value: await shared.update('n', async (v) => { await new Promise((r) => setTimeout(r, 1)); return (v || 0) + 1; }) };
  }
  await shared.set('obj', { list: [1] });
  const copy = await shared.get('obj');
  copy.list.push(2);
  let failedUpdate = null;
  try {
    await shared.update('obj', () => { throw new Error('no change'); });
  } catch (err) {
    failedUpdate = err.message;
  }
  const had = await shared.delete('gone');
  await shared.set('gone', 1);
  return {
    sharing: icebox.sharing,
    obj: await shared.get('obj'),
    failedUpdate,
    deleted: [had, await shared.delete('gone'), await shared.has('gone')],
    missing: (await shared.get('missing')) === undefined,
  };
}

for (const mode of ['process', 'shared', 'isolate']) {
  test(`icebox.shared in ${mode} mode`, async (t) => {
    // NODE_OPTIONS as iceboxd sets it for isolate mode's v8 engine (runtime.json).
    const proxy = await startProxy(t, { ICEBOX_SHARING: mode, ICEBOX_CONCURRENCY: mode === 'process' ? '1' : '4', NODE_OPTIONS: '--no-node-snapshot' });
    assert.equal((await proxy.init({ code: sourceOf(main) })).status, 200);
    const res = await proxy.run({});
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      sharing: mode, obj: { list: [1] }, failedUpdate: 'no change', deleted: [false, true, false], missing: true,
    });
    const counts = await Promise.all([1, 2, 3, 4, 5, 6].map(() => proxy.run({ op: 'count' })));
    assert.deepEqual(counts.map((r) => r.body.value).sort(), [1, 2, 3, 4, 5, 6]);
    const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
    assert.equal(sharing.mode, mode);
    assert.equal(sharing.in_flight, 0);
  });
}

test('the sharing object is reported before /init too; a bad mode stops the proxy', async (t) => {
  for (const [mode, key] of [['process', null], ['shared', 'contexts'], ['isolate', 'isolates']]) {
    const proxy = await startProxy(t, { ICEBOX_SHARING: mode, ICEBOX_CONCURRENCY: '2' });
    const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
    assert.equal(sharing.mode, mode);
    assert.equal(sharing.capacity, 2);
    assert.equal(sharing.in_flight, 0);
    if (key) assert.equal(sharing[key].live, 0);
    else assert.deepEqual(Object.keys(sharing).sort(), ['capacity', 'in_flight', 'mode']);
  }
  await assert.rejects(startProxy(t, { ICEBOX_SHARING: 'threads' }), /ICEBOX_SHARING must be one of process, shared, isolate/);
  await assert.rejects(startProxy(t, { ICEBOX_SHARING: 'isolate', ICEBOX_ISOLATE_ENGINE: 'threads' }), /ICEBOX_ISOLATE_ENGINE must be one of v8, worker/);
});
