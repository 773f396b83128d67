'use strict';
// Compares the /icebox/reclaim variants on memory released and on the slowdown of the
// activations that follow (Desiccant §5.6 / Fig. 13): per function and variant, a fresh proxy
// runs `warmup` activations, then `window` timed ones ("before"), is reclaimed, then runs
// `window` more ("after"). Variant "none" skips the reclaim: the noise floor of the comparison.
//
//   node runtimes/nodejs/tools/reclaim-bench.js [--trials 5] [--warmup 130] [--window 10]
//        [--functions alloc,fft,unionfind,data-analysis] [--variants none,gc-trim,low-memory,pressure-critical]
//        [--memory-mb 256] [--alloc-mb 32] [--json FILE]
//
// "alloc" is examples/nodejs/alloc.js leaving --alloc-mb MiB of garbage per activation; the
// others are functions/nodejs benchmarks with their input A.
//
// Each proxy runs in its own memory cgroup limited to --memory-mb (0: none), as iceboxd runs an
// instance: node sizes its heap from that limit, which changes how the heap grows. Creating it
// needs write access to this process's cgroup; without it the proxies run unconstrained and the
// tool says so. Trials interleave functions and variants (rotated each trial) so that load from
// elsewhere on the machine spreads over all of them; the table shows medians over trials.

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');
const { setTimeout: sleep } = require('timers/promises');

const ROOT = path.join(__dirname, '..', '..', '..');
const NODE = fs.existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
const PROXY = path.join(__dirname, '..', 'proxy.js');
const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'functions', 'nodejs', 'functions.json'), 'utf8'));
const MIB = 1024 * 1024;

function parseArgs(argv) {
  const opts = {
    trials: 5, warmup: 130, window: 10, memoryMb: 256, allocMb: 32, json: null,
    functions: ['alloc', 'fft', 'unionfind', 'data-analysis'],
    variants: ['none', 'gc-trim', 'low-memory', 'pressure-critical'],
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === '--trials') opts.trials = Number(value);
    else if (key === '--warmup') opts.warmup = Number(value);
    else if (key === '--window') opts.window = Number(value);
    else if (key === '--memory-mb') opts.memoryMb = Number(value);
    else if (key === '--alloc-mb') opts.allocMb = Number(value);
    else if (key === '--functions') opts.functions = value.split(',');
    else if (key === '--variants') opts.variants = value.split(',');
    else if (key === '--json') opts.json = value;
    else throw new Error(`unknown option ${key}`);
  }
  return opts;
}

function subject(name, opts) {
  if (name === 'alloc') {
    return { code: fs.readFileSync(path.join(ROOT, 'examples', 'nodejs', 'alloc.js'), 'utf8'), params: { mb: opts.allocMb } };
  }
  const entry = MANIFEST.find((f) => f.name === name);
  if (!entry) throw new Error(`no function ${name} in functions/nodejs/functions.json`);
  return { code: fs.readFileSync(path.join(ROOT, 'functions', entry.path), 'utf8'), params: entry.inputs.A, main: entry.main };
}

// The cgroup (v1 memory controller or v2 unified) this process is in, if children can be made.
function cgroupParent() {
  for (const line of fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, where] = line.split(':');
    if (controllers === 'memory') return { dir: path.join('/sys/fs/cgroup/memory', where), limitFile: 'memory.limit_in_bytes' };
    if (controllers === '' && where && fs.existsSync('/sys/fs/cgroup/cgroup.controllers')) {
      return { dir: path.join('/sys/fs/cgroup', where), limitFile: 'memory.max' };
    }
  }
  return null;
}

let cgroupWarned = false;
function makeCgroup(memoryMb) {
  if (!memoryMb) return null;
  const parent = cgroupParent();
  const dir = parent && path.join(parent.dir, `icebox-reclaim-bench-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  try {
    if (!parent) throw new Error('no memory cgroup found in /proc/self/cgroup');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, parent.limitFile), String(memoryMb * MIB));
    return dir;
  } catch (err) {
    if (dir) fs.rmSync(dir, { recursive: false, force: true });
    if (!cgroupWarned) process.stderr.write(`warning: proxies run without a memory limit (${err.message})\n`);
    cgroupWarned = true;
    return null;
  }
}

async function startProxy(memoryMb) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'icebox-reclaim-bench-'));
  const socketPath = path.join(dir, 'proxy.sock');
  const cgroup = makeCgroup(memoryMb);
  // The shell joins the cgroup and then becomes node, so the whole proxy process starts inside.
  const script = cgroup ? 'echo $$ > "$CG/cgroup.procs" && exec "$@"' : 'exec "$@"';
  const child = spawn('/bin/sh', ['-c', script, 'sh', NODE, PROXY], {
    cwd: dir,
    env: {
      PATH: process.env.PATH, TMPDIR: dir, CG: cgroup || '', ICEBOX_PROXY_SOCKET: socketPath, ICEBOX_CONCURRENCY: '1',
      __OW_API_HOST: '', NODE_PATH: path.join(__dirname, '..', 'packages', 'node_modules'),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // The proxy's stderr (activation logs and sentinels) is kept only to explain a crash.
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => { stderr = (stderr + chunk).slice(-4000); });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  while (!(await connects(socketPath))) {
    if (child.exitCode !== null) throw new Error(`proxy exited with ${child.exitCode}`);
    await sleep(5);
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return {
    pid: child.pid,
    crash: () => (child.exitCode === null && child.signalCode === null ? null
      : `proxy exited (${child.exitCode ?? child.signalCode}): ${stderr.replaceAll('XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n', '').slice(-1500)}`),
    post: (urlPath, body) => post(agent, socketPath, urlPath, body),
    stop: async () => {
      agent.destroy();
      child.kill('SIGKILL');
      await exited;
      if (cgroup) fs.rmdirSync(cgroup);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function connects(socketPath) {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath, () => { socket.destroy(); resolve(true); });
    socket.on('error', () => resolve(false));
  });
}

function post(agent, socketPath, urlPath, body) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request({
      agent, socketPath, method: 'POST', path: urlPath,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => (res.statusCode === 200
        ? resolve(JSON.parse(text))
        : reject(new Error(`${urlPath}: ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

function ussOf(pid) {
  const text = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1');
  let kib = 0;
  for (const m of text.matchAll(/^Private_(?:Clean|Dirty):\s+(\d+) kB$/gm)) kib += Number(m[1]);
  return kib * 1024;
}

// Each of `count` activations: its wall time as iceboxd would see it, and the CPU time of the
// proxy's main thread (/proc/PID/schedstat, in ns), which also counts the page faults and JIT work
// a reclaim may cause but not the time spent waiting for a CPU, so it stays comparable on a busy
// machine where wall times are not. (V8's helper threads are left out of it.)
async function timedRuns(proxy, params, count) {
  const wall = [];
  const cpu = [];
  for (let i = 0; i < count; i++) {
    const cpuBefore = mainThreadCpuNs(proxy.pid);
    const began = process.hrtime.bigint();
    await proxy.post('/run', { value: params });
    wall.push(Number(process.hrtime.bigint() - began) / 1e6);
    cpu.push((mainThreadCpuNs(proxy.pid) - cpuBefore) / 1e6);
  }
  return { wall, cpu };
}

function mainThreadCpuNs(pid) {
  return Number(fs.readFileSync(`/proc/${pid}/schedstat`, 'latin1').split(' ')[0]);
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

async function measure(name, variant, opts) {
  const { code, params, main } = subject(name, opts);
  const proxy = await startProxy(opts.memoryMb);
  try {
    return await measureOn(proxy, name, variant, code, params, main, opts);
  } catch (err) {
    await new Promise((resolve) => setTimeout(resolve, 100)); // let the exit be noticed
    throw new Error(`${name} ${variant}: ${proxy.crash() || err.message}`);
  } finally {
    await proxy.stop();
  }
}

async function measureOn(proxy, name, variant, code, params, main, opts) {
  await proxy.post('/init', { value: { code, main: main || 'main' } });
  await timedRuns(proxy, params, opts.warmup);
  const before = await timedRuns(proxy, params, opts.window);
  let reclaim;
  if (variant === 'none') {
    const uss = ussOf(proxy.pid);
    reclaim = { uss_before: uss, uss_after: uss, live_bytes: null, cpu_ms: 0, wall_ms: 0 };
  } else {
    reclaim = await proxy.post('/icebox/reclaim', { variant });
  }
  const after = await timedRuns(proxy, params, opts.window);
  return {
    function: name,
    variant,
    uss_before_mb: reclaim.uss_before / MIB,
    uss_after_mb: reclaim.uss_after / MIB,
    live_mb: reclaim.live_bytes === null ? null : reclaim.live_bytes / MIB,
    cpu_ms: reclaim.cpu_ms,
    wall_ms: reclaim.wall_ms,
    settle_ms: reclaim.details ? reclaim.details.settle_ms : null,
    settle_timed_out: reclaim.details ? reclaim.details.settle_timed_out : null,
    uss_end_mb: ussOf(proxy.pid) / MIB,
    before_ms: mean(before.wall),
    after_ms: mean(after.wall),
    first_after_ms: after.wall[0],
    slowdown: mean(after.wall) / mean(before.wall) - 1,
    before_cpu_ms: mean(before.cpu),
    after_cpu_ms: mean(after.cpu),
    first_after_cpu_ms: after.cpu[0],
    cpu_slowdown: mean(after.cpu) / mean(before.cpu) - 1,
  };
}

function table(results, opts) {
  const fmt = (x, digits = 1) => (x === null || Number.isNaN(x) ? '–' : x.toFixed(digits));
  const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
  const lines = [
    `| function | variant | USS before (MiB) | USS after | live | reclaim CPU (ms) | reclaim wall (ms) | CPU/run before (ms) | after | first after | CPU slowdown | wall/run before (ms) | after | wall slowdown | USS after ${opts.window} more |`,
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const name of opts.functions) {
    for (const variant of opts.variants) {
      const rows = results.filter((r) => r.function === name && r.variant === variant);
      if (rows.length === 0) continue;
      const m = (key) => median(rows.map((r) => r[key]).filter((x) => x !== null));
      lines.push(`| ${name} | ${variant} | ${fmt(m('uss_before_mb'))} | ${fmt(m('uss_after_mb'))} | ${variant === 'none' ? '–' : fmt(m('live_mb'))} `
        + `| ${fmt(m('cpu_ms'))} | ${fmt(m('wall_ms'))} | ${fmt(m('before_cpu_ms'), 2)} | ${fmt(m('after_cpu_ms'), 2)} `
        + `| ${fmt(m('first_after_cpu_ms'), 2)} | ${pct(m('cpu_slowdown'))} | ${fmt(m('before_ms'), 2)} | ${fmt(m('after_ms'), 2)} `
        + `| ${pct(m('slowdown'))} | ${fmt(m('uss_end_mb'))} |`);
    }
  }
  return lines.join('\n');
}

async function mainTool() {
  const opts = parseArgs(process.argv.slice(2));
  const results = [];
  const failures = [];
  for (let trial = 0; trial < opts.trials; trial++) {
    const variants = opts.variants.map((_, i) => opts.variants[(i + trial) % opts.variants.length]);
    for (const name of opts.functions) {
      for (const variant of variants) {
        let r;
        try {
          r = await measure(name, variant, opts);
        } catch (err) {
          // One crashed instance (see alloc.js in the README) should not cost the whole run.
          process.stderr.write(`trial ${trial + 1}/${opts.trials} FAILED ${err.message}\n`);
          failures.push({ trial, function: name, variant, error: err.message });
          continue;
        }
        results.push({ trial, ...r });
        process.stderr.write(`trial ${trial + 1}/${opts.trials} ${name} ${variant}: USS ${r.uss_before_mb.toFixed(1)} -> `
          + `${r.uss_after_mb.toFixed(1)} MiB, CPU/run ${r.before_cpu_ms.toFixed(2)} -> ${r.after_cpu_ms.toFixed(2)} ms\n`);
      }
    }
  }
  if (opts.json) fs.writeFileSync(opts.json, `${JSON.stringify({ options: opts, results, failures }, null, 1)}\n`);
  process.stdout.write(`${opts.trials} trials, ${opts.warmup} warm-up activations, windows of ${opts.window}, `
    + `memory limit ${opts.memoryMb || 'none'} MiB, alloc ${opts.allocMb} MiB; medians over trials`
    + `${failures.length ? `; ${failures.length} failed measurement(s) left out` : ''}\n\n${table(results, opts)}\n`);
}

mainTool().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
