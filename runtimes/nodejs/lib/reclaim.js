'use strict';
// POST /icebox/reclaim: gives an idle instance's frozen garbage back to the kernel (Desiccant).
// A variant names the collection; every variant then trims glibc's malloc arenas and waits
// until the pages V8 let go of have really left the process, and the reply reports what that
// cost and achieved, measured in here: USS before and after, live heap bytes, CPU and wall time.
//
// The collections that release the most need V8's C++ API, reached through a small addon
// (../addon, built by addon/build.sh) loaded on the first reclaim. Without it the proxy still
// reclaims what plain JavaScript can, a full GC, and says so with `details.addon: false`.

const fs = require('fs');
const path = require('path');
const { setTimeout: sleep } = require('timers/promises');
const v8 = require('v8');
const { fullGc } = require('./full-gc');
const { HttpError } = require('./http');

const ADDON_PATH = path.join(__dirname, '..', 'addon', 'build', 'icebox_reclaim.node');

// kReduceMemoryFootprint (low-memory, pressure-critical) is what makes V8 shrink the young
// generation and hand its pages back; it also drops dead maps and old bytecode, which later
// activations may have to rebuild (Desiccant §4.7). gc-trim is the gentle one: a plain full GC,
// which frees garbage in the old generation but leaves a grown young generation in place.
// The README has the measurements behind DEFAULT_VARIANT.
const VARIANTS = new Map([
  ['low-memory', { step: 'low_memory_notification', collect: (addon) => addon.lowMemoryNotification() }],
  ['pressure-critical', { step: 'memory_pressure_critical', collect: (addon) => addon.memoryPressureCritical() }],
  ['gc-trim', { step: 'full_gc', collect: () => fullGc() }],
]);
const DEFAULT_VARIANT = 'low-memory';

// V8 unmaps freed heap pages on a background thread, so USS keeps falling for a while (up to
// ~100 ms here) after the collection returns. The reply waits for that by watching USS: done
// after STABLE_READS reads in a row that fell by less than NOISE_BYTES (a V8 page is 256 KiB),
// but, when V8's own statistics say the heap gave up at least EXPECT_MIN_BYTES, not before USS
// has fallen by half of that (the background thread may not even have started yet; below that
// size the collection's own allocations could hide the drop), and never longer than
// SETTLE_LIMIT_MS.
const POLL_MS = 5;
const STABLE_READS = 3;
const NOISE_BYTES = 128 * 1024;
const EXPECT_MIN_BYTES = 2 * 1024 * 1024;
const SETTLE_LIMIT_MS = 1000;

let addon; // undefined until the first reclaim tries to load it; null if that failed
let addonError = null;
let queue = Promise.resolve(); // reclaims run one at a time, so measurements never overlap

function loadAddon() {
  if (addon === undefined) {
    try {
      addon = require(ADDON_PATH);
    } catch (err) {
      addon = null;
      addonError = err.message;
    }
  }
  return addon;
}

// Throws a 400 HttpError unless `body` names a known variant (or none).
function variantOf(body) {
  const name = body.variant === undefined || body.variant === null ? DEFAULT_VARIANT : body.variant;
  if (typeof name !== 'string' || !VARIANTS.has(name)) {
    throw new HttpError(400, `Unknown reclaim variant ${JSON.stringify(name)}; the variants are: `
      + `${[...VARIANTS.keys()].join(', ')} (default ${DEFAULT_VARIANT}).`);
  }
  return name;
}

// `prepare`, when given, runs first (after USS is read) and its fields join `details`: isolate
// mode terminates its idle isolates there.
function reclaim(body, prepare) {
  const variant = variantOf(body);
  const result = queue.then(() => run(variant, prepare));
  queue = result.catch(() => {});
  return result;
}

async function run(variant, prepare) {
  const native = loadAddon();
  const ussBefore = readUss();
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  const prepared = prepare ? await prepare() : {};
  const heapBefore = heapSummary();

  const steps = [];
  if (native) {
    VARIANTS.get(variant).collect(native);
    steps.push(VARIANTS.get(variant).step);
  } else {
    fullGc();
    steps.push('full_gc');
  }
  const collected = performance.now();
  const liveBytes = v8.getHeapStatistics().used_heap_size;
  let trimmed = null;
  if (native) {
    trimmed = native.mallocTrim();
    steps.push('malloc_trim');
  }
  const trimDone = performance.now();
  const heapAfter = heapSummary();
  const settled = await settle(ussBefore, heapBefore.physical_bytes - heapAfter.physical_bytes);

  const cpu = process.cpuUsage(cpuStart);
  const finished = performance.now();
  const details = {
    addon: Boolean(native),
    steps,
    collect_ms: ms(collected - started),
    trim_ms: ms(trimDone - collected),
    settle_ms: ms(finished - trimDone),
    settle_polls: settled.polls,
    settle_timed_out: settled.timedOut,
    malloc_trimmed: trimmed,
    heap_before: heapBefore,
    heap_after: heapAfter,
    ...prepared,
  };
  if (!native) details.addon_error = addonError;
  return {
    uss_before: ussBefore,
    uss_after: settled.uss,
    live_bytes: liveBytes,
    cpu_ms: ms((cpu.user + cpu.system) / 1000),
    wall_ms: ms(finished - started),
    variant,
    details,
  };
}

// Polls USS until the release has visibly ended (see POLL_MS above); `heapReleased` is how much
// physical memory V8's statistics say the heap gave up.
async function settle(ussBefore, heapReleased) {
  const deadline = performance.now() + SETTLE_LIMIT_MS;
  const expectedDrop = heapReleased >= EXPECT_MIN_BYTES ? heapReleased / 2 : 0;
  let uss = readUss();
  let polls = 1;
  let stable = 0;
  for (;;) {
    const dropSeen = expectedDrop === 0 || ussBefore - uss >= expectedDrop;
    if (stable >= STABLE_READS && dropSeen) return { uss, polls, timedOut: false };
    if (performance.now() >= deadline) return { uss, polls, timedOut: true };
    await sleep(POLL_MS);
    const next = readUss();
    polls += 1;
    stable = uss - next >= NOISE_BYTES ? 0 : stable + 1;
    uss = next;
  }
}

// Unique set size of the whole process: the pages only it maps, as Desiccant counts it.
function readUss() {
  const text = fs.readFileSync('/proc/self/smaps_rollup', 'latin1');
  let kib = 0;
  for (const match of text.matchAll(/^Private_(?:Clean|Dirty):\s+(\d+) kB$/gm)) kib += Number(match[1]);
  return kib * 1024;
}

function heapSummary() {
  const heap = v8.getHeapStatistics();
  return {
    used_bytes: heap.used_heap_size,
    committed_bytes: heap.total_heap_size,
    physical_bytes: heap.total_physical_size,
    malloced_bytes: heap.malloced_memory,
  };
}

function ms(value) {
  return Math.round(value * 1000) / 1000;
}

module.exports = { reclaim, VARIANTS, DEFAULT_VARIANT };
