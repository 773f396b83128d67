'use strict';
// Turning whatever user code throws or rejects with into text.

// A failure to load the action whose message is already complete and meant for the caller.
class InitError extends Error {}

// "<type>: <message>" for errors (also those from other realms, hence no instanceof);
// strings as they are; anything else as JSON when possible.
function describeError(err) {
  if (err !== null && typeof err === 'object' && typeof err.message === 'string') {
    const name = typeof err.name === 'string' && err.name ? err.name : 'Error';
    return err.message ? `${name}: ${err.message}` : name;
  }
  if (typeof err === 'string') return err;
  try {
    const text = JSON.stringify(err);
    if (text !== undefined) return text;
  } catch (ignored) {
    // circular or BigInt: fall through to String()
  }
  try {
    return String(err);
  } catch (ignored) {
    return Object.prototype.toString.call(err); // e.g. an object without a prototype
  }
}

function stackOf(err) {
  return err !== null && typeof err === 'object' && typeof err.stack === 'string' ? err.stack : describeError(err);
}

module.exports = { InitError, describeError, stackOf };
