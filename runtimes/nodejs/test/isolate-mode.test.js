'use strict';
// ICEBOX_SHARING=isolate with the worker engine: a pool of worker_threads isolates, one
// activation per isolate. (The v8 engine, the default: test/v8-isolates.test.js.)

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');
const { barrier, waitForSharing } = require('../testlib/actions');
const { makeZip } = require('../testlib/zip-writer');

const ISOLATE = {
  ICEBOX_SHARING: 'isolate', ICEBOX_ISOLATE_ENGINE: 'worker', ICEBOX_CONCURRENCY: '4', ICEBOX_ISOLATE_MEMORY_MB: '32',
};

async function isolateProxy(t, code, env = {}) {
  const proxy = await startProxy(t, { ...ISOLATE, ...env });
  const init = await proxy.init(code);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

async function sharingOf(proxy) {
  const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
  const { isolates } = sharing;
  assert.equal(isolates.live, isolates.busy + isolates.idle, JSON.stringify(isolates));
  return sharing;
}

// One action whose behaviour the parameters choose; `threadId` tells the isolates apart.
async function main(params) {
  const { threadId } = require('worker_threads');
  globalThis.runs = (globalThis.runs || 0) + 1;
  console.log(`log of ${params.id}`);
  if (params.wait) await barrier(params.wait, 2);
  switch (params.do) {
    case 'exit': process.exit(7); break;
    case 'oom': { const keep = []; for (;;) keep.push(new Array(100000).fill(threadId)); }
    case 'spin': for (;;);
    case 'hang': return new Promise(() => {});
    case 'stray': return new Promise(() => setTimeout(() => { throw new Error('from a timer'); }, 0));
    case 'hold': {
      // Holds 64 MiB until the parameters say otherwise; used by the memory tests.
      globalThis.held = Buffer.alloc(64 * 1024 * 1024, 1);
      break;
    }
    default: break;
  }
  return { id: params.id, threadId, runs: globalThis.runs, activation: process.env.__OW_ACTIVATION_ID || null };
}
const CODE = { code: sourceOf(barrier, main) };

test('overlapping activations run in different isolates with their own __OW_* values', async (t) => {
  const proxy = await isolateProxy(t, CODE);
  const [a, b] = await Promise.all(['a', 'b'].map((id) => proxy.run({ id, wait: 'ab' }, { activation_id: `act-${id}` })));
  assert.equal(a.status, 200, a.text);
  assert.equal(b.status, 200, b.text);
  assert.notEqual(a.body.threadId, b.body.threadId);
  assert.deepEqual([a.body.activation, b.body.activation], ['act-a', 'act-b']);
  assert.deepEqual([a.body.runs, b.body.runs], [1, 1], 'globals are per isolate');

  const sharing = await sharingOf(proxy);
  assert.equal(sharing.mode, 'isolate');
  assert.equal(sharing.capacity, 4);
  assert.equal(sharing.in_flight, 0);
  const { isolates } = sharing;
  assert.equal(isolates.created, 2);
  assert.equal(isolates.live, 2);
  assert.equal(isolates.busy, 0);
  assert.equal(isolates.pool_target, 1);
  assert.deepEqual([isolates.torn_down, isolates.crashed, isolates.timed_out], [0, 0, 0]);
  for (const key of ['pool_last', 'fresh_last', 'pool_median', 'fresh_median']) {
    assert.ok(typeof isolates.start_ms[key] === 'number' && isolates.start_ms[key] >= 0, key);
  }

  // A pool start reuses an isolate, with the globals its earlier activations left.
  const again = await proxy.run({ id: 'c' }, { activation_id: 'act-c' });
  assert.equal(again.body.runs, 2);
  assert.equal(again.body.activation, 'act-c');

  // Each activation's log comes before its sentinel.
  await proxy.stdout.waitForSentinels(3);
  await proxy.stderr.waitForSentinels(3);
  for (const id of ['a', 'b', 'c']) assert.match(proxy.stdout.text, new RegExp(`log of ${id}\\n`));
  assert.match(proxy.stdout.text, /log of c\nXXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n$/);
});

for (const [what, pattern] of [
  ['exit', /isolate exited with code 7/],
  ['oom', /ran out of memory \(heap limit 32 MB\)/],
  ['stray', /^Error: from a timer$/],
]) {
  test(`an isolate that fails (${what}) fails only its own activation`, async (t) => {
    const proxy = await isolateProxy(t, CODE);
    const [bad, good] = await Promise.all([
      proxy.run({ id: 'bad', do: what, wait: 'w' }),
      proxy.run({ id: 'good', wait: 'w' }),
    ]);
    assert.equal(bad.status, 502, bad.text);
    assert.match(bad.body.error, pattern);
    assert.equal(good.status, 200, good.text);
    assert.ok(proxy.alive());
    assert.equal((await proxy.run({ id: 'next' })).status, 200);
    const { isolates } = (await sharingOf(proxy));
    assert.equal(isolates.crashed, what === 'stray' ? 0 : 1);
    await proxy.stderr.waitForSentinels(3);
  });
}

test('a fresh isolate whose module throws at top level fails only its activation', async (t) => {
  const code = `if (require('worker_threads').threadId > 1) throw new Error('not in this isolate');\n${CODE.code}`;
  const proxy = await isolateProxy(t, { code });
  // The pool isolate (threadId 1) is kept busy first, so the next activation needs a fresh one.
  const hanging = proxy.run({ id: 'pool', do: 'hang' }, { deadline: Date.now() + 3000 });
  await waitForSharing(proxy, (s) => s.isolates.busy === 1, 'the pool isolate busy');
  const fresh = await proxy.run({ id: 'fresh' });
  assert.equal(fresh.status, 502);
  assert.match(fresh.body.error, /could not load the action: Error: not in this isolate/);
  const first = await hanging;
  assert.equal(first.status, 504);
  assert.match(first.body.error, /timed out/);
  const { isolates } = await sharingOf(proxy);
  // The pool's background refill may have failed the same way by now.
  assert.ok(isolates.crashed >= 1, JSON.stringify(isolates));
  assert.equal(isolates.timed_out, 1);
});

test('an activation past its deadline is terminated; the next activation works', async (t) => {
  const proxy = await isolateProxy(t, CODE);
  for (const what of ['spin', 'hang']) {
    const res = await proxy.run({ id: what, do: what }, { deadline: Date.now() + 300 });
    // 504, not 502: iceboxd then keeps the instance (docs/runtime-protocol.md).
    assert.equal(res.status, 504);
    assert.match(res.body.error, /timed out/);
    const next = await proxy.run({ id: 'next' }, { deadline: Date.now() + 5000 });
    assert.equal(next.status, 200, next.text);
  }
  const { isolates } = await sharingOf(proxy);
  assert.equal(isolates.timed_out, 2);
  assert.equal(isolates.crashed, 0);
});

test('idle isolates above the pool size are torn down', async (t) => {
  const proxy = await isolateProxy(t, CODE, { ICEBOX_ISOLATE_POOL: '1', ICEBOX_ISOLATE_IDLE_MS: '100' });
  const runs = await Promise.all([1, 2, 3].map((id) => proxy.run({ id, wait: 'three' })));
  assert.deepEqual(runs.map((r) => r.status), [200, 200, 200]);
  assert.equal(new Set(runs.map((r) => r.body.threadId)).size, 3);
  const after = await waitForSharing(proxy, (s) => s.isolates.torn_down >= 2, 'two teardowns');
  assert.equal(after.isolates.live, 1);
  assert.equal(after.isolates.idle, 1);
  assert.equal(after.isolates.created, 3);
  assert.equal((await proxy.run({ id: 'pooled' })).status, 200);
});

test('reclaim terminates the idle isolates; the pool refills after the next activation', async (t) => {
  const proxy = await isolateProxy(t, CODE, { ICEBOX_ISOLATE_POOL: '2' });
  await waitForSharing(proxy, (s) => s.isolates.idle === 2, 'a full pool');
  const reclaim = await proxy.request('POST', '/icebox/reclaim', {});
  assert.equal(reclaim.status, 200, reclaim.text);
  assert.equal(reclaim.body.details.isolates_terminated, 2);
  let { isolates } = await sharingOf(proxy);
  assert.deepEqual([isolates.live, isolates.torn_down], [0, 2]);
  assert.equal((await proxy.run({ id: 'after' })).status, 200);
  ({ isolates } = await waitForSharing(proxy, (s) => s.isolates.idle === 2, 'the refilled pool'));
  assert.equal(isolates.created, 4);
});

test('icebox.shared state set in one isolate is seen in another', async (t) => {
  async function stateful(params) {
    const { threadId } = require('worker_threads');
    if (params.set) {
      await icebox.shared.set('model', { weights: [1, 2, 3], by: threadId });
      // Stays busy until the reader is done, so the reader needs another isolate.
      for (let i = 0; i < 500 && !(await icebox.shared.get('read')); i++) await new Promise((r) => setTimeout(r, 10));
      return { threadId };
    }
    while (!(await icebox.shared.has('model'))) await new Promise((r) => setTimeout(r, 10));
    const model = await icebox.shared.get('model');
    model.weights.push(4); // a copy: the stored value does not change
    await icebox.shared.set('read', true);
    return { threadId, model: await icebox.shared.get('model'), keys: (await icebox.shared.keys()).sort() };
  }
  const proxy = await isolateProxy(t, { code: sourceOf(stateful), main: 'stateful' });
  const [writer, reader] = await Promise.all([proxy.run({ set: true }), proxy.run({})]);
  assert.equal(writer.status, 200, writer.text);
  assert.equal(reader.status, 200, reader.text);
  assert.notEqual(writer.body.threadId, reader.body.threadId);
  assert.deepEqual(reader.body.model, { weights: [1, 2, 3], by: writer.body.threadId });
  assert.deepEqual(reader.body.keys, ['model', 'read']);
});

test('a zipped action runs in isolates', async (t) => {
  const zip = makeZip([
    { name: 'package.json', data: '{"main": "src/app.js"}' },
    { name: 'src/app.js', data: 'const { answer } = require("./answer"); exports.main = () => ({ answer, tid: require("worker_threads").threadId });' },
    { name: 'src/answer.js', data: 'exports.answer = 42;' },
  ]);
  const proxy = await isolateProxy(t, { code: zip.toString('base64'), binary: true });
  const res = await proxy.run({});
  assert.equal(res.body.answer, 42);
  assert.notEqual(res.body.tid, 0, 'it ran in a worker, not the main thread');
});

test('init errors are a 502 at /init, and /init can be retried', async (t) => {
  const cases = [
    [{ code: 'function main( {' }, /SyntaxError/],
    [{ code: 'function other() {}' }, /has no function "main"/],
    [{ code: 'throw new Error("top level")' }, /Error: top level/],
    [{ code: 'process.exit(2)' }, /exited with code 2/],
  ];
  for (const [value, pattern] of cases) {
    const proxy = await startProxy(t, ISOLATE);
    const init = await proxy.init(value);
    assert.equal(init.status, 502);
    assert.match(init.body.error, /^Initialization has failed due to: /);
    assert.match(init.body.error, pattern);
    const retry = await proxy.init({ code: 'function main() { return { ok: true }; }' });
    assert.equal(retry.status, 200, retry.text);
    assert.deepEqual((await proxy.run({})).body, { ok: true });
  }
});

test('a key locked by an isolate that dies inside update() is released', async (t) => {
  async function locker(params) {
    if (params.die) await icebox.shared.update('k', () => process.exit(1));
    return { value: await icebox.shared.update('k', (v) => (v || 0) + 1) };
  }
  const proxy = await isolateProxy(t, { code: sourceOf(locker), main: 'locker' });
  const died = await proxy.run({ die: true });
  assert.equal(died.status, 502);
  assert.match(died.body.error, /exited with code 1/);
  assert.deepEqual((await proxy.run({})).body, { value: 1 });
});
