'use strict';
// Isolate mode's pool of isolates (the thesis' isolate pool, §3.4): each activation
// borrows an idle isolate with the action already loaded (a pool start) or starts a new one
// (a fresh start); afterwards the isolate goes back to the pool, and the isolates beyond the
// pool size that stay idle for ICEBOX_ISOLATE_IDLE_MS are terminated, giving their whole heap
// back at once. An isolate that crashes, exits, runs out of heap or passes its activation's
// deadline takes only that activation with it. The isolates are the engine's
// (ICEBOX_ISOLATE_ENGINE): V8 isolates (lib/v8-isolate.js) or Workers (lib/worker-isolate.js);
// both have the same small interface, which this file is written against.

const { InitError } = require('./errors');
const { TIMED_OUT, json, deadlineOf } = require('./response');
const { SampleWindow } = require('./samples');
const { HookError } = require('./hook');
const seeds = require('./seeds');

const MAX_TIMER_MS = 2 ** 31 - 1;

function now() {
  return performance.timeOrigin + performance.now();
}

class IsolatePool {
  // `workerData`: the action each isolate loads, {code, main, dir}; `Isolate`: the engine's
  // isolate class, constructed as new Isolate(pool, id).
  constructor(config, workerData, store, Isolate) {
    this.config = config;
    this.Isolate = Isolate;
    this.workerData = workerData;
    this.store = store;
    this.idle = []; // a stack: the most recently used isolate is borrowed first
    this.busy = new Set();
    this.live = new Set(); // every isolate not exited: idle, busy or starting
    this.refilling = 0;
    this.nextLock = 1;
    this.counts = { created: 0, torn_down: 0, crashed: 0, timed_out: 0 };
    this.starts = { pool: new SampleWindow(), fresh: new SampleWindow() };
    this.closed = false;
    this.sweepTimer = null;
  }

  spawn() {
    this.counts.created += 1;
    const isolate = new this.Isolate(this, this.counts.created);
    this.live.add(isolate);
    return isolate;
  }

  // Starts the first isolate, whose failure to load the action is /init's failure, then fills
  // the rest of the pool in the background.
  async start() {
    const first = this.spawn();
    await first.ready;
    this.makeIdle(first);
    this.refill();
  }

  async run(body) {
    const borrowed = now();
    let isolate = this.idle.pop();
    const kind = isolate ? 'pool' : 'fresh';
    if (!isolate) isolate = this.spawn();
    this.busy.add(isolate);
    try {
      const outcome = await this.activate(isolate, body);
      if (outcome.timedOut) {
        this.counts.timed_out += 1;
        await isolate.terminate('timed_out');
        return json(504, { error: `${TIMED_OUT} Its isolate was terminated.` });
      }
      if (outcome.failure) {
        process.stderr.write(`${outcome.failure.message}\n`);
        const message = outcome.failure instanceof InitError
          ? `A new isolate could not load the action: ${outcome.failure.message}`
          : outcome.failure.message;
        return json(502, { error: message });
      }
      this.starts[kind].add(Math.max(0, outcome.started - borrowed)); // two threads' clocks
      this.busy.delete(isolate);
      this.makeIdle(isolate);
      return outcome.response;
    } finally {
      this.busy.delete(isolate);
      this.refill();
    }
  }

  activate(isolate, body) {
    return new Promise((resolve) => {
      let timer = null;
      const settle = (outcome) => {
        clearTimeout(timer);
        isolate.activation = null;
        resolve(outcome);
      };
      isolate.activation = settle;
      const deadline = deadlineOf(body);
      if (deadline !== null) {
        timer = setTimeout(() => settle({ timedOut: true }), Math.min(MAX_TIMER_MS, Math.max(0, deadline - Date.now())));
      }
      isolate.ready.then(() => {
        if (isolate.activation !== settle) return;
        const activation = {};
        for (const key of Object.keys(body)) if (key !== 'value') activation[key] = body[key];
        isolate.post({ type: 'run', params: body.value === undefined ? {} : body.value, activation });
      }, (failure) => settle({ failure }));
    });
  }

  makeIdle(isolate) {
    if (isolate.exited || this.closed) return;
    isolate.idleSince = performance.now();
    this.idle.push(isolate);
    this.scheduleSweep();
  }

  // Idle isolates beyond the pool size are terminated least recently used first, once they
  // have been idle for ICEBOX_ISOLATE_IDLE_MS; one timer, set for the oldest.
  scheduleSweep() {
    if (this.sweepTimer !== null || this.idle.length <= this.config.isolatePool) return;
    const due = this.idle[0].idleSince + this.config.isolateIdleMs - performance.now();
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = null;
      this.sweep();
    }, Math.max(0, due));
  }

  sweep() {
    while (this.idle.length > this.config.isolatePool
        && performance.now() - this.idle[0].idleSince >= this.config.isolateIdleMs) {
      this.counts.torn_down += 1;
      this.idle.shift().terminate('torn_down');
    }
    this.scheduleSweep();
  }

  // Keeps ICEBOX_ISOLATE_POOL isolates warm, started in the background after activations.
  refill() {
    while (!this.closed && this.idle.length + this.refilling < this.config.isolatePool) {
      this.refilling += 1;
      const isolate = this.spawn();
      isolate.ready.then(() => {
        this.refilling -= 1;
        this.makeIdle(isolate);
      }, (err) => {
        this.refilling -= 1;
        process.stderr.write(`A pool isolate could not load the action: ${err.message}\n`);
      });
    }
  }

  // Called by an isolate when its worker has exited, whoever ended it.
  forget(isolate) {
    this.live.delete(isolate);
    const at = this.idle.indexOf(isolate);
    if (at !== -1) this.idle.splice(at, 1);
    this.busy.delete(isolate);
    if (isolate.endedBy === null || isolate.endedBy === 'init_failed') this.counts.crashed += 1;
  }

  // Terminates every idle isolate (POST /icebox/reclaim); the pool refills after the next activation.
  async terminateIdle() {
    const idle = this.idle.splice(0);
    this.counts.torn_down += idle.length;
    await Promise.all(idle.map((isolate) => isolate.terminate('torn_down')));
    return idle.length;
  }

  async close() {
    this.closed = true;
    clearTimeout(this.sweepTimer);
    const all = [...this.idle, ...this.busy];
    this.idle = [];
    await Promise.all(all.map((isolate) => isolate.terminate('torn_down')));
  }

  // /icebox/restored: every isolate alive now (also those still loading the action) holds a
  // copy of the action loaded before the call, and a process.env copied from the main thread's
  // when it started; each gets `env`, a new seed, and runs its hook. (One still loading may
  // have read the old values while loading, as a copy loaded before the snapshot did.) One
  // that exits on its own meanwhile (the hook called process.exit) fails the call; one the pool
  // ended (teardown, a failed start) is skipped. Resolves to {isolates: how many were
  // reseeded, hook: whether any had a hook}; throws a HookError for the first failure.
  async restore(env) {
    const isolates = [...this.live].sort((x, y) => x.id - y.id);
    const outcomes = await Promise.all(isolates.map((isolate) => isolate.restore(seeds.seedFor('isolate', isolate.id), env)));
    let reseeded = 0;
    let hook = false;
    let error = null;
    outcomes.forEach((outcome, i) => {
      if (outcome.gone) {
        if (isolates[i].endedBy === null && error === null) error = `The action's isolate ended during iceboxRestored: ${outcome.failure.message}`;
        return;
      }
      reseeded += 1;
      if (outcome.hook) hook = true;
      if (outcome.error !== undefined && error === null) error = outcome.error;
    });
    if (error !== null) throw new HookError(error);
    return { isolates: reseeded, hook };
  }

  // Answers an isolate's icebox.shared request from the main thread's store.
  async serveShared(isolate, msg) {
    const { store } = this;
    switch (msg.op) {
      case 'get': return { value: store.get(msg.key) };
      case 'has': return { value: store.has(msg.key) };
      case 'keys': return { value: store.keys() };
      case 'set':
      case 'delete':
        return { value: await store.write(msg.key, msg.op === 'set' ? msg.value : undefined) };
      case 'lock': {
        const release = await store.acquire(msg.key);
        if (isolate.exited) {
          release();
          throw new Error('the isolate has exited');
        }
        const lock = this.nextLock++;
        isolate.locks.set(lock, { key: msg.key, release });
        return { value: store.get(msg.key), lock };
      }
      case 'unlock': {
        const held = isolate.locks.get(msg.lock);
        if (!held) throw new Error('unknown lock');
        isolate.locks.delete(msg.lock);
        if (msg.write) store.put(held.key, msg.value);
        held.release();
        return {};
      }
      default:
        throw new Error(`unknown icebox.shared operation ${msg.op}`);
    }
  }

  stats() {
    const round = (v) => (v === null ? null : Math.round(v * 1000) / 1000);
    return {
      engine: this.config.isolateEngine,
      live: this.idle.length + this.busy.size,
      busy: this.busy.size,
      idle: this.idle.length,
      ...this.counts,
      pool_target: this.config.isolatePool,
      start_ms: {
        pool_last: round(this.starts.pool.last()),
        fresh_last: round(this.starts.fresh.last()),
        fresh_median: round(this.starts.fresh.median()),
        pool_median: round(this.starts.pool.median()),
      },
    };
  }
}

module.exports = { IsolatePool };
