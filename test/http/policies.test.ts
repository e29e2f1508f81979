import t from 'tap';
import { PolicyAssociationEntity, PolicyEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

// Keystone's policy store (/v3/policies) and OS-ENDPOINT-POLICY, as Keystone 22 answers them
// (compared with the real one in test/e2e/policies-keystone.test.ts).

t.test('policies: create, list with ?type, show, update, delete', async (t) => {
  const { call, app } = await startTestApp(t);

  const created = await call('POST', '/v3/policies', { policy: { blob: '{"rule": "x"}', type: 'application/json', owner: 'ops', id: 'ignored' } });
  t.equal(created.statusCode, 201);
  const policy = created.json().policy;
  t.match(policy.id, /^[0-9a-f]{32}$/, 'an id of its own (one in the body is ignored)');
  t.same(policy, { owner: 'ops', id: policy.id, blob: '{"rule": "x"}', type: 'application/json', links: { self: `${PUBLIC_URL}/v3/policies/${policy.id}` } });
  const other = (await call('POST', '/v3/policies', { policy: { blob: 'b', type: 'text/plain' } })).json().policy;

  t.same((await call('GET', `/v3/policies/${policy.id}`)).json().policy, policy);
  const listed = await call('GET', '/v3/policies');
  t.equal(listed.statusCode, 200);
  t.same(listed.json().links, { self: `${PUBLIC_URL}/v3/policies`, previous: null, next: null });
  t.same(listed.json().policies.map((p: { id: string }) => p.id).sort(), [policy.id, other.id].sort());
  const byType = await call('GET', '/v3/policies?type=application/json');
  t.same(byType.json().policies.map((p: { id: string }) => p.id), [policy.id]);
  t.equal(byType.json().links.self, `${PUBLIC_URL}/v3/policies?type=application/json`);
  t.same((await call('GET', '/v3/policies?type__startswith=text')).json().policies.map((p: { id: string }) => p.id), [other.id]);
  t.same((await call('GET', '/v3/policies?type=')).json().policies, [], 'an empty type matches nothing');
  t.same((await call('GET', '/v3/policies?type=text/plain&type=text/plain')).json().policies.map((p: { id: string }) => p.id), [other.id], 'every value of a repeated filter must hold');
  t.same((await call('GET', '/v3/policies?type=text/plain&type=application/json')).json().policies, []);

  const updated = await call('PATCH', `/v3/policies/${policy.id}`, { policy: { blob: 'new', level: 2, owner: null } });
  t.equal(updated.statusCode, 200);
  t.same(updated.json().policy, { owner: null, level: 2, id: policy.id, blob: 'new', type: 'application/json', links: policy.links }, 'extra attributes merge');
  t.equal((await call('PATCH', `/v3/policies/${policy.id}`, { policy: { id: policy.id, type: 't2' } })).json().policy.type, 't2', 'the same id is accepted');
  const row = await app.store.reader().findOne(PolicyEntity, { id: policy.id });
  t.match(row, { type: 't2', blob: 'new', extra: { owner: null, level: 2 } });

  const deleted = await call('DELETE', `/v3/policies/${policy.id}`);
  t.equal(deleted.statusCode, 204);
  const gone = await call('GET', `/v3/policies/${policy.id}`);
  t.equal(gone.statusCode, 404);
  t.equal(gone.json().error.message, `Could not find policy: ${policy.id}.`);
  t.equal((await call('DELETE', `/v3/policies/${policy.id}`)).statusCode, 404);
});

t.test('policies: bad input', async (t) => {
  const { call } = await startTestApp(t);
  const expect400 = async (method: 'POST' | 'PATCH', url: string, body: unknown, message: string | RegExp) => {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, 400, `${method} ${JSON.stringify(body)}`);
    t.match(answer.json().error.message, message);
  };
  await expect400('POST', '/v3/policies', { policy: { type: 'x' } }, "'blob' is a required property");
  await expect400('POST', '/v3/policies', { policy: { blob: 'x' } }, "'type' is a required property");
  await expect400('POST', '/v3/policies', {}, "'blob' is a required property");
  await expect400('POST', '/v3/policies', { policy: { blob: 1, type: 't' } }, /^Invalid input for field 'blob'/);
  await expect400('POST', '/v3/policies', { policy: { blob: 'x', type: null } }, /^Invalid input for field 'type'/);
  await expect400('POST', '/v3/policies', { policy: { blob: 'x', type: 'a'.repeat(256) } }, /^Invalid input for field 'type'/);
  const id = (await call('POST', '/v3/policies', { policy: { blob: 'x', type: 't' } })).json().policy.id;
  await expect400('PATCH', `/v3/policies/${id}`, { policy: {} }, '{} does not have enough properties');
  await expect400('PATCH', `/v3/policies/${id}`, {}, '{} does not have enough properties');
  await expect400('PATCH', `/v3/policies/${id}`, { policy: { type: null } }, /^Invalid input for field 'type'/);
  await expect400('PATCH', `/v3/policies/${id}`, { policy: { id: 'other' } }, 'Cannot change policy ID');
  await expect400('PATCH', '/v3/policies/nope', { policy: { id: 'other' } }, 'Cannot change policy ID');
  const missing = await call('PATCH', '/v3/policies/nope', { policy: { blob: 'x' } });
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Could not find policy: nope.');
});

t.test('OS-ENDPOINT-POLICY: associations and the policy an endpoint uses', async (t) => {
  const { call, app } = await startTestApp(t);
  const must = async (method: 'POST' | 'PUT', url: string, body?: unknown) => {
    const answer = await call(method, url, body);
    if (answer.statusCode >= 300) throw new Error(`${method} ${url}: ${answer.statusCode} ${answer.body}`);
    return answer.statusCode === 204 ? undefined : answer.json();
  };
  await must('POST', '/v3/regions', { region: { id: 'top' } });
  await must('POST', '/v3/regions', { region: { id: 'mid', parent_region_id: 'top' } });
  await must('POST', '/v3/regions', { region: { id: 'low', parent_region_id: 'mid' } });
  const service = (await must('POST', '/v3/services', { service: { type: 'compute' } })).service.id as string;
  const otherService = (await must('POST', '/v3/services', { service: { type: 'image' } })).service.id as string;
  const endpoint = async (region: string | null, iface = 'public') =>
    (await must('POST', '/v3/endpoints', { endpoint: { service_id: service, interface: iface, url: `http://${region}.test/`, ...(region ? { region_id: region } : {}), tier: 'x' } })).endpoint.id as string;
  const eLow = await endpoint('low');
  const eMid = await endpoint('mid', 'internal');
  const eNone = await endpoint(null, 'admin');
  const pA = (await must('POST', '/v3/policies', { policy: { blob: 'A', type: 't' } })).policy.id as string;
  const pB = (await must('POST', '/v3/policies', { policy: { blob: 'B', type: 't' } })).policy.id as string;
  const base = (policy: string) => `/v3/policies/${policy}/OS-ENDPOINT-POLICY`;
  const effective = async (endpointId: string) => {
    const answer = await call('GET', `/v3/endpoints/${endpointId}/OS-ENDPOINT-POLICY/policy`);
    return answer.statusCode === 200 ? answer.json().policy.blob : `${answer.statusCode} ${answer.json().error.message}`;
  };
  const endpointsOf = async (policy: string) => {
    const answer = await call('GET', `${base(policy)}/endpoints`);
    if (answer.statusCode !== 200) throw new Error(answer.body);
    return answer.json().endpoints.map((e: { id: string }) => e.id).sort();
  };
  const status = async (method: 'GET' | 'HEAD' | 'PUT' | 'DELETE', url: string) => (await call(method, url)).statusCode;

  t.equal(await effective(eLow), `404 No policy is associated with endpoint ${eLow}.`);
  t.same(await endpointsOf(pA), []);
  const check = await call('GET', `${base(pA)}/endpoints/${eLow}`);
  t.equal(check.statusCode, 404);
  t.equal(check.json().error.message, 'Could not find policy association.');
  t.equal(await status('HEAD', `${base(pA)}/services/${service}`), 404);
  t.equal(await status('DELETE', `${base(pA)}/endpoints/${eLow}`), 204, 'deleting an association that is not there is not an error');

  // Unknown ids: the policy first, then the endpoint, or the service then the region.
  for (const [url, message] of [
    [`/v3/policies/nope/OS-ENDPOINT-POLICY/endpoints/nope`, 'Could not find policy: nope.'],
    [`${base(pA)}/endpoints/nope`, 'Could not find endpoint: nope.'],
    [`${base(pA)}/services/nope/regions/nope`, 'Could not find service: nope.'],
    [`${base(pA)}/services/${service}/regions/nope`, 'Could not find region: nope.'],
  ] as const) {
    for (const method of ['PUT', 'GET', 'DELETE'] as const) {
      const answer = await call(method, url);
      t.equal(answer.statusCode, 404, `${method} ${url}`);
      t.equal(answer.json().error.message, message);
    }
  }
  t.equal((await call('GET', '/v3/endpoints/nope/OS-ENDPOINT-POLICY/policy')).json().error.message, 'Could not find endpoint: nope.');
  t.equal((await call('GET', '/v3/policies/nope/OS-ENDPOINT-POLICY/endpoints')).json().error.message, 'Could not find policy: nope.');

  // The service's policy covers every endpoint of the service.
  t.equal(await status('PUT', `${base(pA)}/services/${service}`), 204);
  t.equal(await status('GET', `${base(pA)}/services/${service}`), 204);
  t.equal(await status('HEAD', `${base(pA)}/services/${service}`), 204);
  t.same(await endpointsOf(pA), [eLow, eMid, eNone].sort());
  const listed = await call('GET', `${base(pA)}/endpoints`);
  const low = listed.json().endpoints.find((e: { id: string }) => e.id === eLow);
  t.same(low, { tier: 'x', id: eLow, interface: 'public', region_id: 'low', service_id: service, url: 'http://low.test/', enabled: true, links: { self: `${PUBLIC_URL}/v3/endpoints/${eLow}` } }, 'no legacy region attribute');
  t.same(listed.json().links, { self: `${PUBLIC_URL}${base(pA)}/endpoints`, previous: null, next: null });
  const own = await call('GET', `/v3/endpoints/${eLow}/OS-ENDPOINT-POLICY/policy`);
  t.same(own.json().policy, { id: pA, blob: 'A', type: 't', links: { self: `${PUBLIC_URL}/v3/endpoints/${pA}` } }, 'linked under /v3/endpoints, as Keystone does');

  // A service in a region covers the region and those below it; an endpoint uses the nearest.
  t.equal(await status('PUT', `${base(pB)}/services/${service}/regions/top`), 204);
  t.same([await effective(eLow), await effective(eMid), await effective(eNone)], ['B', 'B', 'A']);
  t.same(await endpointsOf(pB), [eLow, eMid].sort());
  t.equal(await status('PUT', `${base(pA)}/services/${service}/regions/mid`), 204);
  t.same([await effective(eLow), await effective(eMid)], ['A', 'A']);
  t.same(await endpointsOf(pA), [eLow, eLow, eMid, eMid, eNone].sort(), 'an endpoint reached by two associations is listed twice');
  // An endpoint's own association wins.
  t.equal(await status('PUT', `${base(pB)}/endpoints/${eLow}`), 204);
  t.same([await effective(eLow), await effective(eMid)], ['B', 'A']);
  t.equal(await status('GET', `${base(pB)}/endpoints/${eLow}`), 204);
  t.equal(await status('GET', `${base(pA)}/endpoints/${eLow}`), 404);
  // A target has one policy: associating another replaces it.
  t.equal(await status('PUT', `${base(pA)}/services/${service}/regions/top`), 204);
  t.equal(await status('GET', `${base(pB)}/services/${service}/regions/top`), 404);
  t.equal(await status('GET', `${base(pA)}/services/${service}/regions/top`), 204);
  t.equal(await app.store.reader().count(PolicyAssociationEntity, { serviceId: service, regionId: 'top' }), 1);
  // Deleting names the policy: another policy's association stays.
  t.equal(await status('DELETE', `${base(pB)}/services/${service}/regions/top`), 204);
  t.equal(await status('GET', `${base(pA)}/services/${service}/regions/top`), 204);
  t.equal(await status('DELETE', `${base(pA)}/services/${service}/regions/top`), 204);
  t.equal(await status('GET', `${base(pA)}/services/${service}/regions/top`), 404);
  t.equal(await status('GET', `${base(pA)}/services/${otherService}`), 404);
});

t.test('OS-ENDPOINT-POLICY: deleting a policy, endpoint, service or region removes its associations', async (t) => {
  const { call, app } = await startTestApp(t);
  const must = async (method: 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => {
    const answer = await call(method, url, body);
    if (answer.statusCode >= 300) throw new Error(`${method} ${url}: ${answer.statusCode} ${answer.body}`);
    return answer.statusCode === 204 ? undefined : answer.json();
  };
  const associations = () => app.store.reader().find(PolicyAssociationEntity, {}, { orderBy: { id: 'asc' } });
  await must('POST', '/v3/regions', { region: { id: 'top' } });
  await must('POST', '/v3/regions', { region: { id: 'child', parent_region_id: 'top' } });
  const service = (await must('POST', '/v3/services', { service: { type: 'compute' } })).service.id as string;
  const keep = (await must('POST', '/v3/services', { service: { type: 'image' } })).service.id as string;
  const endpoint = (await must('POST', '/v3/endpoints', { endpoint: { service_id: service, interface: 'public', url: 'http://e.test/' } })).endpoint.id as string;
  const other = (await must('POST', '/v3/endpoints', { endpoint: { service_id: keep, interface: 'public', url: 'http://o.test/' } })).endpoint.id as string;
  const policy = (await must('POST', '/v3/policies', { policy: { blob: 'A', type: 't' } })).policy.id as string;
  const spare = (await must('POST', '/v3/policies', { policy: { blob: 'B', type: 't' } })).policy.id as string;
  const base = (p: string) => `/v3/policies/${p}/OS-ENDPOINT-POLICY`;

  await must('PUT', `${base(policy)}/endpoints/${endpoint}`);
  await must('PUT', `${base(spare)}/endpoints/${other}`);
  await must('DELETE', `/v3/endpoints/${endpoint}`);
  t.same((await associations()).map((a) => a.endpointId), [other], 'an endpoint deleted: its association goes');
  t.equal((await call('GET', `${base(policy)}/endpoints`)).statusCode, 200, 'the policy still lists its endpoints');

  await must('PUT', `${base(policy)}/services/${keep}/regions/child`);
  await must('DELETE', '/v3/regions/top');
  t.same((await associations()).map((a) => a.endpointId), [other], 'a region deleted (with the regions below it): their associations go');
  await must('POST', '/v3/regions', { region: { id: 'child' } });
  t.equal((await call('GET', `${base(policy)}/services/${keep}/regions/child`)).statusCode, 404, 'a region made again with the same id has none');

  await must('PUT', `${base(policy)}/services/${service}`);
  await must('PUT', `${base(policy)}/services/${service}/regions/child`);
  await must('DELETE', `/v3/services/${service}`);
  t.same((await associations()).map((a) => a.endpointId), [other], 'a service deleted: its associations go');

  await must('PUT', `${base(spare)}/services/${keep}`);
  await must('DELETE', `/v3/policies/${spare}`);
  t.same(await associations(), [], 'a policy deleted: its associations go');
  const effective = await call('GET', `/v3/endpoints/${other}/OS-ENDPOINT-POLICY/policy`);
  t.equal(effective.statusCode, 404);
  t.equal(effective.json().error.message, `No policy is associated with endpoint ${other}.`);
});

t.test('OS-ENDPOINT-POLICY: concurrent associations of one target: every one answered, one kept', async (t) => {
  const { call, app } = await startTestApp(t);
  const service = (await call('POST', '/v3/services', { service: { type: 'compute' } })).json().service.id as string;
  const policies: string[] = [];
  for (let i = 0; i < 6; i++) policies.push((await call('POST', '/v3/policies', { policy: { blob: `p${i}`, type: 't' } })).json().policy.id);
  const answers = await Promise.all(policies.map((policy) => call('PUT', `/v3/policies/${policy}/OS-ENDPOINT-POLICY/services/${service}`)));
  t.same(answers.map((answer) => answer.statusCode), policies.map(() => 204));
  const rows = await app.store.reader().find(PolicyAssociationEntity, { serviceId: service });
  t.equal(rows.length, 1, 'one association per target');
  t.ok(policies.includes(rows[0]!.policyId));
});

t.test('policies: who may', async (t) => {
  const { call, login } = await startTestApp(t);
  const user = (await call('POST', '/v3/users', { user: { name: 'plain', password: 'Secret-123' } })).json().user.id;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0].id;
  const project = (await call('GET', '/v3/projects?name=admin')).json().projects[0].id;
  await call('PUT', `/v3/projects/${project}/users/${user}/roles/${member}`);
  const { token } = await login({ id: user }, 'Secret-123', { project: { id: project } });
  const policy = (await call('POST', '/v3/policies', { policy: { blob: 'A', type: 't' } })).json().policy.id;
  for (const [method, url, rule] of [
    ['GET', '/v3/policies', 'list_policies'],
    ['GET', `/v3/policies/${policy}`, 'get_policy'],
    ['POST', '/v3/policies', 'create_policy'],
    ['DELETE', `/v3/policies/${policy}`, 'delete_policy'],
    ['GET', `/v3/policies/${policy}/OS-ENDPOINT-POLICY/endpoints`, 'list_endpoints_for_policy'],
    ['PUT', `/v3/policies/${policy}/OS-ENDPOINT-POLICY/services/nope`, 'create_policy_association_for_service'],
    ['GET', '/v3/endpoints/nope/OS-ENDPOINT-POLICY/policy', 'get_policy_for_endpoint'],
  ] as const) {
    const answer = await call(method, url, method === 'POST' ? { policy: { blob: 'x', type: 't' } } : undefined, token);
    t.equal(answer.statusCode, 403, `${method} ${url}`);
    t.equal(answer.json().error.message, `You are not authorized to perform the requested action: identity:${rule}.`);
  }
});
