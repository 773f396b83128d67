'use strict';
// data-analysis (Desiccant's JavaScript set; ServerlessBench's six-function wage-analysis chain):
// a multi-step analysis of an employee dataset generated from `seed`, with the chain's stages
// run one after the other in this one function:
//   1. ingest    parse the raw CSV export (`rows` records, about 1% of them malformed)
//   2. validate  reject malformed records
//   3. format    normalise names, compute gross pay, progressive tax and net pay
//   4. store     load an in-memory table with indexes by id, role and department
//   5. analyse   group by role (count, sum, mean, median, min, max, stddev of net pay) and join
//                with the departments table to aggregate payroll and budget by location
//   6. merit     raise per employee from rating and the department's budget headroom

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed analyses the same data.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ROLES = [
  ['engineer', 70000, 140000], ['manager', 80000, 160000], ['analyst', 50000, 95000],
  ['designer', 45000, 90000], ['support', 30000, 55000], ['sales', 35000, 80000],
  ['operations', 40000, 75000], ['director', 120000, 220000],
];
const LOCATIONS = ['Shanghai', 'Zurich', 'Seattle', 'Bangalore', 'Sao Paulo'];
const DEPARTMENTS = 12;
const SYLLABLES = ['an', 'bel', 'cor', 'da', 'el', 'fi', 'gan', 'ho', 'is', 'jun', 'ka', 'lo',
  'mi', 'nor', 'os', 'pe', 'qui', 'ra', 'su', 'ta', 'ul', 'vi', 'wen', 'xi', 'yo', 'zh'];
// [upper bound of the bracket, marginal rate]
const TAX_BRACKETS = [[10000, 0], [40000, 0.1], [90000, 0.2], [180000, 0.3], [Infinity, 0.4]];

function generate(rows, seed) {
  const random = rng(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const departments = [];
  for (let d = 0; d < DEPARTMENTS; d++) {
    // Budgets are planned at 95% to 125% of the department's base salaries.
    departments.push({ id: d, name: `dept-${d}`, location: LOCATIONS[d % LOCATIONS.length],
      budget: 0, plan: 0.95 + random() * 0.3 });
  }
  const lines = ['id,name,role,department,hired,rating,base,bonus'];
  let malformed = 0;
  for (let i = 0; i < rows; i++) {
    const [role, low, high] = pick(ROLES);
    const name = `  ${pick(SYLLABLES)}${pick(SYLLABLES)} ${pick(SYLLABLES)}${pick(SYLLABLES)}${pick(SYLLABLES)} `;
    const dept = Math.floor(random() * DEPARTMENTS);
    const base = Math.round(low + random() * (high - low));
    const bonus = Math.round(base * random() * 0.15);
    const rating = 1 + Math.floor(random() * 5);
    const hired = 2000 + Math.floor(random() * 24);
    departments[dept].budget += base * departments[dept].plan;
    let fields = [i + 1, name, role, dept, hired, rating, base, bonus];
    // Real exports are dirty: drop a field, blank the salary or put text in a number.
    if (random() < 0.01) {
      malformed++;
      const fault = Math.floor(random() * 3);
      if (fault === 0) fields = fields.slice(0, 7);
      else if (fault === 1) fields[6] = '';
      else fields[5] = 'n/a';
    }
    lines.push(fields.join(','));
  }
  for (const d of departments) {
    d.budget = Math.round(d.budget);
    delete d.plan;
  }
  return { csv: lines.join('\n'), departments, malformed };
}

function ingest(csv) {
  const lines = csv.split('\n');
  const header = lines[0].split(',');
  return lines.slice(1).map((line) => {
    const cells = line.split(',');
    const record = { fields: cells.length };
    header.forEach((key, i) => { record[key] = cells[i]; });
    return record;
  });
}

function validate(records, width) {
  const valid = [];
  let rejected = 0;
  const numeric = /^\d+$/;
  for (const r of records) {
    const ok = r.fields === width && ['id', 'department', 'hired', 'rating', 'base', 'bonus']
      .every((key) => numeric.test(r[key]));
    if (ok) valid.push(r);
    else rejected++;
  }
  return { valid, rejected };
}

function tax(gross) {
  let owed = 0;
  let lower = 0;
  for (const [upper, rate] of TAX_BRACKETS) {
    if (gross <= lower) break;
    owed += (Math.min(gross, upper) - lower) * rate;
    lower = upper;
  }
  return owed;
}

function format(record) {
  const name = record.name.trim().split(/\s+/)
    .map((w) => w[0].toUpperCase() + w.slice(1)).join(' ');
  const base = Number(record.base);
  const gross = base + Number(record.bonus);
  const owed = tax(gross);
  return { id: Number(record.id), name, role: record.role, department: Number(record.department),
    hired: Number(record.hired), rating: Number(record.rating), base, gross, tax: owed,
    net: gross - owed };
}

function store(employees) {
  const byId = new Map();
  const byRole = new Map();
  const byDepartment = new Map();
  const add = (index, key, e) => {
    if (!index.has(key)) index.set(key, []);
    index.get(key).push(e);
  };
  for (const e of employees) {
    byId.set(e.id, e);
    add(byRole, e.role, e);
    add(byDepartment, e.department, e);
  }
  return { byId, byRole, byDepartment };
}

const round2 = (v) => Math.round(v * 100) / 100;

function describe(values) {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  const sum = sorted.reduce((s, v) => s + v, 0);
  const mean = sum / n;
  const variance = sorted.reduce((s, v) => s + (v - mean) ** 2, 0) / n;
  const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return { count: n, sum: round2(sum), mean: round2(mean), median: round2(median),
    min: round2(sorted[0]), max: round2(sorted[n - 1]), stddev: round2(Math.sqrt(variance)) };
}

function analyse(table, departments) {
  const byRole = {};
  for (const [role, list] of [...table.byRole].sort()) byRole[role] = describe(list.map((e) => e.net));
  // Join: department -> location; payroll counts what the company pays, i.e. gross.
  const byLocation = {};
  for (const d of departments) {
    const staff = table.byDepartment.get(d.id) || [];
    const loc = byLocation[d.location] || (byLocation[d.location] = { departments: 0, headcount: 0, payroll: 0, budget: 0 });
    loc.departments++;
    loc.headcount += staff.length;
    loc.payroll += staff.reduce((s, e) => s + e.gross, 0);
    loc.budget += d.budget;
  }
  for (const loc of Object.values(byLocation)) {
    loc.payroll = round2(loc.payroll);
    loc.utilization = loc.budget ? round2(loc.payroll / loc.budget) : 0;
  }
  return { byRole, byLocation };
}

function merit(table, departments) {
  const raises = [];
  let cost = 0;
  for (const d of departments) {
    const staff = table.byDepartment.get(d.id) || [];
    const payroll = staff.reduce((s, e) => s + e.base, 0);
    // Departments under budget can afford more: headroom scales the rating-based raise.
    const headroom = d.budget > 0 ? Math.max(0, Math.min(1, (d.budget - payroll) / d.budget * 10)) : 0;
    for (const e of staff) {
      const percent = round2([0, 0, 1, 2.5, 4, 6][e.rating] * (0.5 + headroom / 2));
      const amount = round2(e.base * percent / 100);
      cost += amount;
      raises.push({ id: e.id, name: e.name, department: d.id, percent, amount });
    }
  }
  raises.sort((a, b) => b.amount - a.amount || a.id - b.id);
  return { total_cost: round2(cost), average_percent: round2(raises.reduce((s, r) => s + r.percent, 0) / (raises.length || 1)),
    top: raises.slice(0, 5) };
}

function main(params = {}) {
  const rows = intParam(params, 'rows', 10000, 1, 2000000);
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const { csv, departments } = generate(rows, seed);
  const records = ingest(csv);
  const { valid, rejected } = validate(records, 8);
  const table = store(valid.map(format));
  const { byRole, byLocation } = analyse(table, departments);
  return { rows, valid: valid.length, rejected, by_role: byRole, by_location: byLocation,
    merit: merit(table, departments) };
}

module.exports = { main, generate, tax };
