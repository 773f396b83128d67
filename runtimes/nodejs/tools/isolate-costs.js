'use strict';
// What isolate mode's isolates cost (the thesis' Fig. 3.2 and 3.3 for worker_threads): the time
// of a pool start and of a fresh start, as the proxy measures them (sharing.isolates.start_ms in
// /icebox/stats), and how much memory tearing down an isolate that holds `--hold-mb` MiB of JS
// heap gives back to the system, by idle teardown (ICEBOX_ISOLATE_IDLE_MS) and by
// /icebox/reclaim. Then, in this process, the thesis' micro-benchmark (Fig. 3.2, 3.3): the time
// to create a bare Worker and to terminate one that holds 0 or `--hold-mb` MiB.
//
//   node runtimes/nodejs/tools/isolate-costs.js [--runs 30] [--hold-mb 64] [--json FILE]

const fs = require('fs');
const { setTimeout: sleep } = require('timers/promises');
const { Worker } = require('worker_threads');
const { startProxy } = require('../testlib/proxy');
const { waitForSharing } = require('../testlib/actions');

const MIB = 1024 * 1024;

function parseArgs(argv) {
  const opts = { runs: 30, holdMb: 64, json: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--runs') opts.runs = Number(value);
    else if (flag === '--hold-mb') opts.holdMb = Number(value);
    else if (flag === '--json') opts.json = value;
    else throw new Error(`unknown flag ${flag}; flags: --runs N --hold-mb MB --json FILE`);
  }
  return opts;
}

// The action: `hold` keeps that many MiB of doubles in a global, so the isolate, idle in the
// pool, still holds them.
function main(params) {
  if (params.hold) globalThis.held = new Array(params.hold * 131072).fill(0.5);
  return { threadId: require('worker_threads').threadId };
}

// Proxies started here are killed when the tool ends.
const cleanups = [];
const context = { after: (fn) => cleanups.push(fn) };

async function isolateProxy(env) {
  const proxy = await startProxy(context, {
    ICEBOX_SHARING: 'isolate', ICEBOX_CONCURRENCY: '4', ICEBOX_ISOLATE_MEMORY_MB: '256', ...env,
  });
  const init = await proxy.init({ code: main.toString() });
  if (init.status !== 200) throw new Error(`init failed: ${init.text}`);
  return proxy;
}

async function sharing(proxy) {
  return (await proxy.request('GET', '/icebox/stats')).body.sharing.isolates;
}

// The pool's isolates once `predicate` holds for them.
async function until(proxy, predicate) {
  return (await waitForSharing(proxy, (s) => predicate(s.isolates), 'the expected pool state')).isolates;
}

function memory(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (text, re) => [...text.matchAll(re)].reduce((s, m) => s + Number(m[1]), 0) * 1024;
  return {
    rss: kib(status, /^VmRSS:\s+(\d+) kB$/gm),
    pss: kib(rollup, /^Pss:\s+(\d+) kB$/gm),
    uss: kib(rollup, /^Private_(?:Clean|Dirty):\s+(\d+) kB$/gm),
  };
}

// RSS keeps falling for a moment after a teardown (unmapping runs on other threads): read until
// three reads in a row move by less than 256 KiB.
async function settled(pid) {
  let last = memory(pid);
  for (let stable = 0, i = 0; stable < 3 && i < 200; i++) {
    await sleep(20);
    const next = memory(pid);
    stable = Math.abs(next.rss - last.rss) < 256 * 1024 ? stable + 1 : 0;
    last = next;
  }
  return last;
}

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { n: sorted.length, min: sorted[0], p10: at(0.1), median: at(0.5), p90: at(0.9), max: sorted[sorted.length - 1] };
}

async function startTimes(runs) {
  const proxy = await isolateProxy({ ICEBOX_ISOLATE_POOL: '1', ICEBOX_ISOLATE_IDLE_MS: '600000' });
  const pool = [];
  for (let i = 0; i < runs; i++) {
    await proxy.run({});
    pool.push((await sharing(proxy)).start_ms.pool_last);
  }
  const fresh = [];
  for (let i = 0; i < runs; i++) {
    await until(proxy, (s) => s.idle === 1); // the background refill is done and will not compete
    await proxy.request('POST', '/icebox/reclaim', {});
    await proxy.run({});
    fresh.push((await sharing(proxy)).start_ms.fresh_last);
  }
  return { pool_start_ms: summary(pool), fresh_start_ms: summary(fresh) };
}

async function teardown(holdMb) {
  const idleMs = 1500;
  const proxy = await isolateProxy({ ICEBOX_ISOLATE_POOL: '0', ICEBOX_ISOLATE_IDLE_MS: String(idleMs) });
  const { pid } = proxy.child;
  const result = {};
  for (const how of ['idle', 'reclaim']) {
    await until(proxy, (s) => s.live === 0);
    const before = await settled(pid);
    const gone = (await sharing(proxy)).torn_down;
    await proxy.run({ hold: holdMb });
    const holding = await settled(pid);
    let reclaim = null;
    if (how === 'reclaim') reclaim = (await proxy.request('POST', '/icebox/reclaim', {})).body;
    await until(proxy, (s) => s.torn_down === gone + 1 && s.live === 0);
    const after = await settled(pid);
    const grown = holding.rss - before.rss;
    result[how] = {
      rss_before_mib: before.rss / MIB,
      rss_holding_mib: holding.rss / MIB,
      rss_after_mib: after.rss / MIB,
      uss_before_mib: before.uss / MIB,
      uss_holding_mib: holding.uss / MIB,
      uss_after_mib: after.uss / MIB,
      returned_fraction: (holding.rss - after.rss) / grown,
      reclaim_wall_ms: reclaim ? reclaim.wall_ms : null,
    };
  }
  return result;
}

// Worker creation (until its first message) and termination (until it has exited), bare.
async function workerMicro(runs, holdMb) {
  const create = [];
  const terminate = { 0: [], [holdMb]: [] };
  const source = `const { parentPort, workerData } = require('worker_threads');
    globalThis.held = workerData ? new Array(workerData * 131072).fill(0.5) : null;
    parentPort.postMessage('ready');`;
  for (let i = 0; i < runs; i++) {
    for (const mb of [0, holdMb]) {
      const t0 = performance.now();
      const worker = new Worker(source, { eval: true, workerData: mb, resourceLimits: { maxOldGenerationSizeMb: holdMb * 4 } });
      await new Promise((resolve) => worker.once('message', resolve));
      if (mb === 0) create.push(performance.now() - t0);
      const t1 = performance.now();
      await worker.terminate();
      terminate[mb].push(performance.now() - t1);
    }
  }
  return { create_ms: summary(create), terminate_empty_ms: summary(terminate[0]), terminate_holding_ms: summary(terminate[holdMb]) };
}

async function mainTool() {
  const opts = parseArgs(process.argv.slice(2));
  try {
    const starts = await startTimes(opts.runs);
    const memoryReturn = await teardown(opts.holdMb);
    const micro = await workerMicro(opts.runs, opts.holdMb);
    const result = { node: process.version, runs: opts.runs, hold_mb: opts.holdMb, ...starts, teardown: memoryReturn, worker: micro };
    const f = (v) => (typeof v === 'number' ? v.toFixed(2) : String(v));
    console.log(`isolate times over ${opts.runs} runs (ms): min / p10 / median / p90 / max`);
    const rows = [['pool start', result.pool_start_ms], ['fresh start', result.fresh_start_ms],
      ['bare Worker create', micro.create_ms], ['terminate, empty', micro.terminate_empty_ms],
      [`terminate, ${opts.holdMb} MiB`, micro.terminate_holding_ms]];
    for (const [kind, s] of rows) {
      console.log(`  ${kind.padEnd(20)} ${[s.min, s.p10, s.median, s.p90, s.max].map(f).join(' / ')}`);
    }
    console.log(`teardown of an isolate holding ${opts.holdMb} MiB (MiB): RSS before / holding / after, returned; USS the same`);
    for (const [how, r] of Object.entries(memoryReturn)) {
      console.log(`  ${how.padEnd(8)} RSS ${f(r.rss_before_mib)} / ${f(r.rss_holding_mib)} / ${f(r.rss_after_mib)}, `
        + `returned ${(100 * r.returned_fraction).toFixed(1)} %; USS ${f(r.uss_before_mib)} / ${f(r.uss_holding_mib)} / ${f(r.uss_after_mib)}`
        + `${r.reclaim_wall_ms === null ? '' : `; reclaim wall ${f(r.reclaim_wall_ms)} ms`}`);
    }
    if (opts.json) fs.writeFileSync(opts.json, `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    for (const fn of cleanups) await fn();
  }
}

mainTool().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
