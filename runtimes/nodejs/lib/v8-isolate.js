'use strict';
// One isolate of isolate mode's v8 engine (ICEBOX_ISOLATE_ENGINE=v8, the default): a V8 isolate
// of the npm package isolated-vm inside this process, with its own heap, GC and memory limit,
// running lib/v8-bootstrap.js and the action. It costs about 3 MB and a few ms to start, where a
// Worker (lib/worker-isolate.js) costs 8 MB and ~30 ms, and its memoryLimit counts ArrayBuffers
// (so Buffers) as well as the heap: isolated-vm's ArrayBuffer allocator refuses an allocation
// that would pass it (its src/isolate/allocator_nortti.cc), where a Worker's resourceLimits
// bound the heap alone and a Buffer loop got the whole instance OOM-killed (issue 18 §3).
// The interface is the one lib/isolate-pool.js uses.

const fs = require('fs');
const path = require('path');
const v8 = require('v8');
const { InitError, describeError } = require('./errors');
const { shared: hostFunctions, now } = require('./v8-host');
const { withLookup, FOUND } = require('./source');
const { moduleFile } = require('./archive');
const { stateOf, generatorFactory } = require('./random');
const { remoteSharedApi, keyOf, checkUpdater } = require('./shared-api');
const seeds = require('./seeds');

const IVM_DIR = path.join(__dirname, '..', 'isolates', 'node_modules', 'isolated-vm');
// isolated-vm's own default, for an instance started without ICEBOX_ISOLATE_MEMORY_MB.
const DEFAULT_MEMORY_MB = 128;
// One script of the bootstrap and its parts, compiled (and code-cached) as a whole: an
// expression for a function (host, options) => the isolate's API.
const part = (name) => fs.readFileSync(path.join(__dirname, name), 'utf8').trim().replace(/;$/, '');
const BOOTSTRAP = `((bootstrap, parts) => (host, options) => bootstrap(host, options, parts))(
${part('v8-bootstrap.js')},
{ web: ${part('v8-web.js')}, node: ${part('v8-node-modules.js')} })`;
const SHARED_API = `(request) => { ${keyOf}\n${checkUpdater}\nreturn (${remoteSharedApi})(request); }`;
const COPY_IN_OUT = { arguments: { copy: true }, result: { copy: true, promise: true } };
// An isolate that an activation left holding more than this in ArrayBuffers outside its heap
// gets a full collection after the activation. V8 collects dead ArrayBuffers late (past about
// 64 MB of them), and each isolate has its own such allowance: 8 idle isolates that each
// kept a few activations' dead image buffers held 100 MB more than one process with the same
// garbage (isolates-memory, image, 2026-11-28).
const COLLECT_EXTERNAL_BYTES = 8 * 1024 * 1024;

// isolated-vm on Node 20 needs the process started without Node's startup snapshot (its
// README); iceboxd starts isolate-mode instances with NODE_OPTIONS=--no-node-snapshot
// (runtime.json, "sharing_env").
function snapshotOff() {
  const flag = /(^|\s)--no-node-snapshot(\s|$)/;
  return process.execArgv.includes('--no-node-snapshot') || flag.test(process.env.NODE_OPTIONS || '');
}

function loadIvm() {
  if (!snapshotOff()) {
    throw new InitError("isolate mode's v8 engine needs node started with --no-node-snapshot "
      + '(NODE_OPTIONS=--no-node-snapshot), which isolated-vm requires on Node.js 20.');
  }
  try {
    return require(IVM_DIR);
  } catch (err) {
    throw new InitError(`isolate mode's v8 engine needs the npm package isolated-vm, built by scripts/setup.sh `
      + `into runtimes/nodejs/isolates: ${err.message}`);
  }
}
const ivm = loadIvm();

// The bootstrap compiled once more in every isolate, from V8's code cache of the first.
let cachedData = null;
async function compileBootstrap(isolate) {
  const options = { filename: 'icebox:v8-bootstrap.js' };
  if (cachedData === null) options.produceCachedData = true;
  else options.cachedData = cachedData;
  const script = await isolate.compileScript(BOOTSTRAP, options);
  if (cachedData === null && script.cachedData) ({ cachedData } = script);
  return script;
}

class V8Isolate {
  // `id`: its number in creation order, from which its Math.random seed is derived.
  constructor(pool, id) {
    this.pool = pool;
    this.id = id;
    this.limitMb = pool.config.isolateMemoryMb === null ? DEFAULT_MEMORY_MB : pool.config.isolateMemoryMb;
    this.endedBy = null; // why the pool terminated it: 'torn_down' | 'timed_out' | 'init_failed'
    this.exited = false;
    this.activation = null; // resolves the running activation's outcome
    this.restoring = null; // resolves the outcome of /icebox/restored in the isolate
    this.idleSince = 0;
    this.locks = new Map(); // shared-state locks it holds, released if it dies holding them
    this.timers = new Map(); // the action's timer id -> this thread's timer
    this.exitCode = null; // what the action passed to process.exit
    this.outOfMemory = false;
    this.crash = null; // what ended it otherwise
    this.failure = null; // the Error its activation gets once it has ended
    this.isolate = new ivm.Isolate({
      memoryLimit: this.limitMb,
      // isolated-vm: V8 lost control of the isolate. Only this isolate is given up here.
      onCatastrophicError: (message) => {
        process.stderr.write(`isolated-vm: catastrophic error in an isolate: ${message}\n`);
        this.crash = new Error(message);
        this.end();
      },
    });
    this.gone = new Promise((resolve) => { this.onGone = resolve; });
    // Taken now, as a Worker copies process.env when it is made: an /icebox/restored that comes
    // while this isolate loads gives it the new values through restore(), not at load.
    const options = this.bootstrapOptions(seeds.seedFor('isolate', id));
    this.ready = this.load(options);
    this.ready.catch(() => {}); // the pool decides who hears about a failed start
  }

  // The callbacks that become `host` in the isolate: the process-wide ones and its own.
  callbacks() {
    const callbacks = {};
    for (const [name, fn] of Object.entries(hostFunctions)) callbacks[name] = new ivm.Callback(fn);
    callbacks.timer = new ivm.Callback((id, delay) => {
      clearTimeout(this.timers.get(id));
      this.timers.set(id, setTimeout(() => {
        this.timers.delete(id);
        this.fire(id);
      }, delay));
    });
    callbacks.clearTimer = new ivm.Callback((id) => {
      clearTimeout(this.timers.get(id));
      this.timers.delete(id);
    });
    // The isolate throws right after this returns; it is disposed once the call is over.
    callbacks.exit = new ivm.Callback((code) => {
      if (this.exitCode === null) this.exitCode = code;
      setImmediate(() => this.end());
    });
    // Never rejects: a rejection that isolated-vm cannot deliver, to an isolate disposed while
    // the call was under way, would be this process's unhandled rejection, which ends it.
    callbacks.shared = new ivm.Reference((op, fields) => this.pool.serveShared(this, { op, ...fields })
      .catch((err) => ({ error: describeError(err) })));
    return callbacks;
  }

  bootstrapOptions(seed) {
    return {
      env: { ...process.env },
      platform: process.platform,
      arch: process.arch,
      version: process.version,
      versions: { ...process.versions },
      cwd: process.cwd(),
      sourceFile: path.resolve('action.js'),
      found: FOUND,
      randomFactory: `(${generatorFactory})`,
      seedWords: stateOf(seed),
      sharedApi: SHARED_API,
    };
  }

  async load(options) {
    try {
      // V8 reads the flag when it makes the context: gc() is installed there, for the host's
      // collections only (lib/v8-bootstrap.js). Set before each, since lib/full-gc.js turns it
      // off again after its own use.
      v8.setFlagsFromString('--expose-gc');
      const context = await this.isolate.createContext();
      const script = await compileBootstrap(this.isolate);
      const bootstrap = await script.run(context, { reference: true });
      const api = await bootstrap.apply(undefined, [
        new ivm.ExternalCopy(this.callbacks()).copyInto(),
        new ivm.ExternalCopy(options).copyInto(),
      ], { result: { reference: true } });
      this.api = {};
      for (const name of ['load', 'run', 'fire', 'restored', 'collect']) this.api[name] = await api.get(name, { reference: true });
      const { code, main, dir } = this.pool.workerData;
      let args;
      if (dir === null) {
        args = ['source', withLookup(code, main), main, 'the code'];
      } else {
        const { file, esm } = moduleFile(dir);
        if (esm) {
          throw new InitError("the action is an ES module, which isolate mode's v8 engine cannot load (CommonJS only); "
            + 'use icebox.isolate_engine worker.');
        }
        args = ['file', file, main, `the module ${path.relative(dir, file)}`];
      }
      const outcome = await this.api.load.apply(undefined, args, COPY_IN_OUT);
      if (outcome.exit !== undefined) {
        this.exitCode = outcome.exit;
        this.end();
      } else if (outcome.initError !== undefined || outcome.error !== undefined) {
        throw new InitError(outcome.initError !== undefined ? outcome.initError : outcome.error);
      }
    } catch (err) {
      if (!this.exited && this.isolate.isDisposed) this.lost(err);
      if (this.exited) throw this.failure;
      this.terminate('init_failed');
      throw err;
    }
    if (this.exited) throw this.failure;
  }

  // The pool's only message: run an activation.
  post(msg) {
    if (msg.type === 'run' && !this.exited) this.run(msg.params, msg.activation);
  }

  async run(params, activation) {
    const started = now();
    let outcome;
    try {
      outcome = await this.api.run.apply(undefined, [params, activation], COPY_IN_OUT);
    } catch (err) {
      this.lost(err);
      return;
    }
    if (this.exited) return;
    if (this.exitCode !== null || outcome.exit !== undefined) {
      if (this.exitCode === null) this.exitCode = outcome.exit;
      this.end();
      return;
    }
    if (outcome.log) process.stderr.write(outcome.log);
    if (outcome.memory !== undefined) {
      // The isolate is at its limit with whatever it still holds: a fresh one replaces it.
      this.outOfMemory = true;
      this.end();
      return;
    }
    if (this.activation) this.activation({ response: { status: outcome.status, body: outcome.body }, started });
    this.maybeCollect();
  }

  // After the reply: a full collection if the activation left much in ArrayBuffers (see
  // COLLECT_EXTERNAL_BYTES). It runs on the isolate's thread; a next activation borrowing the
  // isolate meanwhile waits for it.
  async maybeCollect() {
    try {
      const stats = await this.isolate.getHeapStatistics();
      if (stats.externally_allocated_size >= COLLECT_EXTERNAL_BYTES && !this.exited) {
        await this.api.collect.apply(undefined, []);
      }
    } catch (err) {
      // it ended meanwhile
    }
  }

  fire(id) {
    if (this.exited) return;
    this.api.fire.apply(undefined, [id], { arguments: { copy: true } }).catch((err) => this.lost(err));
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
      this.ready.then(async () => {
        let outcome;
        try {
          outcome = await this.api.restored.apply(undefined, [env, stateOf(seed)], COPY_IN_OUT);
        } catch (err) {
          this.lost(err);
          return;
        }
        if (this.exitCode !== null || outcome.exit !== undefined) {
          if (this.exitCode === null) this.exitCode = outcome.exit;
          this.end();
          return;
        }
        if (this.restoring) this.restoring(outcome);
      }, (failure) => this.restoring && this.restoring({ gone: true, failure }));
    });
  }

  // A call into the isolate failed: isolated-vm disposed it (past its memory limit), or it
  // broke. (Calls cut short by end() find it exited.) A call that was waiting on a promise when
  // isolated-vm disposed the isolate fails with "Promise was abandoned", not with the reason:
  // isolated-vm disposes an isolate of its own accord only at its memory limit.
  lost(err) {
    if (this.exited) return;
    if (this.isolate.isDisposed || /memory limit/.test(err && err.message)) this.outOfMemory = true;
    else this.crash = err;
    this.end();
  }

  terminate(reason) {
    if (this.endedBy === null) this.endedBy = reason;
    this.end();
    return this.gone;
  }

  // Disposes the isolate (which stops code running in it), gives back what it held and fails
  // whatever waited for it.
  end() {
    if (this.exited) return;
    this.exited = true;
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch (err) {
        // already disposed by isolated-vm itself
      }
    }
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const { release } of this.locks.values()) release();
    this.locks.clear();
    this.failure = new Error(this.exitReason());
    if (this.activation) this.activation({ failure: this.failure });
    if (this.restoring) this.restoring({ gone: true, failure: this.failure });
    this.pool.forget(this);
    this.onGone();
  }

  exitReason() {
    if (this.exitCode !== null) return `The action's isolate exited with code ${this.exitCode}.`;
    if (this.outOfMemory) {
      return `The action's isolate ran out of memory (memory limit ${this.limitMb} MB for its heap and ArrayBuffers together) and was terminated.`;
    }
    if (this.crash) return `The action's isolate crashed: ${describeError(this.crash)}`;
    return "The action's isolate was terminated.";
  }
}

module.exports = { V8Isolate };
