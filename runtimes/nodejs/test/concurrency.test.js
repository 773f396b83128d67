'use strict';
// With ICEBOX_CONCURRENCY > 1, activations overlap in one proxy.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { startProxy } = require('../testlib/proxy');

test('concurrent /run requests are served concurrently', async (t) => {
  const proxy = await startProxy(t, { ICEBOX_CONCURRENCY: '3' });
  // Each activation waits until all three have started, which can only happen if they overlap.
  // The timer is a way out for a serialising proxy, so that the test fails instead of hanging.
  const code = `
    const started = [];
    function main(params) {
      return new Promise((resolve) => {
        const release = () => resolve({ id: params.id, overlapped: started.length === 3 });
        started.push(release);
        if (started.length === 3) started.forEach((r) => r());
        else setTimeout(release, 5000);
      });
    }`;
  assert.equal((await proxy.init({ code })).status, 200);

  const results = await Promise.all([1, 2, 3].map((id) => proxy.run({ id }, { activation_id: `a${id}` })));
  for (const [i, res] of results.entries()) {
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { id: i + 1, overlapped: true });
  }
  await proxy.stdout.waitForSentinels(3);
  await proxy.stderr.waitForSentinels(3);
});
