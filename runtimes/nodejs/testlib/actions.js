'use strict';
// Action code shared by the sharing-mode tests. `barrier` is declared in the action's source: it
// holds an activation until `n` activations have reached it (so they surely overlap), through
// icebox.shared, the one thing all modes share; it gives up after a few seconds, so that a proxy
// that serialises activations fails a test instead of hanging it.

async function barrier(name, n) {
  await icebox.shared.update(name, (v) => (v || 0) + 1);
  for (let i = 0; i < 500; i++) {
    if ((await icebox.shared.get(name)) >= n) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

// Polls GET /icebox/stats until `predicate(sharing)` holds (a guard, not a measurement).
async function waitForSharing(proxy, predicate, what) {
  for (let i = 0; i < 500; i++) {
    const { sharing } = (await proxy.request('GET', '/icebox/stats')).body;
    if (predicate(sharing)) return sharing;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

module.exports = { barrier, waitForSharing };
