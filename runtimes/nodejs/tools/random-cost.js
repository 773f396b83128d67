'use strict';
// Measures what the proxy's Math.random (lib/random.js) costs next to V8's own, where actions
// call it: in the main context (process mode, and the main thread of a worker isolate) and in
// a vm context (shared mode, the generator compiled inside the context as the proxy does).
//
//   node runtimes/nodejs/tools/random-cost.js [trials]        (default 15)
//
// Each trial is a fresh node process per subject, interleaved, so JIT state and the load of
// the machine hit all subjects alike. Two workloads: a tight loop summing Math.random() (the
// call alone), and a Fisher-Yates shuffle of 1000 numbers (a call among other work).
// Reported: median ns per Math.random() call, and the median of the per-trial ratios ours /
// native (each trial runs the two back to back, so a change in the machine's load between
// trials cancels out of the ratio).

const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const NODE = fs.existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
const RANDOM = path.join(__dirname, '..', 'lib', 'random.js');

const WORKLOADS = {
  loop: { calls: 2e7, body: 'let sum = 0; for (let k = 0; k < 2e7; k++) sum += Math.random(); return sum;' },
  shuffle: {
    calls: 2e4 * 999,
    body: 'const a = Array.from({ length: 1000 }, (_, i) => i); let s = 0;'
      + 'for (let r = 0; r < 2e4; r++) { for (let i = a.length - 1; i > 0; i--) {'
      + ' const j = Math.floor(Math.random() * (i + 1)); const t = a[i]; a[i] = a[j]; a[j] = t; } s += a[0]; }'
      + 'return s;',
  },
};

// Runs in the child: prints ns per call of the third run (the first two warm up), in CPU time
// (user + system of the process), which other work on the machine inflates less than wall
// time.
function child(where, ours, workload) {
  const vm = require('vm');
  const { install, factoryIn } = require(RANDOM);
  const seed = require('crypto').randomBytes(32);
  const { body } = WORKLOADS[workload];
  let fn;
  if (where === 'main') {
    if (ours) install(Math, seed);
    // Compiled as lib/source.js compiles a process-mode action.
    fn = vm.compileFunction(body, []);
  } else {
    const context = vm.createContext({});
    if (ours) install(vm.runInContext('Math', context), seed, factoryIn(context));
    // With the local Math that lib/vm-context.js gives the action's code in a context.
    fn = vm.runInContext(`(function () { var Math = globalThis.Math; ${body} })`, context);
  }
  fn();
  fn();
  const start = process.cpuUsage();
  const result = fn();
  const { user, system } = process.cpuUsage(start);
  const ns = ((user + system) * 1000) / WORKLOADS[workload].calls;
  if (!Number.isFinite(result)) throw new Error('the workload returned nothing');
  process.stdout.write(`${ns}\n`);
}

function median(values) {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function main() {
  const trials = Number(process.argv[2] || 15);
  const subjects = [];
  for (const workload of Object.keys(WORKLOADS)) {
    for (const where of ['main', 'vm']) {
      for (const ours of [false, true]) subjects.push({ workload, where, ours, ns: [] });
    }
  }
  for (let trial = 0; trial < trials; trial++) {
    for (const s of subjects) {
      const out = execFileSync(NODE, [__filename, '--child', s.where, s.ours ? '1' : '0', s.workload], { encoding: 'utf8' });
      s.ns.push(Number(out));
    }
  }
  console.log(`node ${process.versions.node}, ${trials} trials, median CPU ns per Math.random() call`);
  console.log('workload | context | native | ours | ours/native (median of trials, min..max)');
  for (let i = 0; i < subjects.length; i += 2) {
    const native = subjects[i].ns;
    const ours = subjects[i + 1].ns;
    const ratios = ours.map((ns, trial) => ns / native[trial]);
    console.log(`${subjects[i].workload} | ${subjects[i].where} | ${median(native).toFixed(2)} | ${median(ours).toFixed(2)} | `
      + `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)})`);
  }
}

if (process.argv[2] === '--child') child(process.argv[3], process.argv[4] === '1', process.argv[5]);
else main();
