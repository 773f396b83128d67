'use strict';
// The sharing mode and its settings, from the environment iceboxd starts the proxy with
// (docs: README.md, "Sharing modes"). Loaded before the socket listens, so it requires nothing.

const MODES = ['process', 'shared', 'isolate'];
// What an isolate is in isolate mode: a V8 isolate (isolated-vm) or a worker_threads Worker.
const ENGINES = ['v8', 'worker'];

// Throws with a message naming the variable when a setting is malformed.
function readConfig(env = process.env) {
  const mode = env.ICEBOX_SHARING === undefined || env.ICEBOX_SHARING === '' ? 'process' : env.ICEBOX_SHARING;
  if (!MODES.includes(mode)) {
    throw new Error(`ICEBOX_SHARING must be one of ${MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
  const engine = env.ICEBOX_ISOLATE_ENGINE === undefined || env.ICEBOX_ISOLATE_ENGINE === '' ? 'v8' : env.ICEBOX_ISOLATE_ENGINE;
  if (!ENGINES.includes(engine)) {
    throw new Error(`ICEBOX_ISOLATE_ENGINE must be one of ${ENGINES.join(', ')}, got ${JSON.stringify(engine)}`);
  }
  return {
    mode,
    isolateEngine: engine,
    capacity: positive(env, 'ICEBOX_CONCURRENCY', 1),
    isolateMemoryMb: positive(env, 'ICEBOX_ISOLATE_MEMORY_MB', null),
    isolatePool: count(env, 'ICEBOX_ISOLATE_POOL', 1),
    isolateIdleMs: count(env, 'ICEBOX_ISOLATE_IDLE_MS', 10000),
    // Desiccant's "eager" baseline: a full GC after every activation, before the reply, so
    // the activation's latency pays for it (process and shared modes).
    eagerGc: env.ICEBOX_EAGER_GC === '1',
  };
}

function positive(env, name, dflt) {
  const value = count(env, name, dflt);
  if (value === 0) throw new Error(`${name} must be at least 1`);
  return value;
}

function count(env, name, dflt) {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return value;
}

// What GET /icebox/stats reports as `sharing` before /init has loaded the mode's module.
function idleSharingStats(config) {
  const stats = { mode: config.mode, capacity: config.capacity, in_flight: 0 };
  if (config.mode === 'isolate') {
    stats.isolates = {
      engine: config.isolateEngine, live: 0, busy: 0, idle: 0, created: 0, torn_down: 0, crashed: 0, timed_out: 0,
      pool_target: config.isolatePool,
      start_ms: { pool_last: null, fresh_last: null, fresh_median: null, pool_median: null },
    };
  } else if (config.mode === 'shared') {
    stats.contexts = { live: 0, busy: 0, created: 0 };
  }
  return stats;
}

module.exports = { readConfig, idleSharingStats };
