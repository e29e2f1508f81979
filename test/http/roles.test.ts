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
