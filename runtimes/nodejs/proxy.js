'use strict';
// icebox action proxy for Node.js: serves the OpenWhisk action protocol plus the /icebox/
// extensions (docs/runtime-protocol.md) over HTTP/1.1 on the UNIX socket named by
// ICEBOX_PROXY_SOCKET.
//
// iceboxd keeps hundreds of idle instances and counts cold-start time from exec to the first
// successful connect, so only `fs`, `http` and a few lines of our own are loaded before the
// socket listens; the action loader, zip reader and statistics are required on first use.

const fs = require('fs');
const http = require('http');
const { HttpError, readJson, send, sendJson } = require('./lib/http');
const { readConfig, idleSharingStats } = require('./lib/mode');

const socketPath = process.env.ICEBOX_PROXY_SOCKET;
if (!socketPath) fatal('ICEBOX_PROXY_SOCKET is not set');
let config;
try {
  config = readConfig();
} catch (err) {
  fatal(err.message);
}

// The module that runs activations in the configured sharing mode (README.md, "Sharing modes").
const MODE_MODULES = { process: './lib/action', shared: './lib/shared-mode', isolate: './lib/isolate-mode' };
let actionModule = null;
function action() {
  if (!actionModule) {
    actionModule = require(MODE_MODULES[config.mode]);
    if (actionModule.configure) actionModule.configure(config);
  }
  return actionModule;
}
const sharingStats = () => (actionModule ? actionModule.sharingStats() : idleSharingStats(config));

const ROUTES = new Map([
  ['/init', { method: 'POST', handle: async (req, res) => reply(res, await action().init(await readJson(req))) }],
  ['/run', { method: 'POST', handle: async (req, res) => reply(res, await action().run(await readJson(req))) }],
  ['/icebox/stats', {
    method: 'GET',
    handle: async (req, res, query) => sendJson(res, 200, await require('./lib/stats').collect(wantsGc(query), sharingStats)),
  }],
  ['/icebox/reclaim', {
    method: 'POST',
    handle: async (req, res) => {
      const body = await readJson(req, { optional: true });
      const beforeReclaim = actionModule && actionModule.beforeReclaim;
      sendJson(res, 200, await require('./lib/reclaim').reclaim(body, beforeReclaim));
    },
  }],
  ['/icebox/restored', {
    method: 'POST',
    handle: async (req, res) => reply(res, await require('./lib/restored').restored(await readJson(req), actionModule)),
  }],
]);

function reply(res, { status, body }) {
  send(res, status, body);
}

function wantsGc(query) {
  if (!query) return false;
  const value = new URLSearchParams(query).get('gc');
  return value === '1' || value === 'true';
}

async function dispatch(req, res) {
  const q = req.url.indexOf('?');
  const pathname = q === -1 ? req.url : req.url.slice(0, q);
  const route = ROUTES.get(pathname);
  try {
    if (!route) throw new HttpError(404, `No such path: ${pathname}`);
    if (req.method !== route.method) {
      res.setHeader('Allow', route.method);
      throw new HttpError(405, `Method ${req.method} is not allowed on ${pathname}; use ${route.method}.`);
    }
    await route.handle(req, res, q === -1 ? '' : req.url.slice(q + 1));
  } catch (err) {
    if (res.headersSent) {
      res.destroy(err);
    } else if (err instanceof HttpError) {
      sendJson(res, err.status, { error: err.message });
    } else {
      sendJson(res, 500, { error: `Internal error in the proxy: ${err && err.message}` });
    }
  }
}

function fatal(message) {
  process.stderr.write(`icebox nodejs proxy: ${message}\n`);
  process.exit(1);
}

const server = http.createServer({
  // The only client is iceboxd on a private socket, and activations may legitimately take
  // minutes: Node's request/header deadlines would only cut them short. With both off, the
  // periodic connection check has nothing to do, so it is pushed to the largest interval
  // setInterval accepts instead of waking every idle instance every 30 s.
  requestTimeout: 0,
  headersTimeout: 0,
  connectionsCheckingInterval: 2 ** 31 - 1,
}, dispatch);
// iceboxd reuses one connection per in-flight activation for as long as it likes (an instance
// can sit frozen for hours), so idle keep-alive connections are never closed from this side.
server.keepAliveTimeout = 0;
server.on('error', (err) => fatal(`cannot listen on ${socketPath}: ${err.message}`));

try {
  fs.unlinkSync(socketPath);
} catch (err) {
  if (err.code !== 'ENOENT') fatal(`cannot remove stale socket ${socketPath}: ${err.message}`);
}
server.listen(socketPath, () => require('./lib/gc-watch').start());
