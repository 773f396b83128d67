// ESLint flat config for the first-party JavaScript: the Node.js action proxy, the Node.js
// benchmark functions, the examples and the openwhisk-client integration check. The `eslint`
// suite of scripts/test.sh runs it; ESLint itself is pinned in scripts/eslint/package.json and
// installed there by scripts/setup.sh (not at the root: a root node_modules would let the proxy's
// tests resolve packages that a sandbox, which only sees runtimes/, does not have).
import { createRequire } from 'node:module';

const require = createRequire(new URL('./scripts/eslint/package.json', import.meta.url));
const js = require('@eslint/js');
const globals = require('globals');

export default [
  {
    // Installed or generated code: packages, node-gyp output, the Rust build, the venv.
    ignores: [
      '**/node_modules/**',
      'runtimes/nodejs/packages/**',
      'runtimes/nodejs/addon/build/**',
      'target/**',
      '.venv/**',
      '.tools/**',
      'var/**',
      'runs/**',
    ],
  },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      // Debian 12's node is 18: nothing newer than what it parses.
      ecmaVersion: 2022,
      sourceType: 'commonjs',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `_`-prefixed names are deliberately unused (a callback's position-fixed argument).
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // The code was written against these (its eslint-disable comments name them): code from
      // strings and thrown non-Errors each get a reason where used.
      'no-eval': 'error',
      'no-implied-eval': 'error',
      'no-new-func': 'error',
      'no-new': 'error',
      'new-cap': 'error',
      'no-throw-literal': 'error',
      'no-unused-expressions': 'error',
    },
  },
  {
    // Action sources the tests send to a proxy: they run where the proxy has installed
    // globalThis.icebox (lib/shared-api.js).
    files: ['runtimes/nodejs/test/**/*.js', 'runtimes/nodejs/testlib/**/*.js'],
    languageOptions: { globals: { icebox: 'readonly' } },
  },
  {
    // An example is an action's whole source: the proxy calls its `main` by name, as OpenWhisk does.
    files: ['examples/nodejs/**/*.js'],
    rules: { 'no-unused-vars': ['error', { varsIgnorePattern: '^main$' }] },
  },
  {
    files: ['eslint.config.mjs'],
    languageOptions: { sourceType: 'module', globals: { ...globals.node } },
  },
];
