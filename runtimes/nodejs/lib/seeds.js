'use strict';
// Where the main thread's Math.random generators get their seeds (README.md,
// "/icebox/restored"). One 32-byte root: random at /init, the daemon's seed after
// /icebox/restored. Every generator's seed is derived from it, the ChaCha20 block (RFC 8439)
// keyed by the root for the generator's kind (the main context, a vm context, an isolate) and
// number: the seeds of siblings differ, the same root and number always give the same seed,
// and a root with little entropy in it (halves alike, mostly zeros) still makes a well-mixed
// state, which xoshiro needs to start well. ChaCha20 rather than node:crypto's hashes: requiring node:crypto takes
// 4 to 13 ms, which would land on every /init or on the restore path iceboxd waits for.

const { install } = require('./random');

// Taken before the proxy replaces Math.random: V8's generator, which is random enough for a
// root that only has to differ between instances that were never restored from one snapshot.
const nativeRandom = Math.random;

const KIND = { main: 0, context: 1, isolate: 2 };
let root = null;
let main = null;

function rotl(x, n) {
  return (x << n) | (x >>> (32 - n));
}

function quarterRound(s, a, b, c, d) {
  s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 16);
  s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 12);
  s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 8);
  s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 7);
}

// The 64-byte ChaCha20 block for a 32-byte key, a block counter and three nonce words.
function chachaBlock(key, counter, nonce) {
  const keyView = new DataView(key.buffer, key.byteOffset, 32);
  const input = new Int32Array(16);
  input.set([0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]);
  for (let i = 0; i < 8; i++) input[4 + i] = keyView.getInt32(i * 4, true);
  input[12] = counter;
  input.set(nonce, 13);
  const s = Int32Array.from(input);
  for (let round = 0; round < 10; round++) {
    quarterRound(s, 0, 4, 8, 12); quarterRound(s, 1, 5, 9, 13);
    quarterRound(s, 2, 6, 10, 14); quarterRound(s, 3, 7, 11, 15);
    quarterRound(s, 0, 5, 10, 15); quarterRound(s, 1, 6, 11, 12);
    quarterRound(s, 2, 7, 8, 13); quarterRound(s, 3, 4, 9, 14);
  }
  const out = Buffer.alloc(64);
  for (let i = 0; i < 16; i++) out.writeInt32LE((s[i] + input[i]) | 0, i * 4);
  return out;
}

function randomRoot() {
  const bytes = Buffer.alloc(32);
  for (let i = 0; i < 8; i++) bytes.writeUInt32BE(Math.floor(nativeRandom() * 2 ** 32), i * 4);
  return bytes;
}

// The seed of generator number `n` of a kind ('main': only 0, 'context', 'isolate').
function seedFor(kind, n) {
  if (root === null) root = randomRoot();
  return chachaBlock(root, n, [KIND[kind], 0, 0]).subarray(0, 32);
}

// Replaces the main context's Math.random before any action code runs (idempotent).
function installMain() {
  if (main === null) main = install(Math, seedFor('main', 0));
}

// /icebox/restored: the daemon's seed becomes the root, and the main context's generator
// starts over from it.
function restore(seed) {
  installMain();
  root = Buffer.from(seed);
  main.reseed(seedFor('main', 0));
}

module.exports = { installMain, restore, seedFor, chachaBlock };
