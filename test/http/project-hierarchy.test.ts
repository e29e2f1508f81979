// GET /v3/projects/{id} with Keystone's hierarchy flags (`openstack project show --parents --children`):
// parents_as_ids / subtree_as_ids nest the ids; parents_as_list / subtree_as_list list the projects the
// caller holds a role on, with their limits when include_limits is asked; a _list and an _ids form together is 400.
import t from 'tap';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';

/** Domain `hd` holding A → B → (C, D) and A → E; bob is a member of A, B and C only. */
async function hierarchy(app: TestApp) {
  const created = async (url: string, body: unknown) => {
    const response = await app.call('POST', url, body);
    if (response.statusCode !== 201) throw new Error(`${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domain = (await created('/v3/domains', { domain: { name: 'hd' } })).domain.id as string;
  const project = async (name: string, parent?: string) => (await created('/v3/projects', { project: { name, domain_id: domain, ...(parent ? { parent_id: parent } : {}) } })).project.id as string;
  const a = await project('A');
  const b = await project('B', a);
  const c = await project('C', b);
  const d = await project('D', b);
  const e = await project('E', a);
  const bob = (await created('/v3/users', { user: { name: 'bob', domain_id: domain, password: 'Pw-bob-1' } })).user.id as string;
  const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  for (const id of [a, b, c]) t.equal((await app.call('PUT', `/v3/projects/${id}/users/${bob}/roles/${member}`)).statusCode, 204);
  const tokenOf = async (projectId: string) => (await app.login({ id: bob }, 'Pw-bob-1', { project: { id: projectId } })).token;
  return { domain, a, b, c, d, e, bob, tokenOf };
}

t.test('parents_as_ids and subtree_as_ids: the ids nested, up to the domain and down to the leaves', async (t) => {
  const app = await startTestApp(t);
  const h = await hierarchy(app);
  const show = async (id: string, query: string) => {
    const response = await app.call('GET', `/v3/projects/${id}?${query}`);
    t.equal(response.statusCode, 200, response.body);
    return response.json().project;
  };
  const c = await show(h.c, 'parents_as_ids');
  t.strictSame(c.parents, { [h.b]: { [h.a]: { [h.domain]: null } } }, "C's parents up to its domain");
  t.equal(c.subtree, undefined, 'no subtree unless asked');
  t.equal(c.name, 'C');
  t.equal(c.links.self, `${PUBLIC_URL}/v3/projects/${h.c}`);
  t.strictSame((await show(h.a, 'subtree_as_ids')).subtree, { [h.b]: { [h.c]: null, [h.d]: null }, [h.e]: null }, "A's subtree, leaves null");
  t.strictSame((await show(h.a, 'parents_as_ids')).parents, { [h.domain]: null }, 'a top-level project: its domain');
  const both = await show(h.b, 'parents_as_ids&subtree_as_ids');
  t.strictSame(both.parents, { [h.a]: { [h.domain]: null } });
  t.strictSame(both.subtree, { [h.c]: null, [h.d]: null });
  t.equal((await show(h.c, 'subtree_as_ids')).subtree, null, 'a leaf: null');
  const domainAsProject = await show(h.domain, 'parents_as_ids&subtree_as_ids');
  t.equal(domainAsProject.parents, null, 'a domain has no parents');
  t.strictSame(domainAsProject.subtree, { [h.a]: { [h.b]: { [h.c]: null, [h.d]: null }, [h.e]: null } });
  // The flags are true when present unless exactly "0" (Keystone's query_filter_is_true).
  t.strictSame((await show(h.c, 'parents_as_ids=yes')).parents, { [h.b]: { [h.a]: { [h.domain]: null } } });
  const off = await show(h.c, 'parents_as_ids=0&subtree_as_ids=0');
  t.equal(off.parents, undefined);
  t.equal(off.subtree, undefined);
  t.equal((await app.call('HEAD', `/v3/projects/${h.c}?parents_as_ids`)).statusCode, 200);
});

t.test("parents_as_list and subtree_as_list: only the projects the caller holds a role on, and their limits", async (t) => {
  const app = await startTestApp(t);
  const h = await hierarchy(app);
  const show = async (id: string, query: string, token?: string) => {
    const response = await app.call('GET', `/v3/projects/${id}?${query}`, undefined, token);
    t.equal(response.statusCode, 200, response.body);
    return response.json().project;
  };
  const names = (entries: Array<{ project: { name: string } }>) => entries.map((entry) => entry.project.name);

  const c = await show(h.c, 'parents_as_list', await h.tokenOf(h.c));
  t.strictSame(names(c.parents), ['B', 'A'], 'nearest first; the domain is not a project bob holds a role on');
  t.match(c.parents[0], { project: { id: h.b, name: 'B', domain_id: h.domain, parent_id: h.a, is_domain: false, links: { self: `${PUBLIC_URL}/v3/projects/${h.b}` } } });
  t.equal(c.parents[0].project.limits, undefined, 'no limits unless asked');
  const a = await show(h.a, 'subtree_as_list', await h.tokenOf(h.a));
  t.strictSame(names(a.subtree).sort(), ['B', 'C'], 'D and E are left out: bob holds no role on them');
  t.strictSame((await show(h.c, 'parents_as_list')).parents, [], "the admin holds roles on none of them (Keystone filters by the caller's projects, whatever its role)");

  // A limit on B, shown with B when include_limits is asked.
  const service = (await app.call('POST', '/v3/services', { service: { type: 'compute', name: 'nova' } })).json().service.id;
  t.equal((await app.call('POST', '/v3/registered_limits', { registered_limits: [{ service_id: service, resource_name: 'cores', default_limit: 10 }] })).statusCode, 201);
  const limit = (await app.call('POST', '/v3/limits', { limits: [{ service_id: service, project_id: h.b, resource_name: 'cores', resource_limit: 5 }] })).json().limits[0];
  const withLimits = await show(h.c, 'parents_as_list&include_limits', await h.tokenOf(h.c));
  t.strictSame(withLimits.parents[0].project.limits, [
    { id: limit.id, project_id: h.b, domain_id: null, resource_limit: 5, description: null, service_id: service, region_id: null, resource_name: 'cores' },
  ], "B's limit, as Keystone's driver gives it (no links)");
  t.strictSame(withLimits.parents[1].project.limits, [], 'A has none');
  t.strictSame((await show(h.a, 'subtree_as_list&include_limits', await h.tokenOf(h.a))).subtree.find((entry: { project: { id: string } }) => entry.project.id === h.b).project.limits.length, 1);
  t.strictSame((await show(h.c, 'parents_as_ids&include_limits')).parents, { [h.b]: { [h.a]: { [h.domain]: null } } }, 'include_limits changes nothing of the ids form');

  // Mixed forms: the ids of the parents and the list of the subtree.
  const mixed = await show(h.b, 'parents_as_ids&subtree_as_list', await h.tokenOf(h.b));
  t.strictSame(mixed.parents, { [h.a]: { [h.domain]: null } });
  t.strictSame(names(mixed.subtree), ['C']);
});

t.test('a _list and an _ids form of the same side together: 400, as Keystone', async (t) => {
  const app = await startTestApp(t);
  const h = await hierarchy(app);
  for (const [query, message] of [
    ['parents_as_list&parents_as_ids', 'Cannot use parents_as_list and parents_as_ids query params at the same time.'],
    ['subtree_as_list&subtree_as_ids', 'Cannot use subtree_as_list and subtree_as_ids query params at the same time.'],
  ] as const) {
    const response = await app.call('GET', `/v3/projects/${h.b}?${query}`);
    t.equal(response.statusCode, 400, query);
    t.strictSame(response.json(), { error: { code: 400, title: 'Bad Request', message } });
  }
  t.equal((await app.call('GET', `/v3/projects/no-such-project?parents_as_ids`)).statusCode, 404);
});
