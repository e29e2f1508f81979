import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

t.test('roles and implied roles', async (t) => {
  const { call } = await startTestApp(t);
  const roles = (await call('GET', '/v3/roles')).json().roles;
  t.same(roles.map((r: { name: string }) => r.name).sort(), ['admin', 'member', 'reader']);
  for (const role of roles) t.same(role.options, { immutable: true }, `${role.name} is immutable`);
  const byName = Object.fromEntries(roles.map((r: { name: string; id: string }) => [r.name, r.id]));

  const created = await call('POST', '/v3/roles', { role: { name: 'auditor' } });
  t.equal(created.statusCode, 201);
  const auditor = created.json().role;
  t.match(auditor, { name: 'auditor', domain_id: null, description: null, options: {} });
  const duplicate = await call('POST', '/v3/roles', { role: { name: 'auditor' } });
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, 'Conflict occurred attempting to store role - Duplicate entry found with name auditor.');

  const domainRole = await call('POST', '/v3/roles', { role: { name: 'auditor', domain_id: 'default' } });
  t.equal(domainRole.statusCode, 201, 'a domain role may reuse a global name');
  t.same((await call('GET', '/v3/roles?name=auditor')).json().roles.map((r: { id: string }) => r.id), [auditor.id], 'global roles only by default');
  t.same((await call('GET', '/v3/roles?domain_id=default')).json().roles.map((r: { id: string }) => r.id), [domainRole.json().role.id]);

  const immutable = await call('PATCH', `/v3/roles/${byName.admin}`, { role: { description: 'x' } });
  t.equal(immutable.statusCode, 403);
  t.match(immutable.json().error.message, /^Unable to update immutable role resource: `/);
  t.equal((await call('DELETE', `/v3/roles/${byName.admin}`)).statusCode, 403);

  const implies = await call('PUT', `/v3/roles/${auditor.id}/implies/${byName.reader}`);
  t.equal(implies.statusCode, 201);
  t.match(implies.json(), {
    role_inference: { prior_role: { id: auditor.id, name: 'auditor' }, implies: { id: byName.reader, name: 'reader' } },
  });
  t.equal((await call('HEAD', `/v3/roles/${auditor.id}/implies/${byName.reader}`)).statusCode, 204);
  t.equal((await call('GET', `/v3/roles/${auditor.id}/implies/${byName.reader}`)).statusCode, 200);
  const notImplied = await call('GET', `/v3/roles/${auditor.id}/implies/${byName.member}`);
  t.equal(notImplied.statusCode, 404);
  t.equal(notImplied.json().error.message, `${auditor.id} does not imply ${byName.member}.`);
  const prohibited = await call('PUT', `/v3/roles/${auditor.id}/implies/${byName.admin}`);
  t.equal(prohibited.statusCode, 403);
  t.equal(prohibited.json().error.message, `${byName.admin} cannot be an implied roles.`);

  const list = await call('GET', `/v3/roles/${auditor.id}/implies`);
  t.same(list.json().role_inference.implies.map((r: { id: string }) => r.id), [byName.reader]);
  const inferences = (await call('GET', '/v3/role_inferences')).json().role_inferences;
  const priorNames = inferences.map((entry: { prior_role: { name: string } }) => entry.prior_role.name).sort();
  t.same(priorNames, ['admin', 'auditor', 'member']);

  // Keystone does not refuse cycles; expansion must still terminate.
  t.equal((await call('PUT', `/v3/roles/${byName.reader}/implies/${auditor.id}`)).statusCode, 201);
  const project = (await call('POST', '/v3/projects', { project: { name: 'cyc' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'cyc-user' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${byName.member}`)).statusCode, 204);
  const effective = await call('GET', `/v3/role_assignments?user.id=${user.id}&effective`);
  t.same(effective.json().role_assignments.map((a: { role: { id: string } }) => a.role.id).sort(), [byName.member, byName.reader, auditor.id].sort());

  t.equal((await call('DELETE', `/v3/roles/${auditor.id}/implies/${byName.reader}`)).statusCode, 204);
  t.equal((await call('DELETE', `/v3/roles/${auditor.id}`)).statusCode, 204);
  t.equal((await call('GET', `/v3/roles/${auditor.id}`)).statusCode, 404);
});

// What Keystone 22 answered for each combination (recorded against the peer, see
// test/e2e/roles-keystone.test.ts): role kinds × grant targets × actors, implications, lists.
t.test('domain-specific roles: grants, implications, lists and tokens as Keystone 22', async (t) => {
  const { call } = await startTestApp(t);
  const must = async (method: 'POST' | 'PUT', url: string, body?: unknown) => {
    const reply = await call(method, url, body);
    t.ok(reply.statusCode < 300, `${method} ${url}: ${reply.statusCode} ${reply.body}`);
    return reply.statusCode === 204 ? undefined : reply.json();
  };
  const dA = (await must('POST', '/v3/domains', { domain: { name: 'dr-A' } })).domain.id as string;
  const dB = (await must('POST', '/v3/domains', { domain: { name: 'dr-B' } })).domain.id as string;
  const pA = (await must('POST', '/v3/projects', { project: { name: 'dr-pA', domain_id: dA } })).project.id as string;
  const pB = (await must('POST', '/v3/projects', { project: { name: 'dr-pB', domain_id: dB } })).project.id as string;
  const uA = (await must('POST', '/v3/users', { user: { name: 'dr-uA', domain_id: dA, password: 'pw-secret' } })).user.id as string;
  const uB = (await must('POST', '/v3/users', { user: { name: 'dr-uB', domain_id: dB } })).user.id as string;
  const gA = (await must('POST', '/v3/groups', { group: { name: 'dr-gA', domain_id: dA } })).group.id as string;
  const gB = (await must('POST', '/v3/groups', { group: { name: 'dr-gB', domain_id: dB } })).group.id as string;
  const role = async (name: string, domainId?: string) =>
    (await must('POST', '/v3/roles', { role: { name, ...(domainId ? { domain_id: domainId } : {}) } })).role.id as string;
  const rG = await role('dr-rG');
  const rG2 = await role('dr-rG2');
  const rA = await role('dr-rA', dA);
  const rA2 = await role('dr-rA2', dA);
  const rB = await role('dr-rB', dB);

  const actors = [['users', uA], ['users', uB], ['groups', gA], ['groups', gB]] as const;
  const cases: [role: string, roleDomain: string | null, target: string, targetDomain: string | null][] = [];
  for (const [id, domain] of [[rG, null], [rA, dA], [rB, dB]] as const) {
    cases.push([id, domain, `projects/${pA}`, dA], [id, domain, `projects/${pB}`, dB], [id, domain, `domains/${dA}`, null], [id, domain, `domains/${dB}`, null], [id, domain, 'system', null]);
  }
  for (const [roleId, roleDomain, target, projectDomain] of cases) {
    for (const [kind, actor] of actors) {
      const url = `/v3/${target}/${kind}/${actor}/roles/${roleId}`;
      const reply = await call('PUT', url);
      if (roleDomain && target === 'system') {
        t.equal(reply.statusCode, 400, url);
        t.equal(reply.json().error.message, `Role ${roleId} is a domain-specific role. Unable to use a domain-specific role in a system assignment.`);
        t.equal((await call('HEAD', url)).statusCode, 404, `check ${url}`);
      } else if (roleDomain && projectDomain && roleDomain !== projectDomain) {
        t.equal(reply.statusCode, 403, url);
        t.equal(reply.json().error.message, `Project ${target.split('/')[1]} must be in the same domain as the role ${roleId} being assigned.`);
        t.equal((await call('HEAD', url)).statusCode, 404, `check ${url}`);
        t.equal((await call('DELETE', url)).statusCode, 404, `remove ${url}`);
      } else {
        t.equal(reply.statusCode, 204, url);
        t.equal((await call('HEAD', url)).statusCode, 204, `check ${url}`);
      }
      if (target.startsWith('domains/')) {
        t.equal((await call('PUT', `/v3/OS-INHERIT/${target}/${kind}/${actor}/roles/${roleId}/inherited_to_projects`)).statusCode, 204, `inherited ${url}`);
      }
    }
  }

  const implication = (prior: string, implied: string) => call('PUT', `/v3/roles/${prior}/implies/${implied}`);
  t.equal((await implication(rG, rG2)).statusCode, 201, 'global → global');
  const globalToDomain = await implication(rG, rA);
  t.equal(globalToDomain.statusCode, 403, 'global → domain-specific');
  t.equal(globalToDomain.json().error.message, `${rA} cannot be an implied roles.`);
  for (const implied of [rG, rA2, rB]) t.equal((await implication(rA, implied)).statusCode, 201, `domain-specific → ${implied}`);
  const implied = (await call('GET', `/v3/roles/${rA}/implies`)).json().role_inference.implies.map((r: { id: string }) => r.id);
  t.same(implied.sort(), [rG, rA2, rB].sort());

  const listed = async (query: string) =>
    (await call('GET', `/v3/roles${query}`)).json().roles.map((r: { name: string }) => r.name).filter((name: string) => name.startsWith('dr-')).sort();
  t.same(await listed(''), ['dr-rG', 'dr-rG2'], 'global roles only without domain_id');
  t.same(await listed(`?domain_id=${dA}`), ['dr-rA', 'dr-rA2']);
  t.same(await listed(`?domain_id=${dB}`), ['dr-rB']);
  t.same(await listed('?domain_id='), []);
  t.same(await listed('?domain_id=no-such-domain'), []);
  t.same(await listed('?name=dr-rA'), []);
  t.same(await listed(`?name=dr-rA&domain_id=${dA}`), ['dr-rA']);

  // Effective assignments and tokens leave domain-specific roles out, not what they imply.
  const effective = async (query: string) =>
    (await call('GET', `/v3/role_assignments?effective&${query}`)).json().role_assignments.map((a: { role: { id: string } }) => a.role.id);
  const onProject = await effective(`user.id=${uA}&scope.project.id=${pA}`);
  t.ok(onProject.length > 0);
  t.same([...new Set(onProject)].sort(), [rG, rG2].sort(), 'only global roles, implied ones included');
  t.same(await effective(`role.id=${rA}`), [], 'no effective entry of a domain-specific role');
  t.equal((await call('DELETE', `/v3/projects/${pA}/users/${uA}/roles/${rG}`)).statusCode, 204);
  const auth = await call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['password'], password: { user: { id: uA, password: 'pw-secret' } } }, scope: { project: { id: pA } } },
  });
  t.equal(auth.statusCode, 201);
  t.same(auth.json().token.roles.map((r: { name: string }) => r.name).sort(), ['dr-rG', 'dr-rG2'], 'what rA implies, not rA');
});
