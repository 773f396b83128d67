'use strict';
// POST /icebox/restored in process mode: Math.random reseeded from the daemon's seed, the
// action's iceboxRestored hook, and the protocol's errors.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy, SENTINEL } = require('../testlib/proxy');
const { makeZip } = require('../testlib/zip-writer');
const { createRandom } = require('../lib/random');
const { chachaBlock } = require('../lib/seeds');

const SEED_A = 'a1'.repeat(32);
const SEED_B = 'b2'.repeat(32);

const restored = (proxy, seed = SEED_A, instance = 'inst-1') => proxy.request('POST', '/icebox/restored', { instance, seed });

async function initialized(t, code) {
  const proxy = await startProxy(t);
  const init = await proxy.init(code);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

// `early` is taken while the module loads, as lodash keeps Math.random: it must follow the
// reseed too.
const RANDOM_ACTION = {
  code: 'const early = Math.random; function main() { return { same: early === Math.random, numbers: [early(), early(), Math.random(), Math.random()] }; }',
};

async function numbers(proxy) {
  const run = await proxy.run({});
  assert.equal(run.status, 200, run.text);
  assert.equal(run.body.same, true);
  return run.body.numbers;
}

// What the main context draws after a restore with `seedHex` (README.md: the seed of the
// main context's generator is the ChaCha20 block of the seed for kind 0, number 0).
function expectedNumbers(seedHex, count = 4) {
  const { random } = createRandom(chachaBlock(Buffer.from(seedHex, 'hex'), 0, [0, 0, 0]).subarray(0, 32));
  return Array.from({ length: count }, random);
}

test('the same seed gives the same Math.random sequence, another seed another', async (t) => {
  const proxies = await Promise.all([1, 2, 3].map(() => initialized(t, RANDOM_ACTION)));
  // Before any restore they are unrelated instances.
  const before = await Promise.all(proxies.map(numbers));
  assert.notDeepEqual(before[0], before[1]);
  const replies = await Promise.all([restored(proxies[0], SEED_A, 'one'), restored(proxies[1], SEED_A, 'two'), restored(proxies[2], SEED_B, 'three')]);
  for (const reply of replies) {
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random'], hook: false, env: [] });
  }
  const [first, second, third] = await Promise.all(proxies.map(numbers));
  assert.deepEqual(first, expectedNumbers(SEED_A));
  assert.deepEqual(second, first);
  assert.notDeepEqual(third, first);
  assert.deepEqual(third, expectedNumbers(SEED_B));
});

test('a second call with the same seed restarts the sequence', async (t) => {
  const proxy = await initialized(t, RANDOM_ACTION);
  assert.equal((await restored(proxy)).status, 200);
  assert.deepEqual(await numbers(proxy), expectedNumbers(SEED_A));
  assert.notDeepEqual(await numbers(proxy), expectedNumbers(SEED_A));
  assert.equal((await restored(proxy)).status, 200);
  assert.deepEqual(await numbers(proxy), expectedNumbers(SEED_A));
});

test('an exported hook runs after the reseed, on every call, with its exports as this', async (t) => {
  const code = 'let restoredCount = 0; let drawn = null; '
    + 'module.exports = { label: "exports", iceboxRestored() { restoredCount += 1; drawn = Math.random(); this.seenThis = this.label; }, '
    + 'main() { return { restoredCount, drawn, seenThis: module.exports.seenThis || null }; } };';
  const proxy = await initialized(t, { code });
  assert.deepEqual((await proxy.run({})).body, { restoredCount: 0, drawn: null, seenThis: null });
  const reply = await restored(proxy);
  assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random'], hook: true, env: [] });
  assert.deepEqual((await proxy.run({})).body, { restoredCount: 1, drawn: expectedNumbers(SEED_A, 1)[0], seenThis: 'exports' });
  assert.equal((await restored(proxy)).body.hook, true);
  assert.equal((await proxy.run({})).body.restoredCount, 2);
});

test('a top-level function iceboxRestored is the hook of a classic action, and a promise it returns is awaited', async (t) => {
  const code = 'let reconnected = false;\n'
    + 'async function iceboxRestored() { await new Promise((resolve) => setTimeout(resolve, 20)); reconnected = true; console.log("reconnected"); }\n'
    + 'function main() { return { reconnected }; }';
  const proxy = await initialized(t, { code });
  assert.deepEqual((await restored(proxy)).body, { ok: true, reseeded: ['Math.random'], hook: true, env: [] });
  // Not an activation: no sentinel; its output opens the next activation's log.
  assert.doesNotMatch(proxy.stdout.text + proxy.stderr.text, new RegExp(SENTINEL));
  assert.deepEqual((await proxy.run({})).body, { reconnected: true });
  await proxy.stdout.waitForSentinels(1);
  assert.equal(proxy.stdout.text, `reconnected\n${SENTINEL}\n`);
});

test('an ES module zip exports its hook', async (t) => {
  const zip = makeZip([
    { name: 'package.json', data: JSON.stringify({ type: 'module', main: 'main.js' }) },
    { name: 'main.js', data: 'let restored = 0; export function iceboxRestored() { restored += 1; } export function main() { return { restored }; }' },
  ]);
  const proxy = await initialized(t, { binary: true, code: zip.toString('base64') });
  assert.equal((await restored(proxy)).body.hook, true);
  assert.deepEqual((await proxy.run({})).body, { restored: 1 });
});

test('a hook that throws or rejects is a 502 and the proxy serves on', async (t) => {
  for (const [body, error] of [
    ['throw new TypeError("no database")', 'TypeError: no database'],
    ['return Promise.reject(new RangeError("too late"))', 'RangeError: too late'],
  ]) {
    const proxy = await initialized(t, { code: `exports.iceboxRestored = () => { ${body}; }; exports.main = () => ({ served: true });` });
    const reply = await restored(proxy);
    assert.equal(reply.status, 502);
    assert.deepEqual(reply.body, { error });
    await proxy.stderr.waitFor((text) => text.includes(error), 'the stack on stderr');
    assert.deepEqual((await proxy.run({})).body, { served: true });
  }
});

test('an iceboxRestored that is not a function is a 502', async (t) => {
  const proxy = await initialized(t, { code: 'exports.iceboxRestored = 5; exports.main = () => ({});' });
  const reply = await restored(proxy);
  assert.equal(reply.status, 502);
  assert.deepEqual(reply.body, { error: "The action's iceboxRestored is not a function (it is a number)." });
});

test('before /init it is a 403', async (t) => {
  const proxy = await startProxy(t);
  const reply = await restored(proxy);
  assert.equal(reply.status, 403);
  assert.deepEqual(reply.body, { error: 'Cannot restore an uninitialized action: /icebox/restored needs a successful /init first.' });
  assert.equal((await proxy.init(RANDOM_ACTION)).status, 200);
  assert.equal((await restored(proxy)).status, 200);
});

test('a malformed body is a 400 and the proxy serves on', async (t) => {
  const proxy = await initialized(t, RANDOM_ACTION);
  for (const [body, complaint] of [
    ['{not json', /not valid JSON/],
    ['[]', /must be a JSON object/],
    [{ seed: SEED_A }, /"instance"/],
    [{ instance: '', seed: SEED_A }, /"instance"/],
    [{ instance: 'i' }, /"seed" must be 64 hex digits \(32 bytes\), got undefined/],
    [{ instance: 'i', seed: 'abcd' }, /got "abcd"/],
    [{ instance: 'i', seed: 'zz'.repeat(32) }, /"seed" must be 64 hex digits/],
    [{ instance: 'i', seed: `${SEED_A}00` }, /"seed" must be 64 hex digits/],
    [{ instance: 'i', seed: 12 }, /got number/],
  ]) {
    const reply = await proxy.request('POST', '/icebox/restored', body);
    assert.equal(reply.status, 400, JSON.stringify(body));
    assert.match(reply.body.error, complaint);
  }
  assert.equal((await proxy.run({})).status, 200);
  assert.equal((await restored(proxy)).status, 200);
  assert.equal((await proxy.request('GET', '/icebox/restored')).status, 405);
});

// The template's __OW_API_HOST, as iceboxd started it before the snapshot, and the new
// instance's, sent in `env`.
const OLD_API_HOST = 'http://10.0.0.1:3233';
const NEW_API_HOST = 'http://10.0.0.1:4100';

// The hook records what it sees and how often it ran; main reports that, what it sees itself
// (also through a child process, which inherits the process environment), and what it draws.
const ENV_ACTION = {
  code: 'const { execFileSync } = require("child_process");\n'
    + 'let hookSaw = null; let hookCalls = 0;\n'
    + 'function iceboxRestored() { hookSaw = process.env.__OW_API_HOST; hookCalls += 1; }\n'
    + 'function main(params) {\n'
    + '  const result = { hookSaw, hookCalls, now: process.env.__OW_API_HOST, good: process.env.GOOD || null, random: Math.random() };\n'
    + '  if (params.child) result.child = execFileSync("printenv", ["__OW_API_HOST"], { encoding: "utf8" }).trim();\n'
    + '  return result;\n'
    + '}',
};

async function withOldApiHost(t) {
  const proxy = await startProxy(t, { __OW_API_HOST: OLD_API_HOST });
  const init = await proxy.init(ENV_ACTION);
  assert.equal(init.status, 200, init.text);
  return proxy;
}

test('env is set before the hook runs and /run sees it, as does a child process', async (t) => {
  const proxy = await withOldApiHost(t);
  assert.equal((await proxy.run({})).body.now, OLD_API_HOST);
  const reply = await proxy.request('POST', '/icebox/restored', { instance: 'i', seed: SEED_A, env: { __OW_API_HOST: NEW_API_HOST } });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(reply.body, { ok: true, reseeded: ['Math.random'], hook: true, env: ['__OW_API_HOST'] });
  const { body: { random, ...seen } } = await proxy.run({ child: true });
  assert.deepEqual(seen, { hookSaw: NEW_API_HOST, hookCalls: 1, now: NEW_API_HOST, good: null, child: NEW_API_HOST });
  // Reseeded as well, after the environment.
  assert.equal(random, expectedNumbers(SEED_A, 1)[0]);
});

test('env absent or empty changes nothing; the names come back sorted', async (t) => {
  const proxy = await withOldApiHost(t);
  assert.deepEqual((await restored(proxy)).body.env, []);
  assert.deepEqual((await proxy.request('POST', '/icebox/restored', { instance: 'i', seed: SEED_A, env: {} })).body.env, []);
  let { body } = await proxy.run({});
  assert.equal(body.hookCalls, 2);
  assert.equal(body.hookSaw, OLD_API_HOST);
  assert.equal(body.now, OLD_API_HOST);
  const reply = await proxy.request('POST', '/icebox/restored', { instance: 'i', seed: SEED_A, env: { __OW_API_HOST: NEW_API_HOST, GOOD: 'yes' } });
  assert.deepEqual(reply.body.env, ['GOOD', '__OW_API_HOST']);
  ({ body } = await proxy.run({}));
  assert.equal(body.good, 'yes');
  assert.equal(body.now, NEW_API_HOST);
});

test('a bad env is a 400 that applies nothing: no variable, no reseed, no hook', async (t) => {
  const proxy = await withOldApiHost(t);
  for (const [env, complaint] of [
    [[['__OW_API_HOST', NEW_API_HOST]], /"env" must be an object of environment variable names to string values, got an array/],
    [null, /"env" must be an object .* got null/],
    ['__OW_API_HOST=x', /"env" must be an object .* got a string/],
    [{ __OW_API_HOST: 4100 }, /"env" value of __OW_API_HOST must be a string, got a number/],
    [{ __OW_API_HOST: null }, /"env" value of __OW_API_HOST must be a string, got null/],
    // Valid variables beside a bad one: none is set.
    [{ __OW_API_HOST: NEW_API_HOST, GOOD: 'x', 'A=B': 'x' }, /"env" has an invalid variable name "A=B"/],
    [{ __OW_API_HOST: NEW_API_HOST, '': 'x' }, /"env" has an invalid variable name ""/],
    [{ __OW_API_HOST: NEW_API_HOST, 'N\0UL': 'x' }, /"env" has an invalid variable name "N\\u0000UL"/],
    [{ GOOD: 'x', __OW_API_HOST: 'a\0b' }, /"env" value of __OW_API_HOST contains a NUL/],
  ]) {
    const reply = await proxy.request('POST', '/icebox/restored', { instance: 'i', seed: SEED_A, env });
    assert.equal(reply.status, 400, JSON.stringify(env));
    assert.match(reply.body.error, complaint);
    const { body } = await proxy.run({});
    assert.equal(body.now, OLD_API_HOST);
    assert.equal(body.good, null);
    assert.equal(body.hookCalls, 0);
    // A reseeded main context would draw the seed's first number.
    assert.notEqual(body.random, expectedNumbers(SEED_A, 1)[0]);
  }
  // The proxy serves on, and a correct call works.
  assert.equal((await proxy.request('POST', '/icebox/restored', { instance: 'i', seed: SEED_A, env: { __OW_API_HOST: NEW_API_HOST } })).status, 200);
  assert.equal((await proxy.run({})).body.hookSaw, NEW_API_HOST);
});
