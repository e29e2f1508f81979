import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// OS-EP-FILTER (issue 20 item 1), over HTTP, against this service and against the real Keystone 22
// (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same requests, the
// same statuses, the same messages, the same entity keys, and the same filtered catalogs.

interface Seen {
  status: number;
  said: unknown;
}

const EP = '/v3/OS-EP-FILTER';

async function scenario(base: string, adminPassword: string): Promise<Record<string, Seen>> {
  const prefix = `epf-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown, token = login.token) => call(`${base}${path}`, { method, token, ...(body === undefined ? {} : { body }) });
  const names = new Map<string, string>();
  const named = (text: string) => [...names].reduce((result, [id, name]) => result.replaceAll(id, name), text.replaceAll(prefix, '~').replaceAll(base, 'BASE').replaceAll(PUBLIC_URL, 'BASE'));
  const seen: Record<string, Seen> = {};
  const ours = (ids: string[]) => ids.filter((id) => names.has(id)).map((id) => names.get(id)!).sort();
  /** `as`: the name a created endpoint group's id is shown by. */
  const ask = async (step: string, method: string, path: string, body?: unknown, token?: string, as?: string) => {
    const answer = await api(method, path, body, token);
    const b = answer.body;
    if (as && b?.endpoint_group) names.set(b.endpoint_group.id, as);
    let said: unknown = null;
    if (b?.error) said = b.error.message.includes('is a required property') ? 'required property' : named(b.error.message);
    else if (b?.endpoint_group) said = JSON.parse(named(JSON.stringify(b.endpoint_group)));
    else if (b?.project_endpoint_group) said = JSON.parse(named(JSON.stringify(b.project_endpoint_group)));
    else if (b?.endpoint_groups) said = ours(b.endpoint_groups.map((group: { id: string }) => group.id));
    else if (b?.endpoints) said = { ours: ours(b.endpoints.map((e: { id: string }) => e.id)), keys: b.endpoints.length ? Object.keys(b.endpoints[0]).sort().join(',') : '', links: JSON.parse(named(JSON.stringify(b.links))) };
    else if (b?.projects) said = { ours: ours(b.projects.map((p: { id: string }) => p.id)), links: JSON.parse(named(JSON.stringify(b.links))) };
    else if (b?.catalog) {
      // Our services' endpoints, and whether the catalog holds anything else (the peer's own services).
      const mine = (b.catalog as { id: string; endpoints: { id: string }[] }[]).filter((service) => names.has(service.id));
      said = {
        services: mine.map((service) => `${names.get(service.id)}: ${ours(service.endpoints.map((e) => e.id)).join(' ')}`).sort(),
        others: b.catalog.length > mine.length,
      };
    }
    seen[step] = { status: answer.status, said };
    return answer;
  };
  const cleanup: (() => Promise<unknown>)[] = [];
  try {
    const project = (await api('POST', '/v3/projects', { project: { name: `${prefix}-p`, domain_id: 'default' } })).body.project;
    names.set(project.id, 'P');
    cleanup.push(() => api('DELETE', `/v3/projects/${project.id}`));
    const P = project.id as string;
    const admin = (await api('GET', '/v3/users?name=admin')).body.users[0];
    const role = (await api('GET', '/v3/roles?name=admin')).body.roles[0];
    await api('PUT', `/v3/projects/${P}/users/${admin.id}/roles/${role.id}`);
    const service = async (name: string) => {
      const created = (await api('POST', '/v3/services', { service: { type: `${prefix}-${name}`, name } })).body.service;
      names.set(created.id, name);
      cleanup.push(() => api('DELETE', `/v3/services/${created.id}`));
      return created.id as string;
    };
    const A = await service('A');
    const B = await service('B');
    const endpoint = async (name: string, serviceId: string, face: string) => {
      const created = (await api('POST', '/v3/endpoints', { endpoint: { service_id: serviceId, interface: face, url: `http://${name}.test/` } })).body.endpoint;
      names.set(created.id, name);
      return created.id as string;
    };
    const Apub = await endpoint('Apub', A, 'public');
    const Aint = await endpoint('Aint', A, 'internal');
    const Bpub = await endpoint('Bpub', B, 'public');
    const token = (await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { id: P } }) })).token;

    await ask('catalog unfiltered', 'GET', '/v3/auth/catalog', undefined, token);
    // Endpoint groups.
    const group = await ask('create group', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-g`, description: 'd', filters: { service_id: B } } }, undefined, 'G');
    const G = group.body.endpoint_group.id as string;
    cleanup.push(() => api('DELETE', `${EP}/endpoint_groups/${G}`));
    const bare = await ask('create group without description', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-h`, filters: { interface: 'admin', service_id: A } } }, undefined, 'H');
    const H = bare.body.endpoint_group?.id as string;
    cleanup.push(() => api('DELETE', `${EP}/endpoint_groups/${H}`));
    await ask('create without filters', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-x` } });
    await ask('create without name', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { filters: { interface: 'public' } } });
    await ask('create unknown filter', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-x`, filters: { foo: 'x' } } });
    await ask('create empty filters', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-x`, filters: {} } });
    await ask('create extra attribute', 'POST', `${EP}/endpoint_groups`, { endpoint_group: { name: `${prefix}-x`, filters: { interface: 'public' }, extra1: 'e' } });
    await ask('get group', 'GET', `${EP}/endpoint_groups/${G}`);
    await ask('get unknown group', 'GET', `${EP}/endpoint_groups/nope`);
    await ask('patch name', 'PATCH', `${EP}/endpoint_groups/${H}`, { endpoint_group: { name: `${prefix}-h2` } });
    await ask('patch unknown filter', 'PATCH', `${EP}/endpoint_groups/${H}`, { endpoint_group: { filters: { bad: 'x' } } });
    await ask('patch extra attribute', 'PATCH', `${EP}/endpoint_groups/${H}`, { endpoint_group: { extra1: 'x' } });
    await ask('list by name', 'GET', `${EP}/endpoint_groups?name=${prefix}-g`);
    await ask('group endpoints', 'GET', `${EP}/endpoint_groups/${G}/endpoints`);
    await ask('group projects (none)', 'GET', `${EP}/endpoint_groups/${G}/projects`);

    // Project ↔ endpoint.
    await ask('check absent', 'GET', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('add endpoint', 'PUT', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('add endpoint again', 'PUT', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('check present', 'GET', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('add to unknown project', 'PUT', `${EP}/projects/nope/endpoints/${Aint}`);
    await ask('add unknown endpoint', 'PUT', `${EP}/projects/${P}/endpoints/nope`);
    await ask('project endpoints', 'GET', `${EP}/projects/${P}/endpoints`);
    await ask('endpoint projects', 'GET', `${EP}/endpoints/${Aint}/projects`);
    await ask('catalog: one endpoint', 'GET', '/v3/auth/catalog', undefined, token);
    const issued = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { id: P } }) });
    const body = issued.body.token.catalog as { id: string; endpoints: { id: string }[] }[];
    seen['token body: one endpoint'] = { status: issued.status, said: body.map((s) => `${names.get(s.id) ?? '?'}: ${ours(s.endpoints.map((e) => e.id)).join(' ')}`) };

    // Project ↔ group.
    await ask('add group', 'PUT', `${EP}/endpoint_groups/${G}/projects/${P}`);
    await ask('add group again', 'PUT', `${EP}/endpoint_groups/${G}/projects/${P}`);
    await ask('get association', 'GET', `${EP}/endpoint_groups/${G}/projects/${P}`);
    await ask('add unknown group', 'PUT', `${EP}/endpoint_groups/nope/projects/${P}`);
    await ask('add group to unknown project', 'PUT', `${EP}/endpoint_groups/${G}/projects/nope`);
    await ask('get association of group not associated', 'GET', `${EP}/endpoint_groups/${H}/projects/${P}`);
    await ask('project groups', 'GET', `${EP}/projects/${P}/endpoint_groups`);
    await ask('group projects', 'GET', `${EP}/endpoint_groups/${G}/projects`);
    await ask('project endpoints with group', 'GET', `${EP}/projects/${P}/endpoints`);
    await ask('catalog: endpoint and group', 'GET', '/v3/auth/catalog', undefined, token);
    await ask('remove group', 'DELETE', `${EP}/endpoint_groups/${G}/projects/${P}`);
    await ask('remove group again', 'DELETE', `${EP}/endpoint_groups/${G}/projects/${P}`);

    // Only a disabled endpoint associated; then a group matching nothing.
    await api('PATCH', `/v3/endpoints/${Aint}`, { endpoint: { enabled: false } });
    await ask('catalog: only a disabled endpoint', 'GET', '/v3/auth/catalog', undefined, token);
    await ask('remove endpoint', 'DELETE', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('remove endpoint again', 'DELETE', `${EP}/projects/${P}/endpoints/${Aint}`);
    await ask('add group matching nothing', 'PUT', `${EP}/endpoint_groups/${H}/projects/${P}`);
    await ask('catalog: group matching nothing', 'GET', '/v3/auth/catalog', undefined, token);
    await api('PATCH', `/v3/endpoints/${Aint}`, { endpoint: { enabled: true } });

    // Deletions take associations with them.
    await api('PUT', `${EP}/projects/${P}/endpoints/${Apub}`);
    await api('DELETE', `/v3/endpoints/${Apub}`);
    await ask('endpoint deleted: its association gone', 'GET', `${EP}/projects/${P}/endpoints`);
    await ask('delete group', 'DELETE', `${EP}/endpoint_groups/${H}`);
    await ask('project groups after group deleted', 'GET', `${EP}/projects/${P}/endpoint_groups`);
    await api('PUT', `${EP}/projects/${P}/endpoints/${Bpub}`);
    await api('PUT', `${EP}/endpoint_groups/${G}/projects/${P}`);
    await ask('delete project', 'DELETE', `/v3/projects/${P}`);
    await ask('group projects after project deleted', 'GET', `${EP}/endpoint_groups/${G}/projects`);
    await ask('endpoint projects after project deleted', 'GET', `${EP}/endpoints/${Bpub}/projects`);
    await ask('delete group G', 'DELETE', `${EP}/endpoint_groups/${G}`);
    await ask('delete unknown group', 'DELETE', `${EP}/endpoint_groups/${G}`);
  } finally {
    for (const undo of cleanup.reverse()) await undo();
  }
  return seen;
}

/** What Keystone 22 answered (asked on 2026-11-27), and what this service must answer too. */
const KEYSTONE: Record<string, Seen> = {
  "catalog unfiltered": {"status": 200, "said": {"services": ["A: Aint Apub", "B: Bpub"], "others": true}},
  "create group": {"status": 201, "said": {"id": "G", "name": "~-g", "description": "d", "filters": {"service_id": "B"}, "links": {"self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G"}}},
  "create group without description": {"status": 201, "said": {"id": "H", "name": "~-h", "description": null, "filters": {"interface": "admin", "service_id": "A"}, "links": {"self": "BASE/v3/OS-EP-FILTER/endpoint_groups/H"}}},
  "create without filters": {"status": 400, "said": "required property"},
  "create without name": {"status": 400, "said": "required property"},
  "create unknown filter": {"status": 400, "said": "Expecting to find service_id or region_id or interface in endpoint_group. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."},
  "create empty filters": {"status": 400, "said": "filters field is required and cannot be empty"},
  "create extra attribute": {"status": 400, "said": "'extra1' is an invalid keyword argument for EndpointGroup"},
  "get group": {"status": 200, "said": {"id": "G", "name": "~-g", "description": "d", "filters": {"service_id": "B"}, "links": {"self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G"}}},
  "get unknown group": {"status": 404, "said": "Could not find Endpoint Group: nope."},
  "patch name": {"status": 200, "said": {"id": "H", "name": "~-h2", "description": null, "filters": {"interface": "admin", "service_id": "A"}, "links": {"self": "BASE/v3/OS-EP-FILTER/endpoint_groups/H"}}},
  "patch unknown filter": {"status": 400, "said": "Expecting to find service_id or region_id or interface in endpoint_group. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error."},
  "patch extra attribute": {"status": 400, "said": "'extra1' is an invalid keyword argument for EndpointGroup"},
  "list by name": {"status": 200, "said": ["G"]},
  "group endpoints": {"status": 200, "said": {"ours": ["Bpub"], "keys": "enabled,id,interface,links,region,region_id,service_id,url", "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G/endpoints", "previous": null}}},
  "group projects (none)": {"status": 200, "said": {"ours": [], "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G/projects", "previous": null}}},
  "check absent": {"status": 404, "said": "Endpoint Aint not found in project P"},
  "add endpoint": {"status": 204, "said": null},
  "add endpoint again": {"status": 409, "said": "Conflict occurred attempting to store project_endpoint - Duplicate entry."},
  "check present": {"status": 204, "said": null},
  "add to unknown project": {"status": 404, "said": "Could not find project: nope."},
  "add unknown endpoint": {"status": 404, "said": "Could not find endpoint: nope."},
  "project endpoints": {"status": 200, "said": {"ours": ["Aint"], "keys": "enabled,id,interface,links,region,region_id,service_id,url", "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/projects/P/endpoints", "previous": null}}},
  "endpoint projects": {"status": 200, "said": {"ours": ["P"], "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoints/Aint/projects", "previous": null}}},
  "catalog: one endpoint": {"status": 200, "said": {"services": ["A: Aint"], "others": false}},
  "token body: one endpoint": {"status": 201, "said": ["A: Aint"]},
  "add group": {"status": 204, "said": null},
  "add group again": {"status": 409, "said": "Conflict occurred attempting to store project_endpoint_group - Duplicate entry."},
  "get association": {"status": 200, "said": {"endpoint_group_id": "G", "project_id": "P", "links": {"self": "/OS-EP-FILTER/endpoint_groups/G/projects/P"}}},
  "add unknown group": {"status": 404, "said": "Could not find Endpoint Group: nope."},
  "add group to unknown project": {"status": 404, "said": "Could not find project: nope."},
  "get association of group not associated": {"status": 404, "said": "Endpoint Group Project Association not found"},
  "project groups": {"status": 200, "said": ["G"]},
  "group projects": {"status": 200, "said": {"ours": ["P"], "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G/projects", "previous": null}}},
  "project endpoints with group": {"status": 200, "said": {"ours": ["Aint", "Bpub"], "keys": "enabled,id,interface,links,region,region_id,service_id,url", "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/projects/P/endpoints", "previous": null}}},
  "catalog: endpoint and group": {"status": 200, "said": {"services": ["A: Aint", "B: Bpub"], "others": false}},
  "remove group": {"status": 204, "said": null},
  "remove group again": {"status": 404, "said": "Endpoint Group Project Association not found"},
  "catalog: only a disabled endpoint": {"status": 200, "said": {"services": [], "others": false}},
  "remove endpoint": {"status": 204, "said": null},
  "remove endpoint again": {"status": 404, "said": "Endpoint Aint not found in project P"},
  "add group matching nothing": {"status": 204, "said": null},
  "catalog: group matching nothing": {"status": 200, "said": {"services": ["A: Apub", "B: Bpub"], "others": true}},
  "endpoint deleted: its association gone": {"status": 200, "said": {"ours": [], "keys": "", "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/projects/P/endpoints", "previous": null}}},
  "delete group": {"status": 204, "said": null},
  "project groups after group deleted": {"status": 200, "said": []},
  "delete project": {"status": 204, "said": null},
  "group projects after project deleted": {"status": 200, "said": {"ours": [], "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoint_groups/G/projects", "previous": null}}},
  "endpoint projects after project deleted": {"status": 200, "said": {"ours": [], "links": {"next": null, "self": "BASE/v3/OS-EP-FILTER/endpoints/Bpub/projects", "previous": null}}},
  "delete group G": {"status": 204, "said": null},
  "delete unknown group": {"status": 404, "said": "Could not find Endpoint Group: G."},
};

t.test('this service: OS-EP-FILTER', async (t) => {
  const testApp = await startTestApp(t, { GATEWAY_PUBLIC_CATALOG: 'false' });
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const seen = await scenario(base, ADMIN_PASSWORD);
  if (process.env.EPF_PRINT) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: OS-EP-FILTER', { skip }, async (t) => {
  const seen = await scenario(PEER_URL, PEER_PASSWORD);
  if (process.env.EPF_PRINT) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});
