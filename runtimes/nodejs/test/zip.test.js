'use strict';
// Zipped actions (binary: true): loading them, and refusing archives that are unsafe or broken.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { startProxy } = require('../testlib/proxy');
const { makeZip, crc32 } = require('../testlib/zip-writer');
const { crc32Js } = require('../lib/crc32');

const HELPER = 'exports.shout = (s) => `${s.toUpperCase()}!`;';
const ENTRY = `
  const { shout } = require('./helper');
  exports.main = (p) => ({ said: shout(p.word), file: __filename.split('/').slice(-2).join('/') });
  exports.other = () => ({ other: true });`;

function initZip(proxy, entries, extra = {}, options = {}) {
  return proxy.init({ name: 'zipped', binary: true, code: makeZip(entries, options).toString('base64'), ...extra });
}

// Files the proxy extracted, relative to its temporary directory, not counting the socket.
function extracted(proxy) {
  return fs.readdirSync(proxy.dir, { recursive: true }).filter((f) => f !== 'proxy.sock').sort();
}

test('a zip whose package.json names the main module', async (t) => {
  const proxy = await startProxy(t);
  const init = await initZip(proxy, [
    { name: 'package.json', data: JSON.stringify({ name: 'a', main: 'lib/entry.js' }) },
    { name: 'lib/' },
    { name: 'lib/entry.js', data: ENTRY },
    { name: 'lib/helper.js', data: HELPER, method: 'store' },
    { name: 'README.md', data: 'x'.repeat(10000) },
  ]);
  assert.equal(init.status, 200, init.text);
  const run = await proxy.run({ word: 'hi' });
  assert.equal(run.status, 200);
  assert.deepEqual(run.body, { said: 'HI!', file: 'lib/entry.js' });
});

test('a zip with only index.js, its entry named by main', async (t) => {
  const proxy = await startProxy(t);
  const init = await initZip(proxy, [
    { name: 'index.js', data: ENTRY, method: 'store' },
    { name: 'helper.js', data: HELPER },
  ], { main: 'other' });
  assert.equal(init.status, 200, init.text);
  assert.deepEqual((await proxy.run({})).body, { other: true });
});

test('a ZIP64 archive', async (t) => {
  const proxy = await startProxy(t);
  const init = await initZip(proxy, [
    { name: 'index.js', data: ENTRY },
    { name: 'helper.js', data: HELPER },
  ], {}, { zip64: true });
  assert.equal(init.status, 200, init.text);
  const run = await proxy.run({ word: 'z' });
  assert.equal(run.body.said, 'Z!');
  assert.match(run.body.file, /^icebox-action-\w+\/index\.js$/);
});

test('an ES module action', async (t) => {
  const proxy = await startProxy(t);
  const init = await initZip(proxy, [
    { name: 'package.json', data: JSON.stringify({ type: 'module', main: 'main.js' }) },
    { name: 'main.js', data: 'import { hostname } from "node:os";\nexport function main(p) { return { esm: typeof hostname, p }; }' },
  ]);
  assert.equal(init.status, 200, init.text);
  assert.equal(proxy.stderr.text, '', 'no experimental or deprecation warnings');
  assert.deepEqual((await proxy.run({ a: 1 })).body, { esm: 'function', p: { a: 1 } });
});

test('zip entries that would escape the directory are refused, and nothing is written', async (t) => {
  const proxy = await startProxy(t);
  const escapes = [
    { name: '../evil.js', message: /"\.\.\/evil\.js" has a "\.\." path component/ },
    { name: 'lib/../../evil.js', message: /has a "\.\." path component/ },
    { name: '..\\evil.js', message: /has a "\.\." path component/ },
    { name: '/tmp/evil.js', message: /"\/tmp\/evil\.js" has an absolute path/ },
  ];
  for (const { name, message } of escapes) {
    const init = await initZip(proxy, [{ name: 'index.js', data: 'exports.main = () => ({});' }, { name, data: 'x' }]);
    assert.equal(init.status, 502, name);
    assert.match(init.body.error, /^Initialization has failed due to: Invalid zip archive: entry /);
    assert.match(init.body.error, message);
  }
  assert.deepEqual(extracted(proxy), []);
  assert.equal(fs.existsSync(path.join(path.dirname(proxy.dir), 'evil.js')), false);
  assert.ok(proxy.alive());
});

test('symbolic links are kept inside the action directory', async (t) => {
  const proxy = await startProxy(t);
  const base = [{ name: 'index.js', data: 'exports.main = () => ({ v: require("./alias/value.json").v });' },
    { name: 'real/value.json', data: '{"v": 5}' }];
  const outside = [
    [{ name: 'alias', symlink: '/etc' }],
    [{ name: 'alias', symlink: '../..' }],
    // Textually inside, but "up" itself leads to the root, so "up/../.." is above it.
    [{ name: 'a/b/up', symlink: '../..' }, { name: 'a/b/esc', symlink: 'up/../..' }],
    // A link used as a directory by a later entry.
    [{ name: 'alias', symlink: 'real' }, { name: 'alias/x', symlink: 'value.json' }],
  ];
  for (const links of outside) {
    const init = await initZip(proxy, [...base, ...links]);
    assert.equal(init.status, 502, JSON.stringify(links));
    assert.match(init.body.error, /Invalid zip archive: (symbolic link|entry) "/);
  }
  assert.deepEqual(extracted(proxy), []);

  const init = await initZip(proxy, [...base, { name: 'alias', symlink: 'real' }]);
  assert.equal(init.status, 200, init.text);
  assert.deepEqual((await proxy.run({})).body, { v: 5 });
});

test('broken archives and archives without an entry module are refused', async (t) => {
  const proxy = await startProxy(t);
  const good = makeZip([{ name: 'index.js', data: 'exports.main = () => ({});' }]);
  const corrupt = Buffer.from(good);
  corrupt[40] ^= 0xff; // a byte of index.js's deflated data
  const cases = [
    { code: Buffer.from('definitely not a zip file').toString('base64'), message: /no end of central directory/ },
    { code: corrupt.toString('base64'), message: /index\.js/ },
    { code: makeZip([{ name: 'lib/index.js', data: '' }]).toString('base64'), message: /either package\.json or index\.js/ },
    {
      code: makeZip([{ name: 'package.json', data: '{"main": "missing.js"}' }]).toString('base64'),
      message: /main module "missing\.js" is not in the archive/,
    },
    { code: makeZip([{ name: 'package.json', data: '{' }]).toString('base64'), message: /package\.json .* not valid JSON/ },
    { code: good.toString('base64'), main: 'nope', message: /has no function "nope"/ },
  ];
  for (const { code, main, message } of cases) {
    const init = await proxy.init({ binary: true, code, main });
    assert.equal(init.status, 502, String(message));
    assert.match(init.body.error, message);
  }
  assert.deepEqual(extracted(proxy), []);
  assert.ok(proxy.alive());
});

test('the fallback CRC-32 agrees with the reference value', () => {
  assert.equal(crc32Js(Buffer.from('123456789')), 0xcbf43926);
  const data = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7) & 0xff));
  assert.equal(crc32Js(data), crc32(data));
});
