'use strict';
// JSON bodies in and out of the HTTP server.

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Resolves to the request body parsed as a JSON object; rejects with a 400 HttpError otherwise.
// With `optional`, an empty body stands for {}.
function readJson(req, { optional = false } = {}) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (optional && text.trim() === '') {
        resolve({});
        return;
      }
      let body;
      try {
        body = JSON.parse(text);
      } catch (err) {
        reject(new HttpError(400, `The request body is not valid JSON: ${err.message}`));
        return;
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        reject(new HttpError(400, 'The request body must be a JSON object.'));
      } else {
        resolve(body);
      }
    });
  });
}

// `text` is JSON already serialised by the caller.
function send(res, status, text) {
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendJson(res, status, value) {
  send(res, status, JSON.stringify(value));
}

module.exports = { HttpError, readJson, send, sendJson };
