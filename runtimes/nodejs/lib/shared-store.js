'use strict';
// The state actions keep across activations through globalThis.icebox.shared (README.md,
// "Shared state"). It lives in the main thread: in isolate mode that is the shared isolate the
// workers ask (the thesis' §3.5), in the other modes the process itself.
//
// Every write of a key (set, delete, update) holds that key's lock, so update's
// read-modify-write is atomic against every other write of the key, across isolates too.

class SharedStore {
  constructor() {
    this.values = new Map();
    this.tails = new Map(); // key -> promise settled when the last queued holder releases
  }

  get(key) {
    return this.values.get(key);
  }

  has(key) {
    return this.values.has(key);
  }

  keys() {
    return [...this.values.keys()];
  }

  // `value` undefined deletes the key.
  put(key, value) {
    if (value === undefined) this.values.delete(key);
    else this.values.set(key, value);
  }

  // Sets (`value` undefined: deletes) the key under its lock; whether it existed just before.
  async write(key, value) {
    const release = await this.acquire(key);
    try {
      const had = this.values.has(key);
      this.put(key, value);
      return had;
    } finally {
      release();
    }
  }

  // Resolves, once every earlier holder of `key` has released it, to the release function.
  acquire(key) {
    const previous = this.tails.get(key) || Promise.resolve();
    let release;
    const mine = new Promise((resolve) => { release = resolve; });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    let released = false;
    return previous.then(() => () => {
      if (released) return;
      released = true;
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
  }
}

let store = null;

// The main thread's store, created on first use.
function processStore() {
  return store || (store = new SharedStore());
}

module.exports = { SharedStore, processStore };
