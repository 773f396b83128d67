'use strict';
// /init and /run: loading single-file actions, the init-once rule, and the HTTP surface.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { startProxy, sourceOf } = require('../testlib/proxy');

const EXAMPLES = path.join(__dirname, '..', '..', '..', 'examples', 'nodejs');

test('init then run the hello example', async (t) => {
  const proxy = await startProxy(t);
  const code = fs.readFileSync(path.join(EXAMPLES, 'hello.js'), 'utf8');
  const init = await proxy.init({ name: 'hello', main: 'main', code, binary: false });
  assert.equal(init.status, 200);
  assert.deepEqual(init.body, { ok: true });

  const run = await proxy.run({ name: 'icebox' });
  assert.equal(run.status, 200);
  assert.deepEqual(run.body, { greeting: 'Hello, icebox!' });
  const again = await proxy.run({});
  assert.deepEqual(again.body, { greeting: 'Hello, World!' });
});

test('an async main is awaited', async (t) => {
  const proxy = await startProxy(t);
  async function main(params) {
    await new Promise((resolve) => setImmediate(resolve));
    return { doubled: params.n * 2 };
  }
  assert.equal((await proxy.init({ code: sourceOf(main) })).status, 200);
  const run = await proxy.run({ n: 21 });
  assert.equal(run.status, 200);
  assert.deepEqual(run.body, { doubled: 42 });
});

test('main may be exported through module.exports or exports, under another name', async (t) => {
  const cases = [
    { code: 'module.exports.main = (p) => ({ via: "module.exports", p });', main: undefined },
    { code: 'exports.main = function (p) { return { via: "exports", p }; };', main: 'main' },
    { code: 'function handler(p) { return { via: "declared", p }; }', main: 'handler' },
    { code: 'module.exports = { api: { get(p) { return { via: this.name, p }; }, name: "dotted" } };', main: 'api.get' },
  ];
  for (const { code, main } of cases) {
    const proxy = await startProxy(t);
    const init = await proxy.init({ code, main });
    assert.equal(init.status, 200, `${code}: ${init.text}`);
    const run = await proxy.run({ x: 1 });
    assert.equal(run.status, 200, run.text);
    assert.deepEqual(run.body.p, { x: 1 });
  }
});

test('the source is a CommonJS module: built-in modules can be required', async (t) => {
  const proxy = await startProxy(t);
  const code = `
    'use strict';
    const os = require('os');
    const { createHash } = require('node:crypto');
    function main() {
      return { eol: os.EOL, hash: createHash('sha256').update('x').digest('hex').slice(0, 8),
               file: __filename.endsWith('.js'), strict: (function () { return this; })() === undefined };
    }`;
  assert.equal((await proxy.init({ code })).status, 200);
  const run = await proxy.run({});
  assert.deepEqual(run.body, { eol: '\n', hash: '2d711642', file: true, strict: true });
});

test('init env is set before the code loads', async (t) => {
  const proxy = await startProxy(t);
  const code = 'const seen = process.env.GREETING; function main() { return { seen, n: process.env.N }; }';
  assert.equal((await proxy.init({ code, env: { GREETING: 'hi', N: 3 } })).status, 200);
  assert.deepEqual((await proxy.run({})).body, { seen: 'hi', n: '3' });
});

test('a second init is refused with 403', async (t) => {
  const proxy = await startProxy(t);
  const code = 'function main() { return { first: true }; }';
  assert.equal((await proxy.init({ code })).status, 200);
  const second = await proxy.init({ code: 'function main() { return { first: false }; }' });
  assert.equal(second.status, 403);
  assert.deepEqual(second.body, { error: 'Internal error. Cannot initialize the action more than once.' });
  assert.deepEqual((await proxy.run({})).body, { first: true });
});

test('run before init is refused with 403', async (t) => {
  const proxy = await startProxy(t);
  const run = await proxy.run({});
  assert.equal(run.status, 403);
  assert.deepEqual(run.body, { error: 'Cannot invoke an uninitialized action.' });
});

test('a syntax error fails init with 502; the proxy can still be initialised', async (t) => {
  const proxy = await startProxy(t);
  const bad = await proxy.init({ code: 'function main() {\n  return { a: 1 ;\n}' });
  assert.equal(bad.status, 502);
  assert.match(bad.body.error, /^Initialization has failed due to: SyntaxError: .+\(action\.js:2\)$/);
  assert.ok(proxy.alive());

  assert.equal((await proxy.init({ code: 'function main() { return { fixed: true }; }' })).status, 200);
  assert.deepEqual((await proxy.run({})).body, { fixed: true });
});

test('an error thrown while loading fails init with 502', async (t) => {
  const proxy = await startProxy(t);
  const init = await proxy.init({ code: 'throw new RangeError("no config"); function main() {}' });
  assert.equal(init.status, 502);
  assert.equal(init.body.error, 'Initialization has failed due to: RangeError: no config');
});

test('a missing entry point fails init with 502', async (t) => {
  const proxy = await startProxy(t);
  const missing = await proxy.init({ code: 'function helper() { return {}; }' });
  assert.equal(missing.status, 502);
  assert.match(missing.body.error, /has no function "main"/);

  const wrongName = await proxy.init({ code: 'function main() { return {}; }', main: 'handler' });
  assert.equal(wrongName.status, 502);
  assert.match(wrongName.body.error, /has no function "handler"/);

  const noCode = await proxy.init({ main: 'main' });
  assert.equal(noCode.status, 502);
  assert.match(noCode.body.error, /Missing "code"/);
});

test('malformed JSON gets 400 and the proxy keeps serving', async (t) => {
  const proxy = await startProxy(t);
  for (const body of ['{"value": ', '[1, 2]', '']) {
    const res = await proxy.request('POST', '/init', body);
    assert.equal(res.status, 400, body);
    assert.equal(typeof res.body.error, 'string');
  }
  assert.equal((await proxy.init({ code: 'function main() { return { ok: 1 }; }' })).status, 200);
  assert.equal((await proxy.request('POST', '/run', '{oops')).status, 400);
  assert.deepEqual((await proxy.run({})).body, { ok: 1 });
});

test('unknown paths get 404, wrong methods 405', async (t) => {
  const proxy = await startProxy(t);
  const notFound = await proxy.request('GET', '/nothing/here');
  assert.equal(notFound.status, 404);
  assert.equal(typeof notFound.body.error, 'string');
  const wrongMethod = await proxy.request('GET', '/run');
  assert.equal(wrongMethod.status, 405);
  assert.equal(typeof wrongMethod.body.error, 'string');
  assert.equal((await proxy.request('POST', '/icebox/stats')).status, 405);
});

test('one connection carries many requests (keep-alive)', async (t) => {
  const proxy = await startProxy(t);
  const init = await proxy.init({ code: 'function main(p) { return p; }' });
  assert.equal(init.status, 200);
  assert.equal(init.reusedSocket, false);
  for (let i = 0; i < 3; i++) {
    const run = await proxy.run({ i });
    assert.deepEqual(run.body, { i });
    assert.equal(run.reusedSocket, true);
  }
});
