'use strict';
// Measures the proxy's cold start (spawn to the first successful connect on its socket, which is
// when iceboxd considers it ready) and its idle memory, next to a bare `node` that only listens
// on a UNIX socket, the floor any Node.js proxy starts from.
//
//   node runtimes/nodejs/tools/measure.js [runs]        (default 20 runs)
//
// Memory is read from /proc after the process has sat idle for a moment: VmRSS, and Pss, which
// splits pages mapped by several processes among them. Here the node binary's pages are shared
// only with this measuring process; among hundreds of instances each one's Pss is lower still.

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const NODE = fs.existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
const PROXY = path.join(__dirname, '..', 'proxy.js');
const HELLO = path.join(__dirname, '..', '..', '..', 'examples', 'nodejs', 'hello.js');
const BARE = "require('net').createServer().listen(process.env.ICEBOX_PROXY_SOCKET)";
const IDLE_MS = 500;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function tryConnect(socketPath) {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath, () => { socket.destroy(); resolve(true); });
    socket.on('error', () => resolve(false));
  });
}

async function start(args, dir) {
  const socketPath = path.join(dir, 'proxy.sock');
  const began = process.hrtime.bigint();
  const child = spawn(NODE, args, {
    cwd: dir,
    env: { ICEBOX_PROXY_SOCKET: socketPath, ICEBOX_CONCURRENCY: '1', __OW_API_HOST: '' },
    stdio: 'ignore',
  });
  while (!(await tryConnect(socketPath))) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    await sleep(1); // a busy poll would compete with the starting process for the CPU
  }
  return { child, socketPath, startMs: Number(process.hrtime.bigint() - began) / 1e6 };
}

function memoryKiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const field = (text, name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)[1]);
  return { rss: field(status, 'VmRSS'), pss: field(rollup, 'Pss') };
}

function post(socketPath, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: urlPath, method: 'POST' }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${urlPath}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function measureOnce(args, warm) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'icebox-measure-'));
  let proc;
  try {
    proc = await start(args, dir);
    if (warm) {
      await post(proc.socketPath, '/init', { value: { code: fs.readFileSync(HELLO, 'utf8') } });
      await post(proc.socketPath, '/run', { value: { name: 'measure' } });
    }
    await sleep(IDLE_MS);
    return { startMs: proc.startMs, ...memoryKiB(proc.child.pid) };
  } finally {
    if (proc) {
      proc.child.kill('SIGKILL');
      await new Promise((resolve) => proc.child.once('exit', resolve));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (kib) => (kib / 1024).toFixed(1);

async function main() {
  const runs = Number(process.argv[2] || 20);
  console.log(`${NODE} ${process.version}, ${runs} runs each, ${os.cpus().length} CPUs`);
  const subjects = [
    { label: 'bare node listening', args: ['-e', BARE], warm: false, samples: [] },
    { label: 'proxy, before /init', args: [PROXY], warm: false, samples: [] },
    { label: 'proxy, after hello /init + /run', args: [PROXY], warm: true, samples: [] },
  ];
  // Interleaved, so that a change in the machine's load affects every subject alike.
  for (let i = 0; i < runs; i++) {
    for (const s of subjects) s.samples.push(await measureOnce(s.args, s.warm));
  }
  for (const { label, samples } of subjects) {
    const starts = samples.map((m) => m.startMs);
    console.log(`${label.padEnd(32)} start median ${median(starts).toFixed(1)} ms (min ${Math.min(...starts).toFixed(1)})`
      + `  idle RSS ${mib(median(samples.map((m) => m.rss)))} MiB  PSS ${mib(median(samples.map((m) => m.pss)))} MiB`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
