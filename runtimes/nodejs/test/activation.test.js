'use strict';
// What each activation sees (__OW_* environment) and leaves behind (the log sentinels).

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, sourceOf, SENTINEL } = require('../testlib/proxy');

test('__OW_* variables are set from each /run body and unset when absent', async (t) => {
  const proxy = await startProxy(t);
  function main() {
    const names = ['NAMESPACE', 'ACTION_NAME', 'ACTIVATION_ID', 'TRANSACTION_ID', 'API_KEY', 'DEADLINE',
      'ACTION_VERSION', 'API_HOST'];
    const seen = {};
    for (const name of names) seen[name] = process.env[`__OW_${name}`] === undefined ? null : process.env[`__OW_${name}`];
    return seen;
  }
  assert.equal((await proxy.init({ code: sourceOf(main) })).status, 200);

  const first = await proxy.run({}, {
    namespace: 'guest',
    action_name: '/guest/hello',
    activation_id: 'a1',
    transaction_id: 't1',
    api_key: 'key:secret',
    deadline: '1700000000000',
    action_version: '0.0.1',
  });
  assert.equal(first.status, 200);
  assert.deepEqual(first.body, {
    NAMESPACE: 'guest',
    ACTION_NAME: '/guest/hello',
    ACTIVATION_ID: 'a1',
    TRANSACTION_ID: 't1',
    API_KEY: 'key:secret',
    DEADLINE: '1700000000000',
    ACTION_VERSION: '0.0.1',
    API_HOST: '',
  });

  const second = await proxy.run({}, { namespace: 'other', activation_id: 'a2', deadline: 1700000000001 });
  assert.deepEqual(second.body, {
    NAMESPACE: 'other',
    ACTION_NAME: null,
    ACTIVATION_ID: 'a2',
    TRANSACTION_ID: null,
    API_KEY: null,
    DEADLINE: '1700000000001',
    ACTION_VERSION: null,
    API_HOST: '',
  });
});

test('the sentinel follows each activation on stdout and on stderr', async (t) => {
  const proxy = await startProxy(t);
  function main(params) {
    console.log(`out ${params.i}`);
    console.error(`err ${params.i}`);
    if (params.fail) throw new Error('failed activation');
    return { i: params.i };
  }
  assert.equal((await proxy.init({ code: sourceOf(main) })).status, 200);
  assert.equal(proxy.stdout.text, '', 'nothing is printed before the first /run');
  assert.equal(proxy.stderr.text, '', 'nothing is printed before the first /run');

  assert.equal((await proxy.run({ i: 1 })).status, 200);
  assert.equal((await proxy.run({ i: 2, fail: true })).status, 502);
  assert.equal((await proxy.run({ i: 3 })).status, 200);

  const stdout = await proxy.stdout.waitForSentinels(3);
  const stderr = await proxy.stderr.waitForSentinels(3);
  assert.equal(stdout, `out 1\n${SENTINEL}\nout 2\n${SENTINEL}\nout 3\n${SENTINEL}\n`);
  const activations = stderr.split(`${SENTINEL}\n`);
  assert.equal(activations.length, 4);
  assert.equal(activations[0], 'err 1\n');
  assert.match(activations[1], /^err 2\nError: failed activation\n {4}at main/);
  assert.equal(activations[2], 'err 3\n');
  assert.equal(activations[3], '');
});
