'use strict';
// `require` in isolate mode's v8 engine, the host's half: names are resolved as Node resolves
// them (relative paths, the action's node_modules, NODE_PATH, package.json "main") and the file's
// source is handed to the isolate, which evaluates it in its own module cache
// (lib/v8-bootstrap.js). Node's built-ins that reach the host are refused by name.

const fs = require('fs');
const path = require('path');
const Module = require('module');

// Built-in names the isolate provides itself (lib/v8-bootstrap.js).
const PROVIDED = new Set(['buffer', 'crypto', 'url', 'util']);
// Packages the isolate's own built-ins are made of, installed beside isolated-vm.
const INTERNAL = { buffer: path.join(__dirname, '..', 'isolates', 'node_modules', 'buffer', 'index.js') };

// The action's files do not change while it runs, so each is read once for all isolates.
const files = new Map();

function unavailable(name) {
  return `The module "${name}" is a Node.js built-in that isolate mode's v8 engine does not provide: `
    + 'its isolates reach nothing of the host. It provides buffer, crypto (a subset), url and util (a subset); '
    + `an action that needs "${name}" runs with the annotation icebox.isolate_engine set to worker, or without icebox.sharing isolate.`;
}

// What the isolate gets for require(spec) from the module `from` (a file name): {builtin: name}
// for a provided built-in, {error, code} for a name that cannot be loaded, else the file.
function resolve(spec, from) {
  const name = spec.startsWith('node:') ? spec.slice(5) : spec;
  if (PROVIDED.has(name)) return { builtin: name };
  if (Module.isBuiltin(spec)) return { error: unavailable(name), code: 'ERR_ICEBOX_BUILTIN_UNAVAILABLE' };
  let filename;
  try {
    filename = Module.createRequire(from).resolve(spec);
  } catch (err) {
    return { error: `Cannot find module '${spec}' (required from ${from})`, code: 'MODULE_NOT_FOUND' };
  }
  return load(filename);
}

// {filename, dirname, source, json} of a resolved file, or {error, code}.
function load(filename) {
  let found = files.get(filename);
  if (found) return found;
  const ext = path.extname(filename);
  if (ext === '.node') {
    return { error: `${filename} is a native addon, which isolate mode's v8 engine cannot load; use icebox.isolate_engine worker.`, code: 'ERR_ICEBOX_NATIVE_ADDON' };
  }
  if (ext === '.mjs') {
    return { error: `${filename} is an ES module, which isolate mode's v8 engine cannot load (CommonJS only).`, code: 'ERR_REQUIRE_ESM' };
  }
  let source;
  try {
    source = fs.readFileSync(filename, 'utf8');
  } catch (err) {
    return { error: `Cannot read module ${filename}: ${err.message}`, code: 'MODULE_NOT_FOUND' };
  }
  // Node ignores a shebang line; a comment keeps the line numbers.
  if (source.startsWith('#!')) source = `//${source.slice(2)}`;
  found = { filename, dirname: path.dirname(filename), source, json: ext === '.json' };
  files.set(filename, found);
  return found;
}

function internalModule(name) {
  return INTERNAL[name];
}

module.exports = { resolve, load, internalModule, PROVIDED };
