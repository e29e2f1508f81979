import t from 'tap';
import { serviceWorkers, waitFor } from '../helpers/processes.ts';
import { callOnOwnConnection, pidsLogging, startTwoWorkers } from '../helpers/workers.ts';

// WORKERS=2 without Redis: each worker keeps the decisions of the requests it proxied, and a lookup
// that reaches the other worker is answered through the primary (it was a 404 half the time).

const ADMIN_PASSWORD = 'workers-decisions-admin';

const call = callOnOwnConnection;

/** Pids of the processes that logged a proxied request answered 502 since `from`. */
const gatewayPids = (output: string, from: number) => pidsLogging(output, (line) => line.includes('"msg":"gateway"') && line.includes('"status":502'), from);

t.test('WORKERS=2 without Redis: a gateway decision is found whichever worker is asked', async (t) => {
  const service = await startTwoWorkers(t, 'workers-decisions', { ADMIN_PASSWORD });
  await waitFor(async () => service.output().includes('Log in as admin'), 'every worker to listen', 60_000);
  t.equal(serviceWorkers(service.child.pid!).length, 2, 'two workers');
  const adminAuth = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } }, scope: { system: { all: true } } } };
  const admin = (await call(`${service.url}/v3/auth/tokens`, { method: 'POST', body: adminAuth })).headers['x-subject-token'];
  if (typeof admin !== 'string' || admin === '') throw new Error('no admin token');

  // A service whose internal endpoint refuses connections: the admin's requests are decided by
  // policy (allowed), then fail upstream (502); each is recorded by the worker that took it.
  const service_ = (await call(`${service.url}/v3/services`, { method: 'POST', token: admin, body: { service: { type: 'compute', name: 'nova' } } })).body.service;
  const endpoint = await call(`${service.url}/v3/endpoints`, { method: 'POST', token: admin, body: { endpoint: { service_id: service_.id, interface: 'internal', url: 'http://127.0.0.1:9', region_id: 'RegionOne' } } });
  t.equal(endpoint.status, 201, 'internal endpoint registered');
  const from = service.output().length;
  const ids: string[] = [];
  await waitFor(async () => {
    for (let index = 0; index < 4; index++) {
      const answer = await call(`${service.url}/compute/v2.1/servers`, { token: admin });
      if (answer.status === 404) continue; // the other worker has not heard of the new endpoint yet
      t.equal(answer.status, 502, 'decided, then refused upstream');
      ids.push(String(answer.headers['x-openstack-request-id']));
    }
    return (gatewayPids(service.output(), from).size === 2 && ids.length >= 8) || ids.length >= 40;
  }, 'gateway requests on both workers', 30_000);
  await waitFor(async () => gatewayPids(service.output(), from).size === 2, 'both workers\' gateway log lines', 5_000);
  t.pass('both workers proxied some');

  // Each looked up several times, on fresh connections: both workers answer for every one.
  let lookups = 0;
  for (const id of ids) {
    for (let attempt = 0; attempt < 3; attempt++, lookups++) {
      const found = await call(`${service.url}/v3/gateway/decisions/${id}`, { token: admin });
      t.equal(found.status, 200, `${id}, lookup ${attempt + 1}`);
      t.match(found.body?.decision, { request_id: id, service: 'compute', status: 502, effect: 'allow' });
    }
  }
  t.equal((await call(`${service.url}/v3/gateway/decisions/req-00000000-0000-4000-8000-000000000000`, { token: admin })).status, 404, 'an unknown id: 404');

  // A replay sees both workers' decisions.
  const replay = await call(`${service.url}/v3/gateway/policy/replay`, { method: 'POST', token: admin, body: { replay: { files: {}, limit: 10_000 } } });
  t.equal(replay.status, 200);
  t.equal(replay.body.replay.decisions, ids.length, `every decision replayed, whichever worker holds it (${ids.length})`);
});
