'use strict';
// Failing activations: each is a 502 with a message, and the proxy serves the next one.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');

// One action whose behaviour the parameters choose, so one proxy covers many failures.
function main(params) {
  switch (params.do) {
    case 'throw': throw new TypeError(`bad input ${params.n}`);
    case 'throw-string': throw 'plain string'; // eslint-disable-line no-throw-literal
    case 'reject': return Promise.reject(new Error('rejected on purpose'));
    case 'reject-later': return new Promise((resolve, reject) => setImmediate(() => reject(new Error('later'))));
    case 'return': return params.value;
    case 'return-undefined': return undefined;
    case 'return-date': return new Date(0);
    case 'return-circular': { const o = {}; o.self = o; return o; }
    case 'return-error': return { error: { reason: 'application error' } };
    case 'stray-throw':
      // Never settles; the error thrown from the timer is the activation's own failure.
      return new Promise(() => setTimeout(() => { throw new Error('thrown from a timer'); }, 0));
    default: return { ok: true, n: params.n };
  }
}

async function actionProxy(t) {
  const proxy = await startProxy(t);
  assert.equal((await proxy.init({ code: sourceOf(main) })).status, 200);
  return proxy;
}

test('a thrown error is a 502 with its type and message; the proxy lives on', async (t) => {
  const proxy = await actionProxy(t);
  const res = await proxy.run({ do: 'throw', n: 7 });
  assert.equal(res.status, 502);
  assert.deepEqual(res.body, { error: 'TypeError: bad input 7' });
  assert.ok(proxy.alive());
  assert.deepEqual((await proxy.run({ n: 1 })).body, { ok: true, n: 1 });
  // The stack goes to the activation's log.
  await proxy.stderr.waitFor((text) => text.includes('TypeError: bad input 7\n    at main'), 'the stack');

  const thrownString = await proxy.run({ do: 'throw-string' });
  assert.equal(thrownString.status, 502);
  assert.deepEqual(thrownString.body, { error: 'plain string' });
});

test('a rejected promise is a 502 with its message', async (t) => {
  const proxy = await actionProxy(t);
  for (const what of ['reject', 'reject-later']) {
    const res = await proxy.run({ do: what });
    assert.equal(res.status, 502);
    assert.deepEqual(res.body, { error: `Error: ${what === 'reject' ? 'rejected on purpose' : 'later'}` });
  }
  assert.equal((await proxy.run({})).status, 200);
});

test('a result that is not an object is a 502', async (t) => {
  const proxy = await actionProxy(t);
  const runs = [
    { do: 'return', value: 42 },
    { do: 'return', value: 'text' },
    { do: 'return', value: [1, 2] },
    { do: 'return', value: null },
    { do: 'return', value: true },
    { do: 'return-undefined' },
    { do: 'return-date' },
  ];
  for (const params of runs) {
    const res = await proxy.run(params);
    assert.equal(res.status, 502, JSON.stringify(params));
    assert.deepEqual(res.body, { error: 'The action did not return an object.' });
  }
  const circular = await proxy.run({ do: 'return-circular' });
  assert.equal(circular.status, 502);
  assert.match(circular.body.error, /cannot be serialized as JSON/);
  assert.equal((await proxy.run({})).status, 200);
});

test('a returned {"error": ...} object passes through with 502', async (t) => {
  const proxy = await actionProxy(t);
  const res = await proxy.run({ do: 'return-error' });
  assert.equal(res.status, 502);
  assert.deepEqual(res.body, { error: { reason: 'application error' } });
});

test('an error thrown from a callback fails the running activation; the proxy lives on', async (t) => {
  const proxy = await actionProxy(t);
  const res = await proxy.run({ do: 'stray-throw' });
  assert.equal(res.status, 502);
  assert.deepEqual(res.body, { error: 'Error: thrown from a timer' });
  assert.ok(proxy.alive());
  assert.deepEqual((await proxy.run({ n: 2 })).body, { ok: true, n: 2 });
});
