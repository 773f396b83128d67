// Deploys a zip or jar action with the real `openwhisk` npm client, as an OpenWhisk user's
// script would (a Buffer, no `binary` flag: the server tells an archive by its base64), then
// invokes it cold and warm, updates it, invokes the update and deletes it. Prints what it saw
// as one line of JSON for tests/integration/tests/code_size.rs.
//
//   OW_APIHOST=… OW_API_KEY=… ACTION=name KIND=python:3 FILE=a.zip [UPDATE=b.zip] [MAIN=Class]
//     [MEMORY=MB] node large_code.js
//   REFUSE=1 …  only creates, and reports the refusal's status and error.
//
// Exits 1 (printing the error) when a call fails unexpectedly.
'use strict';

const fs = require('fs');
const openwhisk = require('openwhisk');

const env = process.env;

function actionOf(file) {
  const options = { name: env.ACTION, action: fs.readFileSync(file), kind: env.KIND, overwrite: true };
  if (env.MAIN) options.exec = { main: env.MAIN };
  if (env.MEMORY) options.limits = { memory: Number(env.MEMORY) };
  return options;
}

async function invoke(ow) {
  const activation = await ow.actions.invoke({ name: env.ACTION, blocking: true, params: {} });
  return { status: activation.response.status, result: activation.response.result, annotations: activation.annotations };
}

async function main() {
  const ow = openwhisk({ apihost: env.OW_APIHOST, api_key: env.OW_API_KEY, namespace: '_' });
  const seen = {};
  if (env.REFUSE) {
    try {
      await ow.actions.create(actionOf(env.FILE));
      seen.status = 200;
    } catch (err) {
      seen.status = err.statusCode;
      seen.error = err.error;
    }
    console.log(JSON.stringify(seen));
    return;
  }
  const created = await ow.actions.create(actionOf(env.FILE));
  seen.created = { version: created.version, binary: created.exec.binary, kind: created.exec.kind };
  seen.cold = await invoke(ow);
  seen.warm = await invoke(ow);
  const fetched = await ow.actions.get({ name: env.ACTION });
  seen.fetchedCodeLength = (fetched.exec.code || '').length;
  const updated = await ow.actions.update(actionOf(env.UPDATE || env.FILE));
  seen.updated = { version: updated.version };
  seen.afterUpdate = await invoke(ow);
  seen.deleted = (await ow.actions.delete({ name: env.ACTION })).name;
  console.log(JSON.stringify(seen));
}

main().catch((err) => {
  console.error(`large code check failed: ${err.stack || err}`);
  if (err.error) console.error(JSON.stringify(err.error));
  process.exit(1);
});
