'use strict';
// Loads a zipped action (binary: true): the base64 zip is extracted to a fresh directory under
// the temporary directory, and its module is the file package.json's "main" names, or index.js.
// An ES module (.mjs, or .js under "type": "module") is loaded with import(). Returns {entry,
// hook} (lib/entry-point.js).

const fs = require('fs');
const os = require('os');
const path = require('path');
const { pathToFileURL } = require('url');
const { InitError } = require('./errors');
const { resolveEntry, loaded } = require('./entry-point');
const { readZip, ZipError } = require('./zip');
const { extractAll } = require('./extract');

async function load(base64, main) {
  const dir = extract(base64);
  try {
    return await loadDir(dir, main);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

// Writes the archive to a new directory and returns it (isolate mode extracts once, in the
// main thread, and every isolate loads from there).
function extract(base64) {
  const entries = readZip(Buffer.from(base64, 'base64'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'icebox-action-'));
  try {
    extractAll(entries, dir);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return dir;
}

async function loadDir(dir, main) {
  const { file, esm } = moduleFile(dir);
  const where = `the module ${path.relative(dir, file)}`;
  if (!esm) {
    const exportsValue = require(file);
    return loaded(resolveEntry(exportsValue, main, where), exportsValue);
  }
  const namespace = await import(pathToFileURL(file).href);
  // A CommonJS-style object as the default export is common in ES module actions too.
  const holder = namespace[main.split('.')[0]] === undefined && namespace.default ? namespace.default : namespace;
  return loaded(resolveEntry(holder, main, where), holder);
}

// Resolved here rather than by require(dir), which on a missing "main" silently falls back to
// index.js with a deprecation warning on stderr, where nothing may be printed before /run.
function moduleFile(dir) {
  const pkg = readPackageJson(dir);
  if (!pkg && !fs.existsSync(path.join(dir, 'index.js'))) {
    throw new ZipError('zipped actions must contain either package.json or index.js at the root');
  }
  const main = pkg && typeof pkg.main === 'string' && pkg.main.trim() !== '' ? pkg.main.trim() : 'index.js';
  const base = path.resolve(dir, main);
  if (!base.startsWith(dir + path.sep)) throw new InitError(`package.json "main" ("${main}") is outside the archive`);
  let file;
  try {
    file = require.resolve(base);
  } catch (err) {
    throw new InitError(`the action's main module "${main}" is not in the archive`);
  }
  const esm = file.endsWith('.mjs') || (file.endsWith('.js') && pkg !== null && pkg.type === 'module');
  return { file, esm };
}

function readPackageJson(dir) {
  let text;
  try {
    text = fs.readFileSync(path.join(dir, 'package.json'), 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  try {
    const pkg = JSON.parse(text);
    return pkg !== null && typeof pkg === 'object' ? pkg : {};
  } catch (err) {
    throw new InitError(`package.json in the archive is not valid JSON: ${err.message}`);
  }
}

module.exports = { load, extract, loadDir, moduleFile };
