'use strict';
// CRC-32 (IEEE 802.3, the one zip uses): zlib's native one where Node has it (20.15 and
// later), a table-driven fallback otherwise.

const zlib = require('zlib');

let table = null;

function crc32Js(buf) {
  if (!table) {
    table = new Int32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c;
    }
  }
  let crc = -1;
  for (let i = 0; i < buf.length; i++) crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

const crc32 = typeof zlib.crc32 === 'function' ? (buf) => zlib.crc32(buf) : crc32Js;

module.exports = { crc32, crc32Js };
