'use strict';
// ICEBOX_SHARING=shared: one vm context per concurrent activation, pooled.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');
const { barrier } = require('../testlib/actions');
const { makeZip } = require('../testlib/zip-writer');

const zipOf = (files) => makeZip(Object.entries(files).map(([name, data]) => ({ name, data })));

const SHARED = { ICEBOX_SHARING: 'shared', ICEBOX_CONCURRENCY: '4' };

async function sharedProxy(t, code, extra = {}) {
  const proxy = await startProxy(t, { ...SHARED, ...extra });
  const init = await proxy.init(code);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

test('overlapping activations see their own globals and __OW_* values', async (t) => {
  async function main(params) {
    globalThis.who = params.id;
    const overlapped = await barrier('started', 2);
    return { who: globalThis.who, overlapped, activation: process.env.__OW_ACTIVATION_ID };
  }
  const proxy = await sharedProxy(t, { code: sourceOf(barrier, main) });
  const [a, b] = await Promise.all([
    proxy.run({ id: 'a' }, { activation_id: 'act-a' }),
    proxy.run({ id: 'b' }, { activation_id: 'act-b' }),
  ]);
  assert.deepEqual(a.body, { who: 'a', overlapped: true, activation: 'act-a' });
  assert.deepEqual(b.body, { who: 'b', overlapped: true, activation: 'act-b' });
  const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
  assert.deepEqual(sharing, { mode: 'shared', capacity: 4, in_flight: 0, contexts: { live: 2, busy: 0, created: 2 } });
  await proxy.stdout.waitForSentinels(2);
  await proxy.stderr.waitForSentinels(2);
});

test('a reused context keeps its globals across sequential activations', async (t) => {
  const code = 'let calls = 0; function main() { calls += 1; globalThis.seen = (globalThis.seen || 0) + 1; '
    + 'return { calls, seen: globalThis.seen, proxyGlobal: typeof globalThis.icebox.shared.get }; }';
  const proxy = await sharedProxy(t, { code });
  for (let i = 1; i <= 3; i++) {
    assert.deepEqual((await proxy.run({})).body, { calls: i, seen: i, proxyGlobal: 'function' });
  }
  const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
  assert.deepEqual(sharing.contexts, { live: 1, busy: 0, created: 1 });
});

test('contexts have the globals an action expects', async (t) => {
  async function main() {
    const crypto = require('crypto');
    const hash = crypto.createHash('sha256').update(Buffer.from('icebox')).digest('hex');
    await new Promise((resolve) => setTimeout(resolve, 1));
    await new Promise((resolve) => setImmediate(resolve));
    return {
      hash,
      url: new URL('https://example.org/a?b=1').searchParams.get('b'),
      text: new TextDecoder().decode(new TextEncoder().encode('ok')),
      fetch: typeof fetch,
      global: global === globalThis,
      exports: typeof module.exports,
      dirname: typeof __dirname,
      clone: structuredClone({ a: [1] }).a[0],
      pid: process.pid > 0,
    };
  }
  const proxy = await sharedProxy(t, { code: sourceOf(main) });
  const res = await proxy.run({});
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, {
    hash: require('node:crypto').createHash('sha256').update('icebox').digest('hex'),
    url: '1', text: 'ok', fetch: 'function', global: true, exports: 'object', dirname: 'string', clone: 1, pid: true,
  });
});

test('an error thrown from a callback fails only the activation it belongs to', async (t) => {
  async function main(params) {
    await barrier('started', 2);
    if (params.fail) return new Promise(() => setTimeout(() => { throw new Error('from a timer'); }, 0));
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { ok: true };
  }
  const proxy = await sharedProxy(t, { code: sourceOf(barrier, main) });
  const [bad, good] = await Promise.all([proxy.run({ fail: true }), proxy.run({})]);
  assert.equal(bad.status, 502);
  assert.deepEqual(bad.body, { error: 'Error: from a timer' });
  assert.deepEqual(good.body, { ok: true });
  assert.ok(proxy.alive());
});

test('process.exit() ends only its activation', async (t) => {
  const proxy = await sharedProxy(t, { code: 'function main(p) { if (p.exit) process.exit(3); return { ok: true }; }' });
  const res = await proxy.run({ exit: true });
  assert.equal(res.status, 502);
  assert.match(res.body.error, /process\.exit\(3\) was called/);
  assert.deepEqual((await proxy.run({})).body, { ok: true });
});

test('an activation past its deadline is cut off; the next one runs', async (t) => {
  const code = 'function main(p) { if (p.spin) for (;;); if (p.hang) return new Promise(() => {}); return { ok: true }; }';
  const proxy = await sharedProxy(t, { code });
  for (const params of [{ spin: true }, { hang: true }]) {
    const res = await proxy.run(params, { deadline: Date.now() + 200 });
    assert.equal(res.status, 504);
    assert.match(res.body.error, /timed out/);
    assert.deepEqual((await proxy.run({}, { deadline: Date.now() + 5000 })).body, { ok: true });
  }
  // The contexts that were cut off are not reused.
  const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
  assert.deepEqual(sharing.contexts, { live: 1, busy: 0, created: 3 });
});

test('a zipped action\'s own modules are private to each context', async (t) => {
  const zip = zipOf({
    'index.js': 'const counter = require("./lib/counter"); const data = require("./data.json");\n'
      + 'exports.main = async (p) => { const n = counter.next(); globalThis.mark = p.id;\n'
      + '  const overlapped = await barrier("zip", 2);\n'
      + '  return { n, mark: globalThis.mark, name: data.name, overlapped }; };\n'
      + `${barrier.toString()}\n`,
    'lib/counter.js': 'let n = 0; exports.next = () => ++n;',
    'data.json': '{"name": "zipped"}',
  });
  const proxy = await sharedProxy(t, { code: zip.toString('base64'), binary: true });
  const both = await Promise.all([proxy.run({ id: 1 }), proxy.run({ id: 2 })]);
  for (const [i, res] of both.entries()) {
    assert.deepEqual(res.body, { n: 1, mark: i + 1, name: 'zipped', overlapped: true });
  }
  assert.equal((await proxy.run({ id: 3 })).body.n, 2, 'a reused context keeps its module state');
});

test('init errors are a 502 at /init', async (t) => {
  const cases = [
    [{ code: 'function main( {' }, /SyntaxError/],
    [{ code: 'function other() {}' }, /has no function "main"/],
    [{ code: 'throw new Error("top level")' }, /Error: top level/],
  ];
  for (const [value, pattern] of cases) {
    const proxy = await startProxy(t, SHARED);
    const init = await proxy.init(value);
    assert.equal(init.status, 502);
    assert.match(init.body.error, /^Initialization has failed due to: /);
    assert.match(init.body.error, pattern);
  }
});

test('an action may redeclare global names and add its own globals', async (t) => {
  const code = `'use strict';
    const { Buffer } = require('buffer');
    const URL = require('url').URL;
    function Event(name) { this.name = name; }
    globalThis.counter = 41;
    function main() {
      counter += 1;
      return { buffer: Buffer.from('ab').length, url: new URL('http://x/y').pathname, event: new Event('e').name,
        counter, math: Math.max(1, 2), array: Array.isArray([]), strict: this === undefined };
    }`;
  const proxy = await sharedProxy(t, { code });
  assert.deepEqual((await proxy.run({})).body, {
    buffer: 2, url: '/y', event: 'e', counter: 42, math: 2, array: true, strict: true,
  });
});

test('a reclaim drops the idle contexts but the most recently used one', async (t) => {
  async function main(params) {
    globalThis.who = globalThis.who || params.id;
    await barrier('started', 3);
    return { who: globalThis.who };
  }
  const proxy = await sharedProxy(t, { code: sourceOf(barrier, main) });
  await Promise.all(['a', 'b', 'c'].map((id) => proxy.run({ id })));
  let { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
  assert.equal(sharing.contexts.live, 3);
  const reclaim = await proxy.request('POST', '/icebox/reclaim', {});
  assert.equal(reclaim.status, 200, reclaim.text);
  assert.equal(reclaim.body.details.contexts_dropped, 2);
  ({ sharing } = (await proxy.request('GET', '/icebox/stats')).body);
  assert.deepEqual(sharing.contexts, { live: 1, busy: 0, created: 3 });
  // The kept context serves on with its globals.
  const after = await proxy.run({ id: 'd' });
  assert.equal(after.status, 200, after.text);
  assert.ok(['a', 'b', 'c'].includes(after.body.who), after.text);
});
