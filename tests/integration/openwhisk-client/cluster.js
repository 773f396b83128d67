// A cluster of iceboxd nodes through the real `openwhisk` npm client: the action is created on
// one node and invoked through the front door (haproxy), as an OpenWhisk user's script would.
// Prints what it saw as one line of JSON for tests/integration/tests/cluster.rs.
//
//   CREATE_HOST=http://node1 INVOKE_HOST=http://haproxy OW_AUTH=uuid:key N=50 node cluster.js
'use strict';

const openwhisk = require('openwhisk');

const code = `function main(params) {
  return { hello: params.name || 'world' };
}`;

async function main() {
  const auth = process.env.OW_AUTH;
  const creator = openwhisk({ apihost: process.env.CREATE_HOST, api_key: auth, namespace: '_' });
  const front = openwhisk({ apihost: process.env.INVOKE_HOST, api_key: auth, namespace: '_' });
  const n = Number(process.env.N || '50');
  await creator.actions.create({ name: 'hello', action: code, kind: 'nodejs:default' });
  const activations = [];
  for (let i = 0; i < n; i++) {
    const a = await front.actions.invoke({ name: 'hello', blocking: true, params: { name: `c${i}` } });
    const init = (a.annotations || []).some((kv) => kv.key === 'initTime');
    activations.push({ id: a.activationId, cold: init, result: a.response.result });
  }
  process.stdout.write(JSON.stringify({ activations }) + '\n');
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err), status: err.statusCode || null }) + '\n');
  process.exit(1);
});
