'use strict';
// ICEBOX_SHARING=isolate with the v8 engine (the default): each activation in its own V8 isolate
// of isolated-vm, inside the proxy's process (lib/v8-isolate.js, lib/v8-bootstrap.js).

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');
const { barrier, waitForSharing } = require('../testlib/actions');
const { makeZip } = require('../testlib/zip-writer');

// What iceboxd gives an isolate-mode instance (runtime.json's sharing_env).
const V8 = {
  ICEBOX_SHARING: 'isolate', ICEBOX_CONCURRENCY: '4', ICEBOX_ISOLATE_MEMORY_MB: '64', NODE_OPTIONS: '--no-node-snapshot',
};

async function v8Proxy(t, value, env = {}) {
  const proxy = await startProxy(t, { ...V8, ...env });
  const init = await proxy.init(value);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

async function isolatesOf(proxy) {
  const { isolates } = (await proxy.request('GET', '/icebox/stats')).body.sharing;
  assert.equal(isolates.engine, 'v8');
  assert.equal(isolates.live, isolates.busy + isolates.idle, JSON.stringify(isolates));
  return isolates;
}

// One action whose behaviour the parameters choose; `globalThis.runs` tells isolates apart.
async function main(params) {
  globalThis.runs = (globalThis.runs || 0) + 1;
  globalThis.tag = globalThis.tag || Math.random();
  if (params.wait) await barrier(params.wait, params.n || 2);
  switch (params.do) {
    case 'buffers': {
      // Far past any limit: 64 MiB at a time, to many GB, all kept.
      const keep = [];
      for (let i = 0; i < 1024; i++) keep.push(Buffer.alloc(64 * 1024 * 1024, 1));
      return { kept: keep.length };
    }
    case 'heap': { const keep = []; for (;;) keep.push(new Array(100000).fill(params.id)); }
    case 'spin': for (;;);
    case 'hang': return new Promise(() => {});
    case 'throw': throw new TypeError(`bad ${params.id}`);
    case 'reject': return Promise.reject(new RangeError('rejected'));
    case 'stray': return new Promise(() => setTimeout(() => { throw new Error('from a timer'); }, 0));
    case 'exit': process.exit(7); break;
    default: break;
  }
  return { id: params.id, runs: globalThis.runs, tag: globalThis.tag, activation: process.env.__OW_ACTIVATION_ID || null };
}
const CODE = { code: sourceOf(barrier, main) };

test('overlapping activations run in different isolates with their own globals and __OW_* values', async (t) => {
  const proxy = await v8Proxy(t, CODE);
  const [a, b] = await Promise.all(['a', 'b'].map((id) => proxy.run({ id, wait: 'ab' }, { activation_id: `act-${id}` })));
  assert.equal(a.status, 200, a.text);
  assert.equal(b.status, 200, b.text);
  assert.notEqual(a.body.tag, b.body.tag);
  assert.deepEqual([a.body.activation, b.body.activation], ['act-a', 'act-b']);
  assert.deepEqual([a.body.runs, b.body.runs], [1, 1], 'globals are per isolate');
  const again = await proxy.run({ id: 'c' }, { activation_id: 'act-c' });
  assert.equal(again.body.runs, 2, 'a pool start reuses an isolate with its globals');
  assert.equal(again.body.activation, 'act-c');
  const isolates = await isolatesOf(proxy);
  assert.equal(isolates.created, 2);
  assert.deepEqual([isolates.torn_down, isolates.crashed, isolates.timed_out], [0, 0, 0]);
  for (const key of ['pool_last', 'fresh_last']) assert.ok(isolates.start_ms[key] >= 0, key);
});

test('console output goes to the activation log before its sentinels', async (t) => {
  function logs() {
    console.log('plain', 42, { a: [1, 2] });
    console.info('info %s=%d', 'x', 5);
    console.warn('careful');
    console.error(new Error('shown with its stack'));
    console.log('a function:', () => 1);
    process.stdout; // eslint-disable-line no-unused-expressions
    return { ok: true };
  }
  const proxy = await v8Proxy(t, { code: sourceOf(logs), main: 'logs' });
  const res = await proxy.run({});
  assert.equal(res.status, 200, res.text);
  await proxy.stdout.waitForSentinels(1);
  await proxy.stderr.waitForSentinels(1);
  assert.match(proxy.stdout.text, /plain 42 \{ a: \[ 1, 2 \] \}\ninfo x=5\na function: \[Function.*\]\nXXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n$/);
  assert.match(proxy.stderr.text, /careful\nError: shown with its stack\n {4}at logs \(.*action\.js/);
  assert.match(proxy.stderr.text, /XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n$/);
});

test('timers, microtasks, TextEncoder/TextDecoder, URL, structuredClone, crypto and Buffer work', async (t) => {
  async function apis() {
    const order = [];
    await new Promise((resolve) => {
      let ticks = 0;
      const interval = setInterval(() => {
        order.push(`interval ${++ticks}`);
        if (ticks === 3) { clearInterval(interval); resolve(); }
      }, 5);
      const cancelled = setTimeout(() => order.push('cancelled'), 1);
      clearTimeout(cancelled);
      queueMicrotask(() => order.push('microtask'));
      process.nextTick(() => order.push('tick'));
      setTimeout((x) => order.push(`timeout ${x}`), 1, 'arg');
    });
    const bytes = new TextEncoder().encode('héllo €😀');
    const url = new URL('/a/b?x=1&y=two#h', 'https://user@example.com:8080');
    url.searchParams.append('z', 'a b');
    const original = { d: new Date(0), m: new Map([[1, 'one']]), nested: { list: [1, 2] } };
    const copy = structuredClone(original);
    copy.nested.list.push(3);
    const random = new Uint32Array(4);
    crypto.getRandomValues(random);
    const nodeCrypto = require('crypto');
    const buf = Buffer.from('hello world');
    return {
      order,
      bytes: [...bytes],
      decoded: new TextDecoder().decode(bytes),
      latin1: new TextDecoder('latin1').decode(new Uint8Array([0xe9])),
      url: url.href,
      host: url.host,
      query: url.searchParams.get('y'),
      cloned: copy.d instanceof Date && copy.m.get(1) === 'one' && original.nested.list.length === 2,
      random: random.some((x) => x !== 0),
      uuid: crypto.randomUUID(),
      sha256: nodeCrypto.createHash('sha256').update('abc').digest('hex'),
      hmac: nodeCrypto.createHmac('sha256', 'key').update(buf).digest('base64'),
      pbkdf2: nodeCrypto.pbkdf2Sync('pw', 'salt', 10, 8, 'sha256').toString('hex'),
      base64: buf.toString('base64'),
      base64url: [Buffer.from([0xfb, 0xff]).toString('base64url'), Buffer.from('-_8', 'base64url').toString('hex')],
      isBuffer: Buffer.isBuffer(buf) && buf instanceof Uint8Array,
      now: typeof performance.now() === 'number',
    };
  }
  const proxy = await v8Proxy(t, { code: sourceOf(apis), main: 'apis' });
  const res = await proxy.run({});
  assert.equal(res.status, 200, res.text);
  const body = res.body;
  // Microtasks before timers; the 1 ms timeout before the 5 ms interval's ticks.
  assert.deepEqual(body.order, ['microtask', 'tick', 'timeout arg', 'interval 1', 'interval 2', 'interval 3']);
  assert.deepEqual(body.bytes, [...Buffer.from('héllo €😀')]);
  assert.equal(body.decoded, 'héllo €😀');
  assert.equal(body.latin1, 'é');
  assert.equal(body.url, 'https://user@example.com:8080/a/b?x=1&y=two&z=a+b#h');
  assert.equal(body.host, 'example.com:8080');
  assert.equal(body.query, 'two');
  assert.equal(body.cloned, true);
  assert.equal(body.random, true);
  assert.match(body.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const crypto = require('node:crypto');
  assert.equal(body.sha256, crypto.createHash('sha256').update('abc').digest('hex'));
  assert.equal(body.hmac, crypto.createHmac('sha256', 'key').update('hello world').digest('base64'));
  assert.equal(body.pbkdf2, crypto.pbkdf2Sync('pw', 'salt', 10, 8, 'sha256').toString('hex'));
  assert.equal(body.base64, Buffer.from('hello world').toString('base64'));
  assert.deepEqual(body.base64url, [Buffer.from([0xfb, 0xff]).toString('base64url'), Buffer.from('-_8', 'base64url').toString('hex')]);
  assert.equal(body.isBuffer, true);
  assert.equal(body.now, true);
});

test("a zipped action requires its own CommonJS modules and node_modules, evaluated in the isolate", async (t) => {
  const zip = makeZip([
    { name: 'package.json', data: '{"main": "src/app.js"}' },
    { name: 'src/app.js', data: 'const { answer } = require("./answer");\nconst pad = require("left-pad");\nconst data = require("../data.json");\n'
      + 'exports.main = async (p) => ({ answer, padded: pad(p.s, 5), data, same: require("./answer") === require("./answer.js"), hasFs: typeof require === "function" && typeof globalThis.require });' },
    { name: 'src/answer.js', data: 'exports.answer = 42;' },
    { name: 'data.json', data: '{"k": [1, 2]}' },
    { name: 'node_modules/left-pad/package.json', data: '{"main": "lib/index.js"}' },
    { name: 'node_modules/left-pad/lib/index.js', data: 'module.exports = (s, n) => String(s).padStart(n, ".");' },
  ]);
  const proxy = await v8Proxy(t, { code: zip.toString('base64'), binary: true });
  const res = await proxy.run({ s: 'ab' });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, { answer: 42, padded: '...ab', data: { k: [1, 2] }, same: true, hasFs: 'undefined' });
});

test('a built-in that reaches the host fails the activation with an error naming it', async (t) => {
  function usesFs(params) {
    const fs = require(params.name);
    return { read: typeof fs.readFileSync };
  }
  const proxy = await v8Proxy(t, { code: sourceOf(usesFs), main: 'usesFs' });
  for (const name of ['fs', 'node:child_process', 'net', 'http']) {
    const res = await proxy.run({ name });
    assert.equal(res.status, 502, res.text);
    const bare = name.replace('node:', '');
    assert.match(res.body.error, new RegExp(`^Error: The module "${bare}" is a Node.js built-in that isolate mode's v8 engine does not provide`));
    assert.match(res.body.error, /icebox\.isolate_engine/);
  }
  // At load time it is /init's 502, naming the module too.
  const other = await startProxy(t, V8);
  const init = await other.init({ code: 'const fs = require("fs"); function main() { return {}; }' });
  assert.equal(init.status, 502);
  assert.match(init.body.error, /^Initialization has failed due to: Error: The module "fs" is a Node.js built-in/);
});

test('Buffer allocation past the memory limit fails only its activation; concurrent ones succeed', async (t) => {
  const proxy = await v8Proxy(t, CODE, { ICEBOX_CONCURRENCY: '4' });
  const runs = await Promise.all([
    proxy.run({ id: 'bad', do: 'buffers', wait: 'w4', n: 4 }),
    ...[1, 2, 3].map((id) => proxy.run({ id, wait: 'w4', n: 4 })),
  ]);
  const [bad, ...good] = runs;
  assert.equal(bad.status, 502, bad.text);
  assert.match(bad.body.error, /ran out of memory \(memory limit 64 MB for its heap and ArrayBuffers together\)/);
  for (const res of good) assert.equal(res.status, 200, res.text);
  assert.ok(proxy.alive(), 'the process survives');
  assert.equal((await proxy.run({ id: 'next' })).status, 200);
  const isolates = await isolatesOf(proxy);
  assert.equal(isolates.crashed, 1);
  await proxy.stderr.waitFor((text) => /RangeError: Array buffer allocation failed/.test(text), 'the allocation error in the log');
});

for (const [what, status, pattern, crashed] of [
  ['heap', 502, /ran out of memory \(memory limit 64 MB/, 1],
  ['throw', 502, /^TypeError: bad bad$/, 0],
  ['reject', 502, /^RangeError: rejected$/, 0],
  ['stray', 502, /^Error: from a timer$/, 0],
  ['exit', 502, /isolate exited with code 7/, 1],
]) {
  test(`an activation that fails (${what}) fails alone`, async (t) => {
    const proxy = await v8Proxy(t, CODE);
    const [bad, good] = await Promise.all([
      proxy.run({ id: 'bad', do: what, wait: 'w' }),
      proxy.run({ id: 'good', wait: 'w' }),
    ]);
    assert.equal(bad.status, status, bad.text);
    assert.match(bad.body.error, pattern);
    assert.equal(good.status, 200, good.text);
    assert.ok(proxy.alive());
    assert.equal((await proxy.run({ id: 'next' })).status, 200);
    assert.equal((await isolatesOf(proxy)).crashed, crashed);
  });
}

test('an activation past its deadline (a busy loop, a promise never settled) is terminated alone', async (t) => {
  const proxy = await v8Proxy(t, CODE);
  for (const what of ['spin', 'hang']) {
    const [late, good] = await Promise.all([
      proxy.run({ id: what, do: what }, { deadline: Date.now() + 300 }),
      proxy.run({ id: 'good' }, { deadline: Date.now() + 5000 }),
    ]);
    assert.equal(late.status, 504, late.text);
    assert.match(late.body.error, /timed out\. Its isolate was terminated\./);
    assert.equal(good.status, 200, good.text);
  }
  const isolates = await isolatesOf(proxy);
  assert.equal(isolates.timed_out, 2);
  assert.equal(isolates.crashed, 0);
});

test('idle isolates above the pool size are torn down, and reclaim disposes the idle ones', async (t) => {
  const proxy = await v8Proxy(t, CODE, { ICEBOX_ISOLATE_POOL: '1', ICEBOX_ISOLATE_IDLE_MS: '100' });
  const runs = await Promise.all([1, 2, 3].map((id) => proxy.run({ id, wait: 'three', n: 3 })));
  assert.deepEqual(runs.map((r) => r.status), [200, 200, 200]);
  assert.equal(new Set(runs.map((r) => r.body.tag)).size, 3);
  const after = await waitForSharing(proxy, (s) => s.isolates.torn_down >= 2, 'two teardowns');
  assert.deepEqual([after.isolates.live, after.isolates.idle, after.isolates.created], [1, 1, 3]);
  const reclaim = await proxy.request('POST', '/icebox/reclaim', {});
  assert.equal(reclaim.body.details.isolates_terminated, 1);
  assert.equal((await proxy.run({ id: 'after' })).status, 200);
});

test('icebox.shared state is shared by the isolates; a lock of an isolate that exits is released', async (t) => {
  async function stateful(params) {
    if (params.die) await icebox.shared.update('k', () => process.exit(1));
    const value = await icebox.shared.update('k', (v) => (v || 0) + 1);
    const copy = await icebox.shared.get('k');
    return { value, copy, keys: await icebox.shared.keys(), sharing: icebox.sharing };
  }
  const proxy = await v8Proxy(t, { code: sourceOf(stateful), main: 'stateful' });
  const died = await proxy.run({ die: true });
  assert.equal(died.status, 502);
  assert.match(died.body.error, /exited with code 1/);
  const runs = await Promise.all([1, 2, 3].map(() => proxy.run({})));
  assert.deepEqual(runs.map((r) => r.body.value).sort(), [1, 2, 3]);
  assert.deepEqual(runs[0].body.keys, ['k']);
  assert.equal(runs[0].body.sharing, 'isolate');
});

test('init errors are a 502 at /init, and /init can be retried', async (t) => {
  const cases = [
    [{ code: 'function main( {' }, /SyntaxError/],
    [{ code: 'function other() {}' }, /has no function "main"/],
    [{ code: 'throw new Error("top level")' }, /Error: top level/],
    [{ code: 'process.exit(2)' }, /exited with code 2/],
  ];
  for (const [value, pattern] of cases) {
    const proxy = await startProxy(t, V8);
    const init = await proxy.init(value);
    assert.equal(init.status, 502, init.text);
    assert.match(init.body.error, /^Initialization has failed due to: /);
    assert.match(init.body.error, pattern);
    const retry = await proxy.init({ code: 'function main() { return { ok: true }; }' });
    assert.equal(retry.status, 200, retry.text);
    assert.deepEqual((await proxy.run({})).body, { ok: true });
  }
});

test('without --no-node-snapshot the v8 engine refuses at /init and says why', async (t) => {
  const proxy = await startProxy(t, { ...V8, NODE_OPTIONS: '' });
  const init = await proxy.init(CODE);
  assert.equal(init.status, 502);
  assert.match(init.body.error, /--no-node-snapshot/);
});

test("the thesis' benchmark functions give the same results in V8 isolates as in Workers", async (t) => {
  const fs = require('node:fs');
  const path = require('node:path');
  for (const name of ['filehash', 'rest-login', 'memalloc', 'image']) {
    const code = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'functions', 'nodejs', `${name}.js`), 'utf8');
    const bodies = [];
    for (const engine of ['v8', 'worker']) {
      const proxy = await v8Proxy(t, { code }, { ICEBOX_ISOLATE_ENGINE: engine });
      const res = await proxy.run({});
      assert.equal(res.status, 200, `${name} (${engine}): ${res.text}`);
      bodies.push(res.body);
    }
    assert.deepEqual(bodies[0], bodies[1], name);
  }
});
