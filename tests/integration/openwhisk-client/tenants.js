// Two tenants of one iceboxd through the real `openwhisk` npm client, as two OpenWhisk users'
// scripts would: each deploys and invokes in its own namespace, then B tries everything on A's.
// Prints what it saw as one line of JSON for tests/integration/tests/tenants.rs.
//
//   OW_APIHOST=... KEY_A=uuid:key NS_A=alpha KEY_B=uuid:key NS_B=beta node tenants.js
'use strict';

const openwhisk = require('openwhisk');

const code = (who) => `function main(params) {
  console.log('${who} ran');
  return { tenant: '${who}', name: params.name || null };
}`;

async function status(call) {
  try {
    await call();
    return 200;
  } catch (err) {
    return err.statusCode || String(err);
  }
}

async function main() {
  const host = process.env.OW_APIHOST;
  const a = openwhisk({ apihost: host, api_key: process.env.KEY_A, namespace: '_' });
  const b = openwhisk({ apihost: host, api_key: process.env.KEY_B, namespace: '_' });
  const nsA = process.env.NS_A;
  const seen = {};

  await a.actions.create({ name: 'shared-name', action: code('A'), kind: 'nodejs:default' });
  await a.actions.create({ name: 'only-a', action: code('A'), kind: 'nodejs:default' });
  await b.actions.create({ name: 'shared-name', action: code('B'), kind: 'nodejs:default' });

  seen.aResult = await a.actions.invoke({ name: 'shared-name', blocking: true, result: true, params: { name: 'x' } });
  seen.bResult = await b.actions.invoke({ name: 'shared-name', blocking: true, result: true });
  const aActivation = await a.actions.invoke({ name: 'only-a', blocking: true });
  seen.aActivationNamespace = aActivation.namespace;
  seen.aSubject = aActivation.subject;

  seen.aNamespaces = await a.namespaces.list();
  seen.aActions = (await a.actions.list()).map((x) => x.name).sort();
  seen.bActions = (await b.actions.list()).map((x) => x.name).sort();
  seen.bActivations = (await b.activations.list({ limit: 50 })).map((x) => x.name);

  // B against A's namespace, named explicitly: nothing exists for it.
  seen.bOnA = {
    get: await status(() => b.actions.get({ name: 'only-a', namespace: nsA })),
    list: await status(() => b.actions.list({ namespace: nsA })),
    invoke: await status(() => b.actions.invoke({ name: 'only-a', namespace: nsA, blocking: true })),
    update: await status(() => b.actions.update({ name: 'only-a', namespace: nsA, action: code('B'), kind: 'nodejs:default' })),
    delete: await status(() => b.actions.delete({ name: 'only-a', namespace: nsA })),
    activation: await status(() => b.activations.get({ name: aActivation.activationId, namespace: nsA })),
    ownActivation: await status(() => b.activations.get({ name: aActivation.activationId })),
    activations: await status(() => b.activations.list({ namespace: nsA })),
  };
  // A's action is untouched by all of that.
  seen.aStill = await a.actions.invoke({ name: 'only-a', blocking: true, result: true });
  console.log(JSON.stringify(seen));
}

main().catch((err) => {
  console.error(`tenants check failed: ${err.stack || err}`);
  if (err.error) console.error(JSON.stringify(err.error));
  process.exit(1);
});
