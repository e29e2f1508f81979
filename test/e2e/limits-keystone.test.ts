import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Unified limits (issue 20 item 8), over HTTP, against this service and against the real Keystone 22
// (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same requests, the
// same statuses, the same messages, the same keys and values.

interface Seen {
  status: number;
  /** The error message (schema failures: only that they are one, their wording differs), the entity or entities, with this run's ids named. */
  said: unknown;
}

/** `linkBase`: the URL links start with (this service's test app has a configured public URL). */
async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const prefix = `lim-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const names = new Map<string, string>();
  const named = (text: string) => [...names].reduce((result, [id, name]) => result.replaceAll(id, name), text.replaceAll(prefix, '~').replaceAll(linkBase, 'BASE'));
  const seen: Record<string, Seen> = {};
  const ask = async (step: string, method: string, path: string, body?: unknown) => {
    const answer = await api(method, path, body);
    const error = answer.body?.error as { message: string } | undefined;
    let said: unknown = null;
    if (error) said = answer.status === 400 && !error.message.startsWith('Expecting to find') ? 'schema' : named(error.message);
    else if (answer.body) {
      const copy = { ...answer.body };
      // A list also shows others' rows on a shared peer: only this run's.
      for (const key of ['registered_limits', 'limits']) {
        if (Array.isArray(copy[key])) copy[key] = (copy[key] as { service_id: string }[]).filter((row) => [...names.keys()].includes(row.service_id));
      }
      said = JSON.parse(named(JSON.stringify(copy)));
    }
    seen[step] = { status: answer.status, said };
    return answer;
  };
  /** Ids become names, in the order they come. */
  const name = (id: string, as: string) => {
    names.set(id, as);
    return id;
  };
  let service = '';
  let region = '';
  let project = '';
  let user = '';
  let domain = '';
  try {
    service = name((await api('POST', '/v3/services', { service: { type: `${prefix}-svc` } })).body.service.id, 'SVC');
    region = (await api('POST', '/v3/regions', { region: { id: `${prefix}-region` } })).body.region.id;
    project = name((await api('POST', '/v3/projects', { project: { name: `${prefix}-proj`, domain_id: 'default' } })).body.project.id, 'PROJ');

    await ask('model', 'GET', '/v3/limits/model');

    // ---- registered limits -----------------------------------------------------------------------
    const created = await ask('create registered', 'POST', '/v3/registered_limits', {
      registered_limits: [
        { service_id: service, resource_name: 'cores', default_limit: 10 },
        { service_id: service, region_id: region, resource_name: 'ram', default_limit: 100, description: 'memory' },
      ],
    });
    const cores = name(created.body.registered_limits[0].id, 'RL-CORES');
    const ram = name(created.body.registered_limits[1].id, 'RL-RAM');
    // Earlier steps are already recorded with the raw ids; re-read them now the ids have names.
    seen['create registered'] = { status: created.status, said: JSON.parse(named(JSON.stringify(created.body))) };
    await ask('duplicate registered', 'POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'cores', default_limit: 1 }] });
    await ask('duplicate within a list', 'POST', '/v3/registered_limits', {
      registered_limits: [
        { service_id: service, resource_name: 'disk', default_limit: 1 },
        { service_id: service, resource_name: 'disk', default_limit: 2 },
      ],
    });
    await ask('unknown service in a list', 'POST', '/v3/registered_limits', {
      registered_limits: [
        { service_id: service, resource_name: 'gpus', default_limit: 1 },
        { service_id: 'no-such-service', resource_name: 'gpus', default_limit: 1 },
      ],
    });
    await ask('unknown region', 'POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, region_id: 'no-such-region', resource_name: 'x', default_limit: 1 }] });
    await ask('empty list', 'POST', '/v3/registered_limits', { registered_limits: [] });
    await ask('below -1', 'POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'x', default_limit: -2 }] });
    await ask('unknown attribute', 'POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'x', default_limit: 1, other: 1 }] });
    await ask('list after refusals', 'GET', `/v3/registered_limits?service_id=${service}`);
    await ask('list by resource', 'GET', `/v3/registered_limits?service_id=${service}&resource_name=ram`);
    await ask('list by region', 'GET', `/v3/registered_limits?region_id=${region}`);
    await ask('get registered', 'GET', `/v3/registered_limits/${cores}`);
    await ask('get missing registered', 'GET', '/v3/registered_limits/no-such-limit');
    await ask('patch registered', 'PATCH', `/v3/registered_limits/${ram}`, { registered_limit: { default_limit: 200, region_id: null, description: null } });
    await ask('patch registered onto another', 'PATCH', `/v3/registered_limits/${ram}`, { registered_limit: { resource_name: 'cores' } });
    await ask('patch registered id', 'PATCH', `/v3/registered_limits/${ram}`, { registered_limit: { id: 'x' } });
    await ask('patch registered unknown service', 'PATCH', `/v3/registered_limits/${ram}`, { registered_limit: { service_id: 'no-such-service' } });
    await ask('patch missing registered', 'PATCH', '/v3/registered_limits/no-such-limit', { registered_limit: { default_limit: 1 } });
    await ask('patch registered back to a region', 'PATCH', `/v3/registered_limits/${ram}`, { registered_limit: { region_id: region } });

    // ---- limits ----------------------------------------------------------------------------------
    const limits = await ask('create limits', 'POST', '/v3/limits', {
      limits: [
        { project_id: project, service_id: service, resource_name: 'cores', resource_limit: 5 },
        { domain_id: 'default', service_id: service, region_id: region, resource_name: 'ram', resource_limit: 50, description: 'domain' },
      ],
    });
    const mine = name(limits.body.limits[0].id, 'L-PROJ');
    const ofDomain = name(limits.body.limits[1].id, 'L-DOM');
    seen['create limits'] = { status: limits.status, said: JSON.parse(named(JSON.stringify(limits.body))) };
    await ask('limit without registered', 'POST', '/v3/limits', { limits: [{ project_id: project, service_id: service, resource_name: 'gpus', resource_limit: 1 }] });
    await ask('limit in the wrong region', 'POST', '/v3/limits', { limits: [{ project_id: project, service_id: service, region_id: region, resource_name: 'cores', resource_limit: 1 }] });
    await ask('duplicate limit', 'POST', '/v3/limits', { limits: [{ project_id: project, service_id: service, resource_name: 'cores', resource_limit: 1 }] });
    await ask('unknown project', 'POST', '/v3/limits', { limits: [{ project_id: 'no-such-project', service_id: service, resource_name: 'cores', resource_limit: 1 }] });
    await ask('project as domain', 'POST', '/v3/limits', { limits: [{ domain_id: project, service_id: service, resource_name: 'cores', resource_limit: 1 }] });
    await ask('unknown service', 'POST', '/v3/limits', { limits: [{ project_id: project, service_id: 'no-such-service', resource_name: 'cores', resource_limit: 1 }] });
    await ask('unknown region for a limit', 'POST', '/v3/limits', { limits: [{ project_id: project, service_id: service, region_id: 'no-such-region', resource_name: 'cores', resource_limit: 1 }] });
    await ask('project and domain', 'POST', '/v3/limits', { limits: [{ project_id: project, domain_id: 'default', service_id: service, resource_name: 'cores', resource_limit: 1 }] });
    await ask('neither project nor domain', 'POST', '/v3/limits', { limits: [{ service_id: service, resource_name: 'cores', resource_limit: 1 }] });
    const viaProjectId = await ask('domain named as project_id', 'POST', '/v3/limits', { limits: [{ project_id: 'default', service_id: service, resource_name: 'cores', resource_limit: 3 }] });
    if (viaProjectId.status === 201) {
      const id = name(viaProjectId.body.limits[0].id, 'L-DOM2');
      seen['domain named as project_id'] = { status: viaProjectId.status, said: JSON.parse(named(JSON.stringify(viaProjectId.body))) };
      await ask('delete domain limit', 'DELETE', `/v3/limits/${id}`);
    }
    // The admin's token is scoped to the admin project: only that project's limits are listed.
    await ask('list limits (project-scoped admin)', 'GET', `/v3/limits?service_id=${service}`);
    await ask('list limits of another project', 'GET', `/v3/limits?project_id=${project}`);
    // Other scopes: a member of the project sees its limits; a domain reader sees its projects' and its domain's.
    const password = `Pw-${prefix}-1a!`;
    user = (await api('POST', '/v3/users', { user: { name: `${prefix}-user`, domain_id: 'default', password } })).body.user.id;
    const roleId = async (role: string) => ((await api('GET', `/v3/roles?name=${role}`)).body.roles as { id: string }[])[0]!.id;
    await api('PUT', `/v3/projects/${project}/users/${user}/roles/${await roleId('member')}`);
    await api('PUT', `/v3/domains/default/users/${user}/roles/${await roleId('reader')}`);
    const tokenFor = async (scope: unknown) => {
      const answer = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ name: `${prefix}-user`, domainId: 'default' }, password, scope) });
      if (answer.status !== 201) throw new Error(`user login: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.token;
    };
    const asUser = async (step: string, token: string, path: string) => {
      const answer = await call(`${base}${path}`, { method: 'GET', token });
      const rows = (answer.body?.limits as { id: string; service_id: string }[] | undefined) ?? [];
      seen[step] = { status: answer.status, said: answer.body?.error ? named(answer.body.error.message) : rows.filter((row) => row.service_id === service).map((row) => named(row.id)) };
    };
    const memberToken = await tokenFor({ project: { id: project } });
    await asUser('list limits as the project member', memberToken, `/v3/limits?service_id=${service}`);
    await asUser('list limits as the project member, by domain', memberToken, `/v3/limits?service_id=${service}&domain_id=default`);
    const domainToken = await tokenFor({ domain: { id: 'default' } });
    await asUser('list limits as the domain reader', domainToken, `/v3/limits?service_id=${service}`);
    await asUser('list limits as the domain reader, by project', domainToken, `/v3/limits?service_id=${service}&project_id=${project}`);
    await ask('get limit', 'GET', `/v3/limits/${mine}`);
    await ask('get missing limit', 'GET', '/v3/limits/no-such-limit');
    await ask('patch limit', 'PATCH', `/v3/limits/${mine}`, { limit: { resource_limit: 7, description: 'seven' } });
    await ask('patch limit resource', 'PATCH', `/v3/limits/${mine}`, { limit: { resource_name: 'x' } });
    await ask('patch limit with nothing', 'PATCH', `/v3/limits/${mine}`, { limit: {} });
    await ask('patch missing limit', 'PATCH', '/v3/limits/no-such-limit', { limit: { resource_limit: 1 } });
    await ask('patch held registered', 'PATCH', `/v3/registered_limits/${cores}`, { registered_limit: { default_limit: 11 } });
    await ask('patch held registered with nothing', 'PATCH', `/v3/registered_limits/${cores}`, { registered_limit: {} });
    await ask('delete held registered', 'DELETE', `/v3/registered_limits/${cores}`);
    await ask('delete limit', 'DELETE', `/v3/limits/${mine}`);
    await ask('delete deleted limit', 'DELETE', `/v3/limits/${mine}`);
    await ask('delete freed registered', 'DELETE', `/v3/registered_limits/${cores}`);
    await ask('delete missing registered', 'DELETE', '/v3/registered_limits/no-such-limit');

    // A project deleted takes its limits.
    await api('POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'cores', default_limit: 10 }] });
    const gone = (await api('POST', '/v3/limits', { limits: [{ project_id: project, service_id: service, resource_name: 'cores', resource_limit: 1 }] })).body.limits[0].id as string;
    await api('PATCH', `/v3/projects/${project}`, { project: { enabled: false } });
    await ask('delete project', 'DELETE', `/v3/projects/${project}`);
    await ask('its limit is gone', 'GET', `/v3/limits/${gone}`);
    // A domain deleted leaves its limits (Keystone 22 does).
    domain = name((await api('POST', '/v3/domains', { domain: { name: `${prefix}-dom` } })).body.domain.id, 'DOM');
    const kept = await api('POST', '/v3/limits', { limits: [{ domain_id: domain, service_id: service, resource_name: 'cores', resource_limit: 2 }] });
    const keptId = name(kept.body.limits[0].id, 'L-KEPT');
    await api('PATCH', `/v3/domains/${domain}`, { domain: { enabled: false } });
    await ask('delete domain', 'DELETE', `/v3/domains/${domain}`);
    await ask("a deleted domain's limit", 'GET', `/v3/limits/${keptId}`);
    await ask("delete a deleted domain's limit", 'DELETE', `/v3/limits/${keptId}`);
    await api('DELETE', `/v3/limits/${ofDomain}`);
  } finally {
    // Everything this run made (when a step failed half-way too): limits, registered limits, then the
    // service, project, region, user and domain (a domain's limits stay after it: listed by service).
    const ofRun = (rows: { id: string; service_id: string }[] | undefined) => (rows ?? []).filter((row) => row.service_id === service);
    if (service) {
      for (const limit of ofRun((await api('GET', `/v3/limits?service_id=${service}`)).body?.limits)) await api('DELETE', `/v3/limits/${limit.id}`);
      for (const limit of ofRun((await api('GET', `/v3/registered_limits?service_id=${service}`)).body?.registered_limits)) {
        await api('DELETE', `/v3/registered_limits/${limit.id}`);
      }
      await api('DELETE', `/v3/services/${service}`);
    }
    if (project) {
      await api('PATCH', `/v3/projects/${project}`, { project: { enabled: false } });
      await api('DELETE', `/v3/projects/${project}`);
    }
    if (region) await api('DELETE', `/v3/regions/${region}`);
    if (user) await api('DELETE', `/v3/users/${user}`);
    if (domain) {
      await api('PATCH', `/v3/domains/${domain}`, { domain: { enabled: false } });
      await api('DELETE', `/v3/domains/${domain}`);
    }
  }
  return seen;
}

const REGISTERED_KEYS = ['id', 'service_id', 'region_id', 'resource_name', 'default_limit', 'description', 'links'];
const LIMIT_KEYS = ['id', 'project_id', 'domain_id', 'resource_limit', 'description', 'service_id', 'region_id', 'resource_name', 'links'];
const coresRegistered = { id: 'RL-CORES', service_id: 'SVC', region_id: null, resource_name: 'cores', default_limit: 10, description: null, links: { self: 'BASE/v3/registered_limits/RL-CORES' } };
const ramRegistered = (changes: Record<string, unknown> = {}) => ({
  id: 'RL-RAM',
  service_id: 'SVC',
  region_id: '~-region',
  resource_name: 'ram',
  default_limit: 100,
  description: 'memory',
  links: { self: 'BASE/v3/registered_limits/RL-RAM' },
  ...changes,
});
const projectLimit = (changes: Record<string, unknown> = {}) => ({
  id: 'L-PROJ',
  project_id: 'PROJ',
  domain_id: null,
  resource_limit: 5,
  description: null,
  service_id: 'SVC',
  region_id: null,
  resource_name: 'cores',
  links: { self: 'BASE/v3/limits/L-PROJ' },
  ...changes,
});
const listLinks = (query: string) => ({ next: null, self: `BASE/v3/${query}`, previous: null });
const expecting = (attribute: string, target: string) => ({
  status: 400,
  said: `Expecting to find ${attribute} in ${target}. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.`,
});
const schema = { status: 400, said: 'schema' };
const held = (id: string) => ({ status: 403, said: `Unable to update or delete registered limit ${id} because there are project limits associated with it.` });

/** What Keystone 22 answered (asked on 2026-11-27), and what this service must answer too. */
const KEYSTONE: Record<string, Seen> = {
  model: { status: 200, said: { model: { name: 'flat', description: 'Limit enforcement and validation does not take project hierarchy into consideration.' } } },
  'create registered': { status: 201, said: { registered_limits: [coresRegistered, ramRegistered()] } },
  'duplicate registered': { status: 409, said: 'Conflict occurred attempting to store registered_limit - Duplicate entry.' },
  'duplicate within a list': { status: 409, said: 'Conflict occurred attempting to store registered_limit - Duplicate entry.' },
  'unknown service in a list': expecting('service_id', 'registered_limit'),
  'unknown region': expecting('region_id', 'registered_limit'),
  'empty list': schema,
  'below -1': schema,
  'unknown attribute': schema,
  'list after refusals': { status: 200, said: { registered_limits: [coresRegistered, ramRegistered()], links: listLinks('registered_limits?service_id=SVC') } },
  'list by resource': { status: 200, said: { registered_limits: [ramRegistered()], links: listLinks('registered_limits?service_id=SVC&resource_name=ram') } },
  'list by region': { status: 200, said: { registered_limits: [ramRegistered()], links: listLinks('registered_limits?region_id=~-region') } },
  'get registered': { status: 200, said: { registered_limit: coresRegistered } },
  'get missing registered': { status: 404, said: 'Could not find registered limit for no-such-limit.' },
  'patch registered': { status: 200, said: { registered_limit: ramRegistered({ default_limit: 200, region_id: null, description: null }) } },
  'patch registered onto another': { status: 409, said: 'Conflict occurred attempting to store registered_limit - Duplicate entry.' },
  'patch registered id': schema,
  'patch registered unknown service': expecting('service_id', 'registered_limit'),
  'patch missing registered': { status: 404, said: 'Could not find registered limit for no-such-limit.' },
  'patch registered back to a region': { status: 200, said: { registered_limit: ramRegistered({ default_limit: 200, description: null }) } },
  'create limits': {
    status: 201,
    said: {
      limits: [
        projectLimit(),
        {
          id: 'L-DOM',
          project_id: null,
          domain_id: 'default',
          resource_limit: 50,
          description: 'domain',
          service_id: 'SVC',
          region_id: '~-region',
          resource_name: 'ram',
          links: { self: 'BASE/v3/limits/L-DOM' },
        },
      ],
    },
  },
  'limit without registered': { status: 403, said: 'Unable to create a limit that has no corresponding registered limit.' },
  'limit in the wrong region': { status: 403, said: 'Unable to create a limit that has no corresponding registered limit.' },
  'duplicate limit': { status: 409, said: 'Conflict occurred attempting to store limit - Duplicate entry.' },
  'unknown project': expecting('project_id', 'limit'),
  'project as domain': expecting('domain_id', 'limit'),
  'unknown service': expecting('service_id', 'limit'),
  'unknown region for a limit': expecting('region_id', 'limit'),
  'project and domain': schema,
  'neither project nor domain': schema,
  'domain named as project_id': {
    status: 201,
    said: { limits: [projectLimit({ id: 'L-DOM2', project_id: null, domain_id: 'default', resource_limit: 3, links: { self: 'BASE/v3/limits/L-DOM2' } })] },
  },
  'delete domain limit': { status: 204, said: null },
  'list limits (project-scoped admin)': { status: 200, said: { limits: [], links: listLinks('limits?service_id=SVC') } },
  'list limits of another project': { status: 200, said: { limits: [], links: listLinks('limits?project_id=PROJ') } },
  'list limits as the project member': { status: 200, said: ['L-PROJ'] },
  'list limits as the project member, by domain': { status: 200, said: [] },
  'list limits as the domain reader': { status: 200, said: ['L-PROJ', 'L-DOM'] },
  'list limits as the domain reader, by project': { status: 200, said: ['L-PROJ'] },
  'get limit': { status: 200, said: { limit: projectLimit() } },
  'get missing limit': { status: 404, said: 'Could not find limit for no-such-limit.' },
  'patch limit': { status: 200, said: { limit: projectLimit({ resource_limit: 7, description: 'seven' }) } },
  'patch limit resource': schema,
  'patch limit with nothing': { status: 200, said: { limit: projectLimit({ resource_limit: 7, description: 'seven' }) } },
  'patch missing limit': { status: 404, said: 'Could not find limit for no-such-limit.' },
  'patch held registered': held('RL-CORES'),
  'patch held registered with nothing': held('RL-CORES'),
  'delete held registered': held('RL-CORES'),
  'delete limit': { status: 204, said: null },
  'delete deleted limit': { status: 404, said: 'Could not find limit for L-PROJ.' },
  'delete freed registered': { status: 204, said: null },
  'delete missing registered': { status: 404, said: 'Could not find registered limit for no-such-limit.' },
  'delete project': { status: 204, said: null },
  'its limit is gone': { status: 404, said: null },
  'delete domain': { status: 204, said: null },
  "a deleted domain's limit": {
    status: 200,
    said: { limit: projectLimit({ id: 'L-KEPT', project_id: null, domain_id: 'DOM', resource_limit: 2, links: { self: 'BASE/v3/limits/L-KEPT' } }) },
  },
  "delete a deleted domain's limit": { status: 204, said: null },
};

/** The last step's message names a limit id made in the run: only its status is compared. */
function comparable(seen: Record<string, Seen>): Record<string, Seen> {
  const gone = seen['its limit is gone'];
  return { ...seen, 'its limit is gone': { status: gone?.status ?? 0, said: null } };
}

t.test('key order', async (t) => {
  t.same(Object.keys(coresRegistered), REGISTERED_KEYS);
  t.same(Object.keys(projectLimit()), LIMIT_KEYS);
});

t.test('this service: unified limits', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const seen = comparable(await scenario(base, ADMIN_PASSWORD, PUBLIC_URL));
  t.same(seen, KEYSTONE);
  // Key order too (t.same does not look at it).
  t.same(Object.keys((seen['get registered']?.said as { registered_limit: object }).registered_limit), REGISTERED_KEYS);
  t.same(Object.keys((seen['get limit']?.said as { limit: object }).limit), LIMIT_KEYS);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: unified limits', { skip }, async (t) => {
  const seen = comparable(await scenario(PEER_URL, PEER_PASSWORD));
  t.same(seen, KEYSTONE);
  t.same(Object.keys((seen['get registered']?.said as { registered_limit: object }).registered_limit), REGISTERED_KEYS);
  t.same(Object.keys((seen['get limit']?.said as { limit: object }).limit), LIMIT_KEYS);
});
