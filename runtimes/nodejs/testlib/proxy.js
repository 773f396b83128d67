'use strict';
// Test harness: starts the real proxy (proxy.js under /usr/bin/node) on a socket in a fresh
// temporary directory and talks HTTP/1.1 to it over that socket. Every proxy started here is
// killed, and its directory removed, when the test that started it ends.

const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const NODE = fs.existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;
const PROXY = path.join(__dirname, '..', 'proxy.js');
const SENTINEL = 'XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX';
const WAIT_MS = 10000; // only a guard against hanging forever; no test measures time

// Accumulates a child's output and lets a test wait until it shows something.
class Output {
  constructor(stream) {
    this.text = '';
    this.waiters = [];
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => {
      this.text += chunk;
      this.waiters = this.waiters.filter((w) => !w.check());
    });
  }

  waitFor(predicate, what) {
    return new Promise((resolve, reject) => {
      const waiter = {
        check: () => {
          if (!predicate(this.text)) return false;
          clearTimeout(timer);
          resolve(this.text);
          return true;
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out waiting for ${what}; output so far: ${JSON.stringify(this.text)}`));
      }, WAIT_MS);
      if (!waiter.check()) this.waiters.push(waiter);
    });
  }

  sentinels() {
    return this.text.split(`${SENTINEL}\n`).length - 1;
  }

  waitForSentinels(count) {
    return this.waitFor(() => this.sentinels() >= count, `${count} sentinel(s)`);
  }
}

// `t` is the node:test context; `env` is added to the proxy's environment; `proxy` is the
// proxy.js to run (a copy elsewhere, e.g. without the reclaim addon).
async function startProxy(t, env = {}, { proxy: proxyPath = PROXY } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'icebox-nodejs-test-'));
  const socketPath = path.join(dir, 'proxy.sock');
  const child = spawn(NODE, [proxyPath], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      TMPDIR: dir, // zipped actions are extracted here, so cleanup removes them too
      ICEBOX_PROXY_SOCKET: socketPath,
      ICEBOX_CONCURRENCY: '1',
      __OW_API_HOST: '',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const agent = new http.Agent({ keepAlive: true });
  const proxy = {
    dir,
    socketPath,
    child,
    exited,
    stdout: new Output(child.stdout),
    stderr: new Output(child.stderr),
    request: (method, urlPath, body) => request(agent, socketPath, method, urlPath, body),
    init: (value) => proxy.request('POST', '/init', { value }),
    run: (value, extra = {}) => proxy.request('POST', '/run', { value, ...extra }),
    alive: () => child.exitCode === null && child.signalCode === null,
  };
  t.after(async () => {
    agent.destroy();
    if (proxy.alive()) child.kill('SIGKILL');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await waitForSocket(socketPath, proxy);
  return proxy;
}

// Ready means the socket accepts a connection, exactly as iceboxd decides.
async function waitForSocket(socketPath, proxy) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    if (!proxy.alive()) throw new Error(`proxy exited during start-up: ${proxy.stderr.text}`);
    const connected = await new Promise((resolve) => {
      const socket = net.connect(socketPath, () => { socket.destroy(); resolve(true); });
      socket.on('error', () => resolve(false));
    });
    if (connected) return;
    if (Date.now() > deadline) throw new Error('proxy did not start listening');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// Resolves to {status, body, text, reusedSocket}; `body` is parsed JSON when the reply is JSON.
// A string `body` is sent as it is (to send malformed JSON).
function request(agent, socketPath, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request({
      agent,
      socketPath,
      method,
      path: urlPath,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => {
        let parsed;
        try {
          parsed = JSON.parse(text);
        } catch (ignored) {
          parsed = undefined;
        }
        resolve({ status: res.statusCode, body: parsed, text, reusedSocket: req.reusedSocket });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

// Single-file action source made of the given functions' text (declared at top level).
function sourceOf(...fns) {
  return fns.map((fn) => fn.toString()).join('\n');
}

module.exports = { startProxy, sourceOf, SENTINEL };
