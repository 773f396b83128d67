'use strict';
// globalThis.icebox.shared, the same promise-based API in every sharing mode, so an action is
// portable between them. Values are structured-cloned on the way in and out, as they must be
// between isolates: what get() returns is a copy, and changing it changes nothing stored.

function keyOf(key) {
  if (typeof key !== 'string' && typeof key !== 'number') {
    throw new TypeError('icebox.shared keys are strings');
  }
  return String(key);
}

function checkUpdater(fn) {
  if (typeof fn !== 'function') throw new TypeError('icebox.shared.update(key, fn) needs a function');
}

// The API over a SharedStore in this thread (process and shared modes, and the main thread).
function localSharedApi(store) {
  const clone = (value) => (value === undefined ? undefined : structuredClone(value));
  return {
    async get(key) {
      return clone(store.get(keyOf(key)));
    },
    async has(key) {
      return store.has(keyOf(key));
    },
    async keys() {
      return store.keys();
    },
    async set(key, value) {
      await store.write(keyOf(key), clone(value));
    },
    async delete(key) {
      return store.write(keyOf(key), undefined);
    },
    async update(key, fn) {
      const name = keyOf(key);
      checkUpdater(fn);
      const release = await store.acquire(name);
      try {
        const next = clone(await fn(clone(store.get(name))));
        store.put(name, next);
        return clone(next);
      } finally {
        release();
      }
    },
  };
}

// The API in a worker isolate: every call is a request to the main thread (lib/isolate-pool.js
// answers them with a localSharedApi-like store). `request(op, fields)` resolves to the reply.
function remoteSharedApi(request) {
  return {
    get: async (key) => (await request('get', { key: keyOf(key) })).value,
    has: async (key) => (await request('has', { key: keyOf(key) })).value,
    keys: async () => (await request('keys', {})).value,
    set: async (key, value) => { await request('set', { key: keyOf(key), value }); },
    delete: async (key) => (await request('delete', { key: keyOf(key) })).value,
    async update(key, fn) {
      const name = keyOf(key);
      checkUpdater(fn);
      const { value, lock } = await request('lock', { key: name });
      let next;
      try {
        next = await fn(value);
      } catch (err) {
        await request('unlock', { lock, write: false });
        throw err;
      }
      await request('unlock', { lock, write: true, value: next });
      return next === undefined ? undefined : structuredClone(next);
    },
  };
}

// Defines globalThis.icebox on `target` (a global object), not enumerable, as Node's own
// globals are.
function install(target, shared, mode) {
  Object.defineProperty(target, 'icebox', {
    value: Object.freeze({ shared: Object.freeze(shared), sharing: mode }),
    configurable: true,
    enumerable: false,
    writable: false,
  });
}

module.exports = { localSharedApi, remoteSharedApi, install, keyOf, checkUpdater };
