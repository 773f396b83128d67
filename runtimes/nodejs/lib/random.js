'use strict';
// The generator that replaces Math.random (README.md, "/icebox/restored"). V8 keeps its own
// Math.random state where JavaScript cannot reseed it, so every instance restored from one
// snapshot would draw the same numbers; this one can be reseeded in place, so a reference to
// Math.random taken before the snapshot (lodash keeps one) follows the reseed too.
//
// xoshiro128** (Blackman and Vigna): 128 bits of state in four int32 words, all-round good
// 32-bit outputs with nothing wider than Math.imul. A double takes two outputs, 27 + 26 bits,
// for the 53 bits V8's own doubles have: uniform over [0, 1), multiples of 2^-53.

// 32 seed bytes -> 4 state words: the two halves xored, so every seed byte counts. The seeds
// come well mixed (lib/seeds.js): xoshiro's first outputs from a sparse state are poor.
function stateOf(seed) {
  if (!(seed instanceof Uint8Array) || seed.length !== 32) throw new TypeError('a seed is 32 bytes');
  const view = new DataView(seed.buffer, seed.byteOffset, 32);
  const words = [0, 1, 2, 3].map((i) => view.getInt32(i * 4) ^ view.getInt32(16 + i * 4));
  // The all-zero state is the one state xoshiro never leaves.
  if (words.every((word) => word === 0)) words[0] = 1;
  return words;
}

// Makes one generator: {random, setState(a, b, c, d)}. It refers to nothing outside itself, so
// that its source can be evaluated inside a vm context (factoryIn): called by a context's code,
// this function from the main context took 1.2 times as long as its copy compiled in the
// context. `imul` is kept in a local: a free `Math` in a context goes through Node's
// interceptors (see lib/vm-context.js), about 50 times slower.
function generatorFactory() {
  const { imul } = Math;
  let a = 0;
  let b = 0;
  let c = 0;
  let d = 0;
  // A method, like the built-in: named "random", length 0, not a constructor.
  const { random } = {
    random() {
      let hi = imul(b, 5);
      hi = imul((hi << 7) | (hi >>> 25), 9);
      let t = b << 9;
      c ^= a; d ^= b; b ^= c; a ^= d; c ^= t; d = (d << 11) | (d >>> 21);
      let lo = imul(b, 5);
      lo = imul((lo << 7) | (lo >>> 25), 9);
      t = b << 9;
      c ^= a; d ^= b; b ^= c; a ^= d; c ^= t; d = (d << 11) | (d >>> 21);
      // 27 + 26 bits: 2^26 and 2^53.
      return ((hi >>> 5) * 67108864 + (lo >>> 6)) / 9007199254740992;
    },
  };
  function setState(w0, w1, w2, w3) {
    a = w0; b = w1; c = w2; d = w3;
  }
  return { random, setState };
}

// Returns {random, reseed(seed)}; `random` is what Math.random becomes. `factory` is
// generatorFactory or its copy in another context.
function createRandom(seed, factory = generatorFactory) {
  const { random, setState } = factory();
  const reseed = (newSeed) => setState(...stateOf(newSeed));
  reseed(seed);
  return { random, reseed };
}

let factoryScript = null;

// generatorFactory evaluated in a vm context (compiled once for all contexts).
function factoryIn(context) {
  if (factoryScript === null) {
    const vm = require('vm');
    factoryScript = new vm.Script(`(${generatorFactory})`, { filename: 'icebox-random.js' });
  }
  return factoryScript.runInContext(context);
}

// Replaces `math.random` (a context's Math object) with a new generator; returns it.
function install(math, seed, factory = generatorFactory) {
  const generator = createRandom(seed, factory);
  math.random = generator.random;
  return generator;
}

module.exports = { createRandom, install, factoryIn, stateOf, generatorFactory };
