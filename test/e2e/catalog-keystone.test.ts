import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Regions and endpoints (issue 20 item 4), over HTTP, against this service and against the real
// Keystone 22 (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same
// requests, the same statuses, the same messages and the same region fields.

/** What one request answered, with this run's names replaced by `~`. */
interface Seen {
  status: number;
  /** The error message (schema failures: only the field, their wording differs), or the entity's region fields. */
  said: unknown;
}

async function scenario(base: string, adminPassword: string): Promise<Record<string, Seen>> {
  const prefix = `regions-endpoints-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const seen: Record<string, Seen> = {};
  const ask = async (step: string, method: string, path: string, body?: unknown) => {
    const answer = await api(method, path, body);
    const error = answer.body?.error as { message: string } | undefined;
    const entity = answer.body?.endpoint ?? answer.body?.region;
    const said = error
      ? error.message.startsWith('Invalid input for field') ? error.message.split(':')[0] : error.message
      : entity && { region_id: entity.region_id, region: entity.region, parent_region_id: entity.parent_region_id, enabled: entity.enabled };
    seen[step] = { status: answer.status, said: JSON.parse(JSON.stringify(said ?? null).replaceAll(prefix, '~')) };
    return answer;
  };
  const r = (name: string) => `${prefix}-${name}`;

  const service = (await api('POST', '/v3/services', { service: { type: r('type'), name: r('svc') } })).body.service;
  const endpoint = (body: Record<string, unknown>) => ({ endpoint: { service_id: service.id, interface: 'public', url: 'http://re.example.test/', ...body } });
  try {
    await ask('post region with id', 'POST', '/v3/regions', { region: { id: r('posted'), description: 'd' } });
    await ask('post region again', 'POST', '/v3/regions', { region: { id: r('posted') } });
    await ask('put region', 'PUT', `/v3/regions/${r('put')}`, { region: { description: 'x' } });
    await ask('put region again', 'PUT', `/v3/regions/${r('put')}`, { region: { description: 'y' } });
    await ask('put conflicting id', 'PUT', `/v3/regions/${r('put2')}`, { region: { id: r('other') } });
    const created = await ask('endpoint in posted region', 'POST', '/v3/endpoints', endpoint({ region_id: r('posted') }));
    await ask('endpoint in put region', 'POST', '/v3/endpoints', endpoint({ region_id: r('put') }));
    await ask('endpoint legacy existing', 'POST', '/v3/endpoints', endpoint({ region: r('put') }));
    await ask('endpoint legacy new', 'POST', '/v3/endpoints', endpoint({ region: r('legacy') }));
    await ask('legacy region created', 'GET', `/v3/regions/${r('legacy')}`);
    await ask('endpoint both same', 'POST', '/v3/endpoints', endpoint({ region_id: r('put'), region: r('put') }));
    await ask('endpoint both different', 'POST', '/v3/endpoints', endpoint({ region_id: r('put'), region: r('ignored') }));
    await ask('ignored legacy region', 'GET', `/v3/regions/${r('ignored')}`);
    await ask('endpoint unknown region_id', 'POST', '/v3/endpoints', endpoint({ region_id: r('unknown') }));
    await ask('endpoint region_id null', 'POST', '/v3/endpoints', endpoint({ region_id: null }));
    await ask('endpoint region null', 'POST', '/v3/endpoints', endpoint({ region: null }));
    const id = created.body.endpoint.id as string;
    await ask('get endpoint', 'GET', `/v3/endpoints/${id}`);
    await ask('patch legacy region', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { region: r('legacy2') } });
    await ask('patched legacy region created', 'GET', `/v3/regions/${r('legacy2')}`);
    await ask('patch region_id', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { region_id: r('put') } });
    await ask('patch unknown region_id', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { region_id: r('unknown') } });
    await ask('patch region_id null', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { region_id: null } });
    await ask('patch both', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { region_id: r('posted'), region: r('put') } });
    await ask('patch id', 'PATCH', `/v3/endpoints/${id}`, { endpoint: { id: 'other' } });
    for (const enabled of [true, false, 'true', 'False', 1, 0, null, 'yes']) {
      await ask(`create enabled ${JSON.stringify(enabled)}`, 'POST', '/v3/endpoints', endpoint({ enabled }));
      await ask(`update enabled ${JSON.stringify(enabled)}`, 'PATCH', `/v3/endpoints/${id}`, { endpoint: { enabled } });
    }

    await ask('parent a', 'POST', '/v3/regions', { region: { id: r('a') } });
    await ask('parent b', 'POST', '/v3/regions', { region: { id: r('b'), parent_region_id: r('a') } });
    await ask('parent c', 'PUT', `/v3/regions/${r('c')}`, { region: { parent_region_id: r('b') } });
    await ask('unknown parent', 'POST', '/v3/regions', { region: { id: r('d'), parent_region_id: r('nope') } });
    await ask('own parent on create', 'PUT', `/v3/regions/${r('e')}`, { region: { parent_region_id: r('e') } });
    await ask('cycle', 'PATCH', `/v3/regions/${r('a')}`, { region: { parent_region_id: r('c') } });
    await ask('own parent', 'PATCH', `/v3/regions/${r('a')}`, { region: { parent_region_id: r('a') } });
    await ask('change region id', 'PATCH', `/v3/regions/${r('a')}`, { region: { id: r('z') } });
    await ask('delete middle', 'DELETE', `/v3/regions/${r('b')}`);
    await ask('child of deleted', 'GET', `/v3/regions/${r('c')}`);
    await ask('top after delete', 'GET', `/v3/regions/${r('a')}`);
  } finally {
    // Endpoints first (they go with their service), then every region this run made.
    await api('DELETE', `/v3/services/${service.id}`);
    const regions = (await api('GET', '/v3/regions')).body.regions as { id: string; parent_region_id: string | null }[];
    const ours = regions.filter((region) => region.id.startsWith(prefix));
    for (const region of ours.filter((region) => !region.parent_region_id)) await api('DELETE', `/v3/regions/${region.id}`);
    for (const region of ours) await api('DELETE', `/v3/regions/${region.id}`);
  }
  return seen;
}

const inRegion = (id: string | null, enabled = true) => ({ status: 201, said: { region_id: id, region: id, enabled } });
const invalid = (field: string) => ({ status: 400, said: `Invalid input for field '${field}'` });
const unknownRegion = {
  status: 400,
  said: 'Expecting to find endpoint region_id in region table. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.',
};
const notFound = (id: string) => ({ status: 404, said: `Could not find region: ${id}.` });

/** What Keystone 22 answered (asked on 2026-11-25), and what this service must answer too. */
const KEYSTONE: Record<string, Seen> = {
  'post region with id': { status: 201, said: { parent_region_id: null } },
  'post region again': { status: 409, said: 'Conflict occurred attempting to store region - Duplicate ID, ~-posted..' },
  'put region': { status: 201, said: { parent_region_id: null } },
  'put region again': { status: 409, said: 'Conflict occurred attempting to store region - Duplicate ID, ~-put..' },
  'put conflicting id': { status: 400, said: 'Conflicting region IDs specified: "~-put2" != "~-other"' },
  'endpoint in posted region': inRegion('~-posted'),
  'endpoint in put region': inRegion('~-put'),
  'endpoint legacy existing': inRegion('~-put'),
  'endpoint legacy new': inRegion('~-legacy'),
  'legacy region created': { status: 200, said: { parent_region_id: null } },
  'endpoint both same': inRegion('~-put'),
  'endpoint both different': inRegion('~-put'),
  'ignored legacy region': notFound('~-ignored'),
  'endpoint unknown region_id': unknownRegion,
  'endpoint region_id null': invalid('region_id'),
  'endpoint region null': invalid('region'),
  'get endpoint': { status: 200, said: { region_id: '~-posted', region: '~-posted', enabled: true } },
  'patch legacy region': { status: 200, said: { region_id: '~-legacy2', region: '~-legacy2', enabled: true } },
  'patched legacy region created': { status: 200, said: { parent_region_id: null } },
  'patch region_id': { status: 200, said: { region_id: '~-put', region: '~-put', enabled: true } },
  'patch unknown region_id': unknownRegion,
  'patch region_id null': invalid('region_id'),
  'patch both': { status: 200, said: { region_id: '~-posted', region: '~-posted', enabled: true } },
  'patch id': { status: 400, said: 'Cannot change ID' },
  'create enabled true': inRegion(null),
  'update enabled true': { status: 200, said: { region_id: '~-posted', region: '~-posted', enabled: true } },
  'create enabled false': inRegion(null, false),
  'update enabled false': { status: 200, said: { region_id: '~-posted', region: '~-posted', enabled: false } },
  ...Object.fromEntries(['"true"', '"False"', '1', '0', 'null', '"yes"'].flatMap((value) => [
    [`create enabled ${value}`, invalid('enabled')],
    [`update enabled ${value}`, invalid('enabled')],
  ])),
  'parent a': { status: 201, said: { parent_region_id: null } },
  'parent b': { status: 201, said: { parent_region_id: '~-a' } },
  'parent c': { status: 201, said: { parent_region_id: '~-b' } },
  'unknown parent': notFound('~-nope'),
  'own parent on create': notFound('~-e'),
  cycle: { status: 400, said: 'The specified parent region ~-a would create a circular region hierarchy.' },
  'own parent': { status: 400, said: 'The specified parent region ~-a would create a circular region hierarchy.' },
  'change region id': { status: 400, said: 'Cannot change ID' },
  'delete middle': { status: 204, said: null },
  'child of deleted': notFound('~-c'),
  'top after delete': { status: 200, said: { parent_region_id: null } },
};

t.test('this service: regions and endpoints', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  t.same(await scenario(base, ADMIN_PASSWORD), KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: regions and endpoints', { skip }, async (t) => {
  t.same(await scenario(PEER_URL, PEER_PASSWORD), KEYSTONE);
});
