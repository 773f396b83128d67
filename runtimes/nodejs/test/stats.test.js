'use strict';
// The /icebox/stats extension, with and without a full GC (reclaim.test.js covers /icebox/reclaim).

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { startProxy } = require('../testlib/proxy');

const ALLOC = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'examples', 'nodejs', 'alloc.js'), 'utf8');

function assertShape(stats) {
  assert.equal(stats.runtime, 'nodejs');
  for (const key of ['heap_used_bytes', 'heap_committed_bytes', 'gc_count']) {
    assert.ok(Number.isInteger(stats[key]) && stats[key] >= 0, `${key}: ${stats[key]}`);
  }
  assert.equal(typeof stats.gc_time_ms, 'number');
  assert.ok(stats.heap_used_bytes > 0 && stats.heap_used_bytes <= stats.heap_committed_bytes);
  assert.equal(typeof stats.details.rss_bytes, 'number');
  assert.equal(typeof stats.details.spaces.old_space.used_bytes, 'number');
  const kinds = stats.details.gc_by_kind;
  assert.equal(kinds.minor + kinds.major + kinds.incremental + kinds.weakcb, stats.gc_count);
}

test('stats report the heap; ?gc=1 runs a full collection and sets live_bytes', async (t) => {
  const proxy = await startProxy(t);
  const before = await proxy.request('GET', '/icebox/stats');
  assert.equal(before.status, 200);
  assertShape(before.body);
  assert.equal(before.body.live_bytes, null);

  const collected = await proxy.request('GET', '/icebox/stats?gc=1');
  assert.equal(collected.status, 200);
  assertShape(collected.body);
  assert.ok(Number.isInteger(collected.body.live_bytes) && collected.body.live_bytes > 0);
  assert.ok(collected.body.gc_count > before.body.gc_count);
  assert.ok(collected.body.details.gc_by_kind.major > before.body.details.gc_by_kind.major);

  assert.equal(proxy.stdout.text + proxy.stderr.text, '', 'stats print nothing');
});

test('garbage left by an activation is gone from live_bytes after ?gc=1', async (t) => {
  const proxy = await startProxy(t);
  assert.equal((await proxy.init({ code: `${ALLOC}\nconst v8stats = () => require('v8').getHeapStatistics().used_heap_size;
module.exports.measured = (p) => ({ ...main(p), heap_used_at_return: v8stats() });`, main: 'measured' })).status, 200);
  const run = await proxy.run({ mb: 16 });
  assert.equal(run.status, 200, run.text);
  assert.equal(run.body.mb, 16);
  assert.ok(run.body.heap_growth_bytes >= 16 * 1024 * 1024);
  assert.ok(run.body.objects > 0);

  const stats = await proxy.request('GET', '/icebox/stats?gc=1');
  // The 16 MiB were unreachable once main returned, so a full collection frees them.
  assert.ok(stats.body.live_bytes < run.body.heap_used_at_return - 12 * 1024 * 1024,
    `live ${stats.body.live_bytes}, heap used at return ${run.body.heap_used_at_return}`);
});

test('the forced GC does not expose gc() to user code', async (t) => {
  const proxy = await startProxy(t);
  const code = `function main() {
    return { global: typeof gc, context: require('vm').runInNewContext('typeof gc') };
  }`;
  assert.equal((await proxy.init({ code })).status, 200);
  assert.equal((await proxy.request('GET', '/icebox/stats?gc=1')).status, 200);
  assert.deepEqual((await proxy.run({})).body, { global: 'undefined', context: 'undefined' });
});
