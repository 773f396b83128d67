// Drives an iceboxd with the real `openwhisk` npm client, the way an OpenWhisk user's script
// would, and prints what it saw as one line of JSON for tests/integration/tests/openwhisk_client.rs.
//
//   OW_APIHOST=http://127.0.0.1:8740 OW_API_KEY=uuid:key node check.js
//
// Exits 1 (printing the error) when any call fails unexpectedly.
'use strict';

const openwhisk = require('openwhisk');

const ACTION = 'ow-hello';
const CODE = `function main(params) {
  console.log('hello from the openwhisk client test');
  return { greeting: 'Hello, ' + (params.name || 'World') + '!' };
}`;

async function main() {
  const ow = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_API_KEY, namespace: '_' });
  const seen = {};

  const created = await ow.actions.create({ name: ACTION, action: CODE, kind: 'nodejs:default', limits: { memory: 128 } });
  seen.created = { name: created.name, kind: created.exec.kind, version: created.version };

  seen.listedActions = (await ow.actions.list()).map((a) => a.name);
  seen.fetchedAction = (await ow.actions.get({ name: ACTION })).name;

  seen.result = await ow.actions.invoke({ name: ACTION, blocking: true, result: true, params: { name: 'OpenWhisk' } });

  const activation = await ow.actions.invoke({ name: ACTION, blocking: true, params: { name: 'again' } });
  seen.activationId = activation.activationId;
  seen.activationStatus = activation.response.status;

  seen.listedActivations = (await ow.activations.list({ name: ACTION, limit: 10 })).map((a) => a.activationId);
  const fetched = await ow.activations.get({ name: activation.activationId });
  seen.fetched = { activationId: fetched.activationId, name: fetched.name, result: fetched.response.result };
  seen.fetchedResult = await ow.activations.result({ name: activation.activationId });
  seen.fetchedLogs = await ow.activations.logs({ name: activation.activationId });

  const queued = await ow.actions.invoke({ name: ACTION, params: { name: 'later' } });
  seen.nonBlockingId = queued.activationId;

  try {
    await ow.actions.get({ name: 'no-such-action' });
    seen.missingStatus = 200;
  } catch (err) {
    seen.missingStatus = err.statusCode;
  }

  seen.deleted = (await ow.actions.delete({ name: ACTION })).name;
  console.log(JSON.stringify(seen));
}

main().catch((err) => {
  console.error(`openwhisk client check failed: ${err.stack || err}`);
  if (err.error) console.error(JSON.stringify(err.error));
  process.exit(1);
});
