'use strict';
// POST /icebox/restored in the shared and isolate modes: every vm context and every isolate has
// its own Math.random, reseeded with its own seed derived from the daemon's, and its own copy
// of the action, whose hook is called in each copy loaded before the call.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');
const { barrier, waitForSharing } = require('../testlib/actions');

const SEED_A = 'a1'.repeat(32);
const SEED_B = 'b2'.repeat(32);
const SHARED = { ICEBOX_SHARING: 'shared', ICEBOX_CONCURRENCY: '4' };
// Isolate mode with each engine: the v8 engine needs node without its startup snapshot.
const ENGINES = {
  v8: { NODE_OPTIONS: '--no-node-snapshot' },
  worker: {},
};
const isolateEnv = (engine) => ({
  ICEBOX_SHARING: 'isolate', ICEBOX_ISOLATE_ENGINE: engine, ICEBOX_CONCURRENCY: '4', ICEBOX_ISOLATE_MEMORY_MB: '32', ...ENGINES[engine],
});

/* global restoredCount:writable, hookSaw:writable, hookCalls:writable, atLoad:readonly -- declared in the action source these functions are sent with */
const restored = (proxy, seed) => proxy.request('POST', '/icebox/restored', { instance: 'inst', seed });

// `restoredCount` is per copy of the action (a context's or an isolate's module state).
async function main(params) {
  const numbers = [Math.random(), Math.random(), Math.random()];
  if (params.wait) await barrier(params.wait, params.n || 2);
  return { restoredCount, numbers };
}
function iceboxRestored() {
  restoredCount += 1;
}
const CODE = { code: `let restoredCount = 0;\n${sourceOf(barrier, main, iceboxRestored)}` };

async function started(t, env, code = CODE) {
  const proxy = await startProxy(t, env);
  const init = await proxy.init(code);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

// `n` overlapping activations (so each gets a copy of its own); their bodies.
async function overlapping(proxy, n, wait) {
  const runs = await Promise.all(Array.from({ length: n }, () => proxy.run({ wait, n })));
  for (const run of runs) assert.equal(run.status, 200, run.text);
  return runs.map((run) => run.body);
}

const byNumbers = (bodies) => [...bodies].sort((x, y) => x.numbers[0] - y.numbers[0]);

test('shared mode: each vm context is reseeded with its own seed and runs its hook', async (t) => {
  const proxies = await Promise.all([SEED_A, SEED_A, SEED_B].map(() => started(t, SHARED)));
  // Two contexts in each, both loaded before the restore.
  for (const proxy of proxies) await overlapping(proxy, 2, 'before');
  for (const [proxy, seed] of [[proxies[0], SEED_A], [proxies[1], SEED_A], [proxies[2], SEED_B]]) {
    const reply = await restored(proxy, seed);
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random', 'Math.random in 2 vm contexts'], hook: true, env: [] });
  }
  const [first, second, third] = await Promise.all(proxies.map((proxy) => overlapping(proxy, 2, 'after').then(byNumbers)));
  assert.deepEqual(first.map((body) => body.restoredCount), [1, 1], 'the hook ran in both contexts');
  assert.notDeepEqual(first[0].numbers, first[1].numbers, 'contexts draw different numbers');
  assert.deepEqual(second, first, 'the same seed gives the same numbers');
  assert.notDeepEqual(third.map((body) => body.numbers), first.map((body) => body.numbers));

  // A context created after the restore loaded the action afterwards: no hook, but a seed
  // derived from the daemon's as well.
  const [again, againToo] = await Promise.all(proxies.slice(0, 2).map((proxy) => overlapping(proxy, 3, 'three').then(byNumbers)));
  assert.deepEqual(again.map((body) => body.restoredCount).sort(), [0, 1, 1]);
  assert.deepEqual(againToo, again);
});

test('shared mode: a hook that throws in any context is a 502 and the proxy serves on', async (t) => {
  const code = 'exports.iceboxRestored = () => { throw new Error("cannot reconnect"); }; exports.main = () => ({ served: true });';
  const proxy = await started(t, SHARED, { code });
  const reply = await restored(proxy, SEED_A);
  assert.equal(reply.status, 502);
  assert.deepEqual(reply.body, { error: 'Error: cannot reconnect' });
  assert.deepEqual((await proxy.run({})).body, { served: true });
});

for (const engine of Object.keys(ENGINES)) {
  test(`isolate mode (${engine}): each isolate is reseeded with its own seed and runs its hook`, async (t) => {
    const env = { ...isolateEnv(engine), ICEBOX_ISOLATE_POOL: '2' };
    const proxies = await Promise.all([SEED_A, SEED_A, SEED_B].map(() => started(t, env)));
    // The pool's second isolate is started in the background after /init.
    for (const proxy of proxies) await waitForSharing(proxy, (sharing) => sharing.isolates.live === 2, 'two isolates');
    for (const [proxy, seed] of [[proxies[0], SEED_A], [proxies[1], SEED_A], [proxies[2], SEED_B]]) {
      const reply = await restored(proxy, seed);
      assert.equal(reply.status, 200, reply.text);
      assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random', 'Math.random in 2 isolates'], hook: true, env: [] });
    }
    const [first, second, third] = await Promise.all(proxies.map((proxy) => overlapping(proxy, 2, 'after').then(byNumbers)));
    assert.deepEqual(first.map((body) => body.restoredCount), [1, 1], 'the hook ran in both isolates');
    assert.notDeepEqual(first[0].numbers, first[1].numbers, 'isolates draw different numbers');
    assert.deepEqual(second, first, 'the same seed gives the same numbers');
    assert.notDeepEqual(third.map((body) => body.numbers), first.map((body) => body.numbers));
  });
}

for (const engine of Object.keys(ENGINES)) {
  test(`isolate mode (${engine}): an isolate started after the restore gets no hook call but a derived seed`, async (t) => {
    const proxies = await Promise.all([1, 2].map(() => started(t, isolateEnv(engine))));
    for (const proxy of proxies) {
      assert.deepEqual((await restored(proxy, SEED_A)).body, { ok: true, reseeded: ['Math.random', 'Math.random in 1 isolate'], hook: true, env: [] });
    }
    // The pool holds one isolate: the second activation starts a new one.
    const [first, second] = await Promise.all(proxies.map((proxy) => overlapping(proxy, 2, 'fresh').then(byNumbers)));
    assert.deepEqual(first.map((body) => body.restoredCount).sort(), [0, 1]);
    assert.deepEqual(second, first);
  });
}

for (const engine of Object.keys(ENGINES)) {
  test(`isolate mode (${engine}): a hook that throws, or ends its isolate, is a 502 and the proxy serves on`, async (t) => {
    for (const [hook, error] of [
      ['throw new Error("cannot reconnect")', 'Error: cannot reconnect'],
      ['process.exit(3)', "The action's isolate ended during iceboxRestored: The action's isolate exited with code 3."],
    ]) {
      const proxy = await started(t, isolateEnv(engine), { code: `exports.iceboxRestored = () => { ${hook}; }; exports.main = () => ({ served: true });` });
      const reply = await restored(proxy, SEED_A);
      assert.equal(reply.status, 502);
      assert.deepEqual(reply.body, { error });
      assert.deepEqual((await proxy.run({})).body, { served: true });
    }
  });
}

// __OW_API_HOST before the snapshot and for the new instance (`env`).
const OLD_API_HOST = 'http://10.0.0.1:3233';
const NEW_API_HOST = 'http://10.0.0.1:4100';

// Per copy of the action: what its hook saw, what its module code saw while loading, and what
// the activation sees now beside its own __OW_ACTIVATION_ID. `LOAD_MS` of busy work while
// loading keeps an isolate in its loading state long enough to be restored there.
async function envMain(params) {
  if (params.wait) await barrier(params.wait, params.n || 2);
  return {
    hookSaw, hookCalls, atLoad, now: process.env.__OW_API_HOST, activation: process.env.__OW_ACTIVATION_ID,
  };
}
function envHook() {
  hookSaw = process.env.__OW_API_HOST;
  hookCalls += 1;
}
const envCode = (loadMs = 0) => ({
  code: `let hookSaw = null; let hookCalls = 0; const atLoad = process.env.__OW_API_HOST;
for (const end = Date.now() + ${loadMs}; Date.now() < end;);
${sourceOf(barrier, envMain)}
const iceboxRestored = ${envHook.toString().replace('envHook', '')};
exports.main = envMain; exports.iceboxRestored = iceboxRestored;`,
});

// `n` overlapping activations, each with its own activation id; their bodies by activation.
async function overlappingWithIds(proxy, n, wait) {
  const runs = await Promise.all(Array.from({ length: n }, (_, i) => proxy.run({ wait, n }, { activation_id: `${wait}-${i}` })));
  for (const run of runs) assert.equal(run.status, 200, run.text);
  return runs.map((run) => run.body).sort((x, y) => x.activation.localeCompare(y.activation));
}

const restoredWithEnv = (proxy, env) => proxy.request('POST', '/icebox/restored', { instance: 'inst', seed: SEED_A, env });

test('shared mode: env reaches every pooled context before its hook, and contexts made later', async (t) => {
  const proxy = await started(t, { ...SHARED, __OW_API_HOST: OLD_API_HOST }, envCode());
  // Two contexts, both idle in the pool when the restore comes.
  assert.deepEqual((await overlappingWithIds(proxy, 2, 'before')).map((body) => body.now), [OLD_API_HOST, OLD_API_HOST]);
  const reply = await restoredWithEnv(proxy, { __OW_API_HOST: NEW_API_HOST });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random', 'Math.random in 2 vm contexts'], hook: true, env: ['__OW_API_HOST'] });
  // Three at once: the two pooled contexts and a new one.
  const bodies = await overlappingWithIds(proxy, 3, 'after');
  assert.deepEqual(bodies.map((body) => body.activation), ['after-0', 'after-1', 'after-2'], 'each its own __OW_ACTIVATION_ID');
  for (const body of bodies) assert.equal(body.now, NEW_API_HOST);
  const copies = bodies.map(({ hookSaw, hookCalls, atLoad }) => ({ hookSaw, hookCalls, atLoad }));
  assert.deepEqual(copies.sort((x, y) => x.hookCalls - y.hookCalls), [
    { hookSaw: null, hookCalls: 0, atLoad: NEW_API_HOST }, // made after the restore: no hook
    { hookSaw: NEW_API_HOST, hookCalls: 1, atLoad: OLD_API_HOST },
    { hookSaw: NEW_API_HOST, hookCalls: 1, atLoad: OLD_API_HOST },
  ]);
});

test('shared mode: a bad env is a 400 that no context sees', async (t) => {
  const proxy = await started(t, { ...SHARED, __OW_API_HOST: OLD_API_HOST }, envCode());
  await overlappingWithIds(proxy, 2, 'before');
  const reply = await restoredWithEnv(proxy, { __OW_API_HOST: NEW_API_HOST, BAD: 1 });
  assert.equal(reply.status, 400);
  assert.match(reply.body.error, /"env" value of BAD must be a string, got a number/);
  for (const body of await overlappingWithIds(proxy, 3, 'after')) {
    assert.equal(body.now, OLD_API_HOST);
    assert.equal(body.hookCalls, 0);
  }
});

for (const engine of Object.keys(ENGINES)) {
  test(`isolate mode (${engine}): env reaches every isolate before its hook, one still loading included, and isolates started later`, async (t) => {
    const env = {
      ...isolateEnv(engine), ICEBOX_ISOLATE_POOL: '2', __OW_API_HOST: OLD_API_HOST,
    };
    // /init answers once the first isolate has loaded; the pool's second one is then still busy
    // loading for a second, and the restore reaches it there.
    const proxy = await started(t, env, envCode(1000));
    const { isolates } = (await proxy.request('GET', '/icebox/stats')).body.sharing;
    assert.deepEqual([isolates.created, isolates.live], [2, 1], 'the second isolate is still loading');
    const reply = await restoredWithEnv(proxy, { __OW_API_HOST: NEW_API_HOST });
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random', 'Math.random in 2 isolates'], hook: true, env: ['__OW_API_HOST'] });
    // Three at once: the two pooled isolates and a new one.
    const bodies = await overlappingWithIds(proxy, 3, 'after');
    assert.deepEqual(bodies.map((body) => body.activation), ['after-0', 'after-1', 'after-2'], 'each its own __OW_ACTIVATION_ID');
    for (const body of bodies) assert.equal(body.now, NEW_API_HOST);
    const copies = bodies.map(({ hookSaw, hookCalls, atLoad }) => ({ hookSaw, hookCalls, atLoad }));
    assert.deepEqual(copies.sort((x, y) => x.hookCalls - y.hookCalls), [
      { hookSaw: null, hookCalls: 0, atLoad: NEW_API_HOST }, // started after the restore: no hook
      // Both loaded with the template's value (the second while the restore waited for it).
      { hookSaw: NEW_API_HOST, hookCalls: 1, atLoad: OLD_API_HOST },
      { hookSaw: NEW_API_HOST, hookCalls: 1, atLoad: OLD_API_HOST },
    ]);
  });
}
