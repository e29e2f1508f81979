import t from 'tap';
import { ADMIN_PASSWORD, startListeningTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// GET /v3/projects/{id}'s hierarchy flags (`openstack project show --parents --children`), over HTTP,
// against this service and against the real Keystone 22 (../shared/peers/keystone/start.sh; that half
// is skipped without a peer): the same statuses and the same parents and subtree, ids named.

async function scenario(base: string, adminPassword: string): Promise<Record<string, { status: number; said: unknown }>> {
  const prefix = `hier-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const tokenOf = async (user: { id: string } | { name: string; domainId: string }, password: string, scope: unknown) => {
    const login = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth(user, password, scope) });
    if (login.status !== 201) throw new Error(`login: ${login.status}`);
    return login.token!;
  };
  const admin = await tokenOf({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } });
  const names = new Map<string, string>();
  const created = async (path: string, body: unknown, key: string, name: string) => {
    const answer = await call(`${base}${path}`, { method: 'POST', token: admin, body });
    if (answer.status !== 201) throw new Error(`${path}: ${answer.status}`);
    const entity = answer.body[key];
    const id = (Array.isArray(entity) ? entity[0] : entity).id as string;
    names.set(id, name);
    return id;
  };
  const domain = await created('/v3/domains', { domain: { name: `${prefix}-d` } }, 'domain', 'DOMAIN');
  const project = (name: string, parent?: string) => created('/v3/projects', { project: { name: `${prefix}-${name}`, domain_id: domain, ...(parent ? { parent_id: parent } : {}) } }, 'project', name);
  const a = await project('A');
  const b = await project('B', a);
  const c = await project('C', b);
  await project('D', b);
  await project('E', a);
  const bob = await created('/v3/users', { user: { name: `${prefix}-bob`, domain_id: domain, password: 'Pw-bob-1' } }, 'user', 'BOB');
  const member = (await call(`${base}/v3/roles?name=member`, { token: admin })).body.roles[0].id as string;
  for (const id of [a, b, c]) await call(`${base}/v3/projects/${id}/users/${bob}/roles/${member}`, { method: 'PUT', token: admin });
  const service = await created('/v3/services', { service: { type: `${prefix}-type`, name: prefix } }, 'service', 'SERVICE');
  await created('/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'cores', default_limit: 10 }] }, 'registered_limits', 'REGISTERED');
  await created('/v3/limits', { limits: [{ service_id: service, project_id: b, resource_name: 'cores', resource_limit: 5 }] }, 'limits', 'LIMIT');

  /** Ids as names; a listed project as its fields' names and its limits (links only counted: their base differs). */
  const named = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(named);
    if (value && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value)
          .sort(([x], [y]) => x.localeCompare(y))
          .map(([key, inner]) => [names.get(key) ?? key, key === 'links' ? Object.keys(inner as object) : named(inner)]),
      );
    }
    return typeof value === 'string' ? (names.get(value) ?? value.replaceAll(prefix, '~')) : value;
  };
  const seen: Record<string, { status: number; said: unknown }> = {};
  const asks: Array<[string, 'admin' | 'bob', string, string]> = [
    ['C parents as ids', 'admin', c, 'parents_as_ids'],
    ['A subtree as ids', 'admin', a, 'subtree_as_ids'],
    ['domain both as ids', 'admin', domain, 'parents_as_ids&subtree_as_ids'],
    ['leaf subtree as ids', 'admin', c, 'subtree_as_ids'],
    ['admin parents as list', 'admin', c, 'parents_as_list'],
    ['bob parents as list', 'bob', c, 'parents_as_list'],
    ['bob subtree as list', 'bob', a, 'subtree_as_list'],
    ['bob parents with limits', 'bob', c, 'parents_as_list&include_limits'],
    ['bob mixed', 'bob', b, 'parents_as_ids&subtree_as_list&include_limits'],
    ['parents both forms', 'admin', b, 'parents_as_list&parents_as_ids'],
    ['subtree both forms', 'admin', b, 'subtree_as_list&subtree_as_ids'],
    ['flag 0', 'admin', c, 'parents_as_ids=0&subtree_as_ids=0'],
  ];
  try {
    for (const [step, who, id, query] of asks) {
      const token = who === 'admin' ? admin : await tokenOf({ id: bob }, 'Pw-bob-1', { project: { id } });
      const answer = await call(`${base}/v3/projects/${id}?${query}`, { token });
      const body = answer.body?.project ?? answer.body;
      seen[step] = { status: answer.status, said: named(Object.fromEntries(['parents', 'subtree', 'error'].filter((key) => key in body).map((key) => [key, body[key]]))) };
    }
  } finally {
    // Leaves first, then the domain, the service (and its limits) and the user.
    for (const name of ['C', 'D', 'E', 'B', 'A']) {
      const id = [...names].find(([, named]) => named === name)?.[0];
      if (id) await call(`${base}/v3/projects/${id}`, { method: 'DELETE', token: admin });
    }
    await call(`${base}/v3/users/${bob}`, { method: 'DELETE', token: admin });
    await call(`${base}/v3/domains/${domain}`, { method: 'PATCH', token: admin, body: { domain: { enabled: false } } });
    await call(`${base}/v3/domains/${domain}`, { method: 'DELETE', token: admin });
    const registered = [...names].find(([, named]) => named === 'REGISTERED')?.[0];
    if (registered) await call(`${base}/v3/registered_limits/${registered}`, { method: 'DELETE', token: admin });
    await call(`${base}/v3/services/${service}`, { method: 'DELETE', token: admin });
  }
  return seen;
}

const listed = (name: string, parent: string, limits?: unknown[]) => ({
  project: {
    description: '',
    domain_id: 'DOMAIN',
    enabled: true,
    id: name,
    is_domain: false,
    ...(limits ? { limits } : {}),
    links: ['self'],
    name: `~-${name}`,
    options: {},
    parent_id: parent,
    tags: [],
  },
});
const limitOfB = { description: null, domain_id: null, id: 'LIMIT', project_id: 'B', region_id: null, resource_limit: 5, resource_name: 'cores', service_id: 'SERVICE' };

/** What Keystone 22 answered (asked on 2026-12-03), and what this service must answer too. */
const KEYSTONE = {
  'C parents as ids': { status: 200, said: { parents: { B: { A: { DOMAIN: null } } } } },
  'A subtree as ids': { status: 200, said: { subtree: { B: { C: null, D: null }, E: null } } },
  'domain both as ids': { status: 200, said: { parents: null, subtree: { A: { B: { C: null, D: null }, E: null } } } },
  'leaf subtree as ids': { status: 200, said: { subtree: null } },
  // Only the projects the caller holds a role on, whatever its role: the admin holds none of these.
  'admin parents as list': { status: 200, said: { parents: [] } },
  'bob parents as list': { status: 200, said: { parents: [listed('B', 'A'), listed('A', 'DOMAIN')] } },
  'bob subtree as list': { status: 200, said: { subtree: [listed('B', 'A'), listed('C', 'B')] } },
  'bob parents with limits': { status: 200, said: { parents: [listed('B', 'A', [limitOfB]), listed('A', 'DOMAIN', [])] } },
  'bob mixed': { status: 200, said: { parents: { A: { DOMAIN: null } }, subtree: [listed('C', 'B', [])] } },
  'parents both forms': { status: 400, said: { error: { code: 400, message: 'Cannot use parents_as_list and parents_as_ids query params at the same time.', title: 'Bad Request' } } },
  'subtree both forms': { status: 400, said: { error: { code: 400, message: 'Cannot use subtree_as_list and subtree_as_ids query params at the same time.', title: 'Bad Request' } } },
  'flag 0': { status: 200, said: {} },
};

t.test('this service: the hierarchy flags of GET /v3/projects/{id}', async (t) => {
  const { base } = await startListeningTestApp(t, () => ({}));
  t.same(await scenario(base, ADMIN_PASSWORD), KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: the hierarchy flags of GET /v3/projects/{id}', { skip }, async (t) => {
  t.same(await scenario(PEER_URL, PEER_PASSWORD), KEYSTONE);
});
