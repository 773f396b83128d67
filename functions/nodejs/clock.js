'use strict';
// clock (Desiccant's JavaScript set): returns the clocks of the current process — wall time,
// uptime and CPU time — the lightest function of the set, whose memory is almost all runtime.
// `samples` reads the monotonic clock that many times and reports its resolution and step, so
// one invocation does a fixed, tunable amount of work (each read allocates a BigInt).

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

function main(params = {}) {
  const samples = intParam(params, 'samples', 200000, 2, 10000000);
  const reads = new Array(samples);
  for (let i = 0; i < samples; i++) reads[i] = process.hrtime.bigint();

  const steps = new Float64Array(samples - 1);
  let monotonic = true;
  let resolution = Infinity;
  for (let i = 1; i < samples; i++) {
    const step = Number(reads[i] - reads[i - 1]);
    if (step < 0) monotonic = false;
    if (step > 0 && step < resolution) resolution = step;
    steps[i - 1] = step;
  }
  steps.sort();
  const cpu = process.cpuUsage();
  const now = Date.now();
  return {
    now: new Date(now).toISOString(),
    epoch_ms: now,
    uptime_s: process.uptime(),
    cpu_user_us: cpu.user,
    cpu_system_us: cpu.system,
    samples,
    monotonic,
    // Smallest non-zero difference between consecutive reads: the clock's effective resolution.
    resolution_ns: Number.isFinite(resolution) ? resolution : null,
    median_step_ns: steps[steps.length >> 1],
    span_ns: Number(reads[samples - 1] - reads[0]),
  };
}

module.exports = { main };
