'use strict';
// One isolate of isolate mode's `worker` engine (ICEBOX_ISOLATE_ENGINE=worker): a
// worker_threads Worker, a whole Node.js environment on its own thread, running
// lib/isolate-worker.js. Kept beside the v8 engine (lib/v8-isolate.js) for actions that need
// Node's built-ins that reach the host (fs, net, http, child_process, native addons): a Worker
// has them all, at about 8 MB and 30 ms a start more than a V8 isolate. Its resourceLimits bound
// the JavaScript heap only, not ArrayBuffers/Buffers (docs/isolates.md).

const path = require('path');
const { Worker } = require('worker_threads');
const { InitError, describeError } = require('./errors');
const seeds = require('./seeds');

const WORKER_SCRIPT = path.join(__dirname, 'isolate-worker.js');

// ICEBOX_ISOLATE_MEMORY_MB bounds the isolate's whole heap. V8 sizes the young generation by
// itself (up to 16 MB and more for a worker) on top of the old-generation limit, so with many
// isolates the young generations alone could exceed the instance's memory limit: an eighth of
// the budget, 1..8 MB, goes to it, the rest to the old generation.
function heapLimits(budgetMb) {
  const young = Math.min(8, Math.max(1, Math.floor(budgetMb / 8)));
  return { maxYoungGenerationSizeMb: young, maxOldGenerationSizeMb: Math.max(1, budgetMb - young) };
}

class WorkerIsolate {
  // `id`: its number in creation order, from which its Math.random seed is derived.
  constructor(pool, id) {
    this.pool = pool;
    this.id = id;
    const workerData = { ...pool.workerData, seed: seeds.seedFor('isolate', id) };
    const options = { workerData, stdout: false, stderr: false };
    if (pool.config.isolateMemoryMb !== null) options.resourceLimits = heapLimits(pool.config.isolateMemoryMb);
    this.worker = new Worker(WORKER_SCRIPT, options);
    this.error = null; // the worker's uncaught error or out-of-memory, if it ended with one
    this.endedBy = null; // why the pool terminated it: 'torn_down' | 'timed_out' | 'init_failed'
    this.exited = false;
    this.activation = null; // resolves the running activation's outcome
    this.restoring = null; // resolves the outcome of /icebox/restored in the isolate
    this.idleSince = 0;
    this.locks = new Map(); // shared-state locks it holds, released if it dies holding them
    this.ready = new Promise((resolve, reject) => {
      this.onReady = resolve;
      this.onStartFailed = reject;
    });
    this.ready.catch(() => {}); // the pool decides who hears about a failed start
    this.gone = new Promise((resolve) => this.worker.once('exit', (code) => { this.onExit(code); resolve(); }));
    this.worker.on('message', (msg) => this.onMessage(msg));
    this.worker.on('error', (err) => { this.error = err; });
  }

  onMessage(msg) {
    switch (msg.type) {
      case 'log': {
        const stream = msg.fd === 1 ? process.stdout : process.stderr;
        stream.write(msg.binary ? Buffer.from(msg.text, 'latin1') : msg.text);
        break;
      }
      case 'ready':
        this.onReady();
        break;
      case 'init-error':
        this.onStartFailed(new InitError(msg.reason));
        this.terminate('init_failed');
        break;
      case 'result':
        if (this.activation) this.activation({ response: msg.response, started: msg.started });
        break;
      case 'restored':
        if (this.restoring) this.restoring(msg);
        break;
      case 'shared':
        this.pool.serveShared(this, msg).then(
          (reply) => this.post({ type: 'shared-reply', id: msg.id, ...reply }),
          (err) => this.post({ type: 'shared-reply', id: msg.id, error: describeError(err) }),
        );
        break;
      default:
        break;
    }
  }

  post(msg) {
    if (!this.exited) this.worker.postMessage(msg);
  }

  // Sets `env` (name/value pairs) in the isolate's process.env, reseeds its Math.random and
  // calls its copy of the hook, once it has loaded the action; resolves to {hook} or {error}, or
  // {gone} if it ended first.
  restore(seed, env) {
    return new Promise((resolve) => {
      this.restoring = (outcome) => {
        this.restoring = null;
        resolve(outcome);
      };
      this.ready.then(() => this.post({ type: 'restored', seed, env }), (failure) => this.restoring && this.restoring({ gone: true, failure }));
    });
  }

  terminate(reason) {
    if (this.endedBy === null) this.endedBy = reason;
    this.worker.terminate();
    return this.gone;
  }

  onExit(code) {
    this.exited = true;
    for (const { release } of this.locks.values()) release();
    this.locks.clear();
    const failure = new Error(this.exitReason(code));
    this.onStartFailed(failure);
    if (this.activation) this.activation({ failure });
    if (this.restoring) this.restoring({ gone: true, failure });
    this.pool.forget(this);
  }

  exitReason(code) {
    const err = this.error;
    if (err && err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      return `The action's isolate ran out of memory (heap limit ${this.pool.config.isolateMemoryMb} MB) and was terminated.`;
    }
    if (err) return `The action's isolate crashed: ${describeError(err)}`;
    return `The action's isolate exited with code ${code}.`;
  }
}

module.exports = { WorkerIsolate, heapLimits };
