'use strict';
// Reads a zip archive held in memory (PKWARE APPNOTE 6.3): the central directory lists the
// entries, and each entry's data is stored or deflated. ZIP64 records are understood; encrypted
// and multi-disk archives are refused. Every entry name is validated before anything is
// extracted, so a bad archive is rejected as a whole.

const zlib = require('zlib');
const { constants: { MAX_LENGTH } } = require('buffer');
const { crc32 } = require('./crc32');
const { InitError } = require('./errors');

const SIG_LOCAL = 0x04034b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_EOCD = 0x06064b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const EOCD_SIZE = 22;
const ZIP64_EXTRA = 0x0001;
const METHOD_STORED = 0;
const METHOD_DEFLATED = 8;
const FLAG_ENCRYPTED = 0x1;
const HOST_UNIX = 3;
const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const DOS_DIRECTORY = 0x10;

class ZipError extends InitError {
  constructor(message) {
    super(`Invalid zip archive: ${message}`);
  }
}

function need(buf, offset, length, what) {
  if (offset < 0 || length < 0 || offset + length > buf.length) throw new ZipError(`${what} lies outside the archive`);
}

function safeNumber(big, what) {
  if (big > BigInt(Number.MAX_SAFE_INTEGER)) throw new ZipError(`${what} is too large`);
  return Number(big);
}

// Returns the entries as {name, parts, type: 'file'|'dir'|'symlink', executable, size, read()}.
// `parts` are the path components to extract to; read() inflates and checks the data.
function readZip(buf) {
  const dir = centralDirectory(buf);
  const entries = [];
  let p = dir.offset;
  for (let i = 0; i < dir.count; i++) {
    need(buf, p, 46, 'a central directory record');
    if (buf.readUInt32LE(p) !== SIG_CENTRAL) throw new ZipError('corrupt central directory');
    const nameLength = buf.readUInt16LE(p + 28);
    const extraLength = buf.readUInt16LE(p + 30);
    const commentLength = buf.readUInt16LE(p + 32);
    need(buf, p + 46, nameLength + extraLength + commentLength, 'a central directory record');
    const entry = centralEntry(buf, p, nameLength, extraLength);
    if (entry) entries.push(entry);
    p += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

function centralDirectory(buf) {
  const eocd = findEocd(buf);
  if (buf.readUInt16LE(eocd + 4) !== 0 || buf.readUInt16LE(eocd + 6) !== 0) {
    throw new ZipError('multi-disk archives are not supported');
  }
  const count = buf.readUInt16LE(eocd + 10);
  const offset = buf.readUInt32LE(eocd + 16);
  if (count !== 0xffff && offset !== 0xffffffff) return { count, offset };
  // A ZIP64 archive: the real numbers are in the ZIP64 end record the locator points to.
  const locator = eocd - 20;
  if (locator < 0 || buf.readUInt32LE(locator) !== SIG_ZIP64_LOCATOR) {
    // Exactly 65535 entries is also written as 0xffff without ZIP64.
    if (offset !== 0xffffffff) return { count, offset };
    throw new ZipError('missing ZIP64 locator');
  }
  const end = safeNumber(buf.readBigUInt64LE(locator + 8), 'the ZIP64 end record offset');
  need(buf, end, 56, 'the ZIP64 end record');
  if (buf.readUInt32LE(end) !== SIG_ZIP64_EOCD) throw new ZipError('corrupt ZIP64 end record');
  return {
    count: safeNumber(buf.readBigUInt64LE(end + 32), 'the entry count'),
    offset: safeNumber(buf.readBigUInt64LE(end + 48), 'the central directory offset'),
  };
}

// The end record sits at the very end, followed only by an archive comment of up to 64 KiB.
function findEocd(buf) {
  const last = buf.length - EOCD_SIZE;
  for (let p = last; p >= 0 && p >= last - 0xffff; p--) {
    if (buf.readUInt32LE(p) === SIG_EOCD && p + EOCD_SIZE + buf.readUInt16LE(p + 20) <= buf.length) return p;
  }
  throw new ZipError('no end of central directory record (is "code" a base64-encoded zip file?)');
}

function centralEntry(buf, p, nameLength, extraLength) {
  // UTF-8 whether or not flag bit 11 says so: Info-ZIP on Linux writes UTF-8 names without it.
  const rawName = buf.toString('utf8', p + 46, p + 46 + nameLength);
  const flags = buf.readUInt16LE(p + 8);
  const method = buf.readUInt16LE(p + 10);
  const host = buf.readUInt8(p + 5);
  const attributes = buf.readUInt32LE(p + 38);
  const sizes = zip64Sizes(buf, p, p + 46 + nameLength, extraLength);

  const parts = pathParts(rawName);
  if (parts.length === 0) return null; // the archive's own root, "./"
  if (flags & FLAG_ENCRYPTED) throw new ZipError(`entry "${rawName}" is encrypted`);
  if (method !== METHOD_STORED && method !== METHOD_DEFLATED) {
    throw new ZipError(`entry "${rawName}" uses compression method ${method}; only stored and deflated are supported`);
  }
  if (sizes.size > MAX_LENGTH) throw new ZipError(`entry "${rawName}" is too large`);

  const mode = host === HOST_UNIX ? attributes >>> 16 : 0;
  let type = 'file';
  if (rawName.endsWith('/') || (mode & S_IFMT) === S_IFDIR || (attributes & DOS_DIRECTORY)) type = 'dir';
  else if ((mode & S_IFMT) === S_IFLNK) type = 'symlink';

  const entry = {
    name: rawName,
    parts,
    type,
    executable: (mode & 0o111) !== 0,
    size: sizes.size,
    read: () => readData(buf, entry, method, buf.readUInt32LE(p + 16), sizes),
  };
  return entry;
}

// Sizes and offset are 32-bit in the record; 0xffffffff means "see the ZIP64 extra field",
// which holds only the fields that overflowed, in this order.
function zip64Sizes(buf, p, extraStart, extraLength) {
  const sizes = {
    size: buf.readUInt32LE(p + 24),
    compressedSize: buf.readUInt32LE(p + 20),
    localOffset: buf.readUInt32LE(p + 42),
  };
  const wanted = ['size', 'compressedSize', 'localOffset'].filter((k) => sizes[k] === 0xffffffff);
  if (wanted.length === 0) return sizes;
  for (let q = extraStart; q + 4 <= extraStart + extraLength;) {
    const id = buf.readUInt16LE(q);
    const length = buf.readUInt16LE(q + 2);
    if (id === ZIP64_EXTRA) {
      if (length < wanted.length * 8 || q + 4 + length > extraStart + extraLength) break;
      wanted.forEach((k, i) => { sizes[k] = safeNumber(buf.readBigUInt64LE(q + 4 + i * 8), 'an entry size'); });
      return sizes;
    }
    q += 4 + length;
  }
  throw new ZipError('missing or short ZIP64 extra field');
}

// Paths inside the archive use "/" (some Windows tools write "\"); an absolute path or a ".."
// component could write outside the extraction directory, so the archive is refused.
function pathParts(rawName) {
  const name = rawName.replace(/\\/g, '/');
  if (name.includes('\0')) throw new ZipError(`entry "${rawName}" has a NUL byte in its name`);
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) {
    throw new ZipError(`entry "${rawName}" has an absolute path; entries must be relative to the archive root`);
  }
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) {
    throw new ZipError(`entry "${rawName}" has a ".." path component, which would escape the action directory`);
  }
  return parts;
}

function readData(buf, entry, method, expectedCrc, sizes) {
  const p = sizes.localOffset;
  need(buf, p, 30, `the local header of "${entry.name}"`);
  if (buf.readUInt32LE(p) !== SIG_LOCAL) throw new ZipError(`corrupt local header for "${entry.name}"`);
  const start = p + 30 + buf.readUInt16LE(p + 26) + buf.readUInt16LE(p + 28);
  need(buf, start, sizes.compressedSize, `the data of "${entry.name}"`);
  const raw = buf.subarray(start, start + sizes.compressedSize);
  let data = raw;
  if (method === METHOD_DEFLATED) {
    try {
      // The cap keeps a lying size field from inflating without bound.
      data = zlib.inflateRawSync(raw, { maxOutputLength: Math.max(1, sizes.size) });
    } catch (err) {
      throw new ZipError(`entry "${entry.name}" cannot be inflated: ${err.message}`);
    }
  }
  if (data.length !== sizes.size) throw new ZipError(`entry "${entry.name}" does not have its recorded size`);
  if (crc32(data) !== expectedCrc) throw new ZipError(`entry "${entry.name}" fails its CRC-32 check`);
  return data;
}

module.exports = { readZip, ZipError };
