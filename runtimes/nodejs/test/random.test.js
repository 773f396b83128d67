'use strict';
// lib/random.js (the generator that replaces Math.random) and lib/seeds.js (its seeds), in
// this process.

const assert = require('node:assert/strict');
const vm = require('node:vm');
const { test } = require('node:test');
const { createRandom, install, factoryIn } = require('../lib/random');
const { chachaBlock } = require('../lib/seeds');

// The state words 1, 2, 3, 4 (the seed's second half is zeros, so the fold keeps the first).
function seedOfWords(...words) {
  const seed = Buffer.alloc(32);
  words.forEach((word, i) => seed.writeUInt32BE(word, i * 4));
  return seed;
}

// From the reference C code of xoshiro128** (prng.di.unimi.it) started at state {1, 2, 3, 4},
// each double made of two outputs as lib/random.js makes it: ((hi >> 5) * 2^26 + (lo >> 6)) / 2^53.
const REFERENCE = [2.6822090148925781e-06, 0.0013799966610139602, 0.47304711029826541];

test('the generator is xoshiro128** with 53-bit doubles', () => {
  const { random } = createRandom(seedOfWords(1, 2, 3, 4));
  assert.deepEqual([random(), random(), random()], REFERENCE);
});

test('reseeding restarts the sequence of the same function', () => {
  const generator = createRandom(seedOfWords(9, 9, 9, 9));
  const { random } = generator;
  generator.reseed(seedOfWords(1, 2, 3, 4));
  assert.deepEqual([random(), random(), random()], REFERENCE);
});

test('it keeps the contract of Math.random', () => {
  const { random } = createRandom(chachaBlock(Buffer.alloc(32, 7), 0, [0, 0, 0]).subarray(0, 32));
  assert.equal(random.name, 'random');
  assert.equal(random.length, 0);
  assert.throws(() => new random(), TypeError); // eslint-disable-line new-cap -- a constructor call on purpose: Math.random is not one
  let min = 1;
  let max = 0;
  let sum = 0;
  const n = 200000;
  for (let i = 0; i < n; i++) {
    const x = random();
    assert.ok(x >= 0 && x < 1);
    assert.equal(x * 2 ** 53, Math.floor(x * 2 ** 53), 'a multiple of 2^-53');
    min = Math.min(min, x);
    max = Math.max(max, x);
    sum += x;
  }
  assert.ok(min < 1e-4 && max > 1 - 1e-4, `spans [0, 1): ${min} .. ${max}`);
  assert.ok(Math.abs(sum / n - 0.5) < 0.005, `mean ${sum / n}`);
});

test('the all-zero seed does not make the all-zero state', () => {
  const { random } = createRandom(Buffer.alloc(32));
  const draws = Array.from({ length: 100 }, random);
  assert.ok(draws.some((x) => x > 0));
});

test('installed in a vm context, it is that context\'s own function', () => {
  const context = vm.createContext({});
  const math = vm.runInContext('Math', context);
  const generator = install(math, seedOfWords(1, 2, 3, 4), factoryIn(context));
  assert.equal(math.random, generator.random);
  assert.equal(vm.runInContext('Math.random.constructor === Function', context), true);
  // Spread: the array is the context's, with another Array.prototype.
  assert.deepEqual([...vm.runInContext('[Math.random(), Math.random(), Math.random()]', context)], REFERENCE);
});

test('seeds are derived with the ChaCha20 block function (RFC 8439, 2.3.2)', () => {
  const key = Buffer.from([...Array(32).keys()]);
  const block = chachaBlock(key, 1, [0x09000000, 0x4a000000, 0]);
  assert.equal(block.toString('hex'), '10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e'
    + 'd2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e');
});
