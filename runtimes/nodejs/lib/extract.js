'use strict';
// Writes validated zip entries under a fresh, empty directory without ever writing outside it.
// Entry names were already checked for absolute paths and "..". What is left is symbolic links
// (node_modules zipped with `zip -y` has them): regular files and directories are written
// first, links last, no link is created beneath another link, and a link is kept only if it
// resolves to something inside the directory.

const fs = require('fs');
const path = require('path');
const { ZipError } = require('./zip');

function extractAll(entries, root) {
  checkSpace(entries, root);
  const dirs = new Set([root]); // the real directories created here
  const links = [];
  for (const entry of entries) {
    if (entry.type === 'dir') {
      makeDirs(dirs, root, entry.parts, entry);
    } else if (entry.type === 'symlink') {
      links.push(entry);
    } else {
      makeDirs(dirs, root, entry.parts.slice(0, -1), entry);
      writeFile(path.join(root, ...entry.parts), entry);
    }
  }
  for (const entry of links) createLink(dirs, root, entry);
  const realRoot = fs.realpathSync.native(root);
  for (const entry of links) checkLinkTarget(realRoot, path.join(root, ...entry.parts), entry);
}

// Fails early with a clear message rather than with ENOSPC half-way through /tmp.
function checkSpace(entries, root) {
  if (typeof fs.statfsSync !== 'function') return;
  const needed = entries.reduce((sum, entry) => sum + (entry.type === 'file' ? entry.size : 0), 0);
  const { bavail, bsize } = fs.statfsSync(root);
  const free = bavail * bsize;
  if (needed > free) {
    throw new ZipError(`it expands to ${needed} bytes but only ${free} bytes are free in ${path.dirname(root)}`);
  }
}

// mkdir one component at a time: an existing component that is not one of our directories is a
// file or a link from this archive, and creating anything beneath it could follow a link.
function makeDirs(dirs, root, parts, entry) {
  let dir = root;
  for (const part of parts) {
    dir = path.join(dir, part);
    if (dirs.has(dir)) continue;
    try {
      fs.mkdirSync(dir);
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      throw new ZipError(`entry "${entry.name}" lies beneath "${path.relative(root, dir)}", which is not a directory`);
    }
    dirs.add(dir);
  }
}

function writeFile(file, entry) {
  try {
    // 'wx' never follows or replaces what is already there.
    fs.writeFileSync(file, entry.read(), { flag: 'wx', mode: entry.executable ? 0o755 : 0o644 });
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
    throw new ZipError(`entry "${entry.name}" appears more than once`);
  }
}

function createLink(dirs, root, entry) {
  const link = path.join(root, ...entry.parts);
  const target = entry.read().toString('utf8');
  if (target === '' || path.isAbsolute(target) || !inside(root, path.resolve(path.dirname(link), target))) {
    throw new ZipError(`symbolic link "${entry.name}" points outside the action directory ("${target}")`);
  }
  makeDirs(dirs, root, entry.parts.slice(0, -1), entry);
  try {
    fs.symlinkSync(target, link);
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
    throw new ZipError(`entry "${entry.name}" appears more than once`);
  }
}

// The textual check above cannot see through links to other links ("a/../.." where a is itself
// a link), so each link is also resolved once all of them exist: by the kernel's realpath(3),
// since Node's JavaScript realpathSync also normalises ".." textually in link targets.
function checkLinkTarget(realRoot, link, entry) {
  let real;
  try {
    real = fs.realpathSync.native(link);
  } catch (err) {
    throw new ZipError(`symbolic link "${entry.name}" does not resolve to a file in the archive (${err.code})`);
  }
  if (!inside(realRoot, real)) {
    throw new ZipError(`symbolic link "${entry.name}" resolves outside the action directory`);
  }
}

function inside(root, file) {
  return file === root || file.startsWith(root + path.sep);
}

module.exports = { extractAll };
