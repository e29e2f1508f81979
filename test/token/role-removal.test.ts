import t from 'tap';
import { startTestApp } from '../helpers/app.ts';
import { LOCAL_POSTGRES } from '../helpers/database.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Removing a role takes that role out of the user's tokens, as in Keystone 22: roles are what the
// user holds when the token is validated; a token goes only when nothing is left on its scope.
// (test/e2e/role-removal-keystone.test.ts runs the same steps against a real Keystone.)

t.test('a removed role leaves the tokens valid with the roles that remain, on /v3 and at the gateway', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const user = (await call('POST', '/v3/users', { user: { name: 'two-roles', password: 'Pw-1' } })).json().user;
  for (const role of ['member', 'reader']) t.equal((await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles[role]}`)).statusCode, 204);
  const session = await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } });
  t.same(session.body.token.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader']);
  const token = session.token;
  const credential = async (name: string, credentialRoles?: string[]) => {
    const created = await call(
      'POST',
      `/v3/users/${user.id}/application_credentials`,
      { application_credential: { name, ...(credentialRoles ? { roles: credentialRoles.map((role) => ({ name: role })) } : {}) } },
      token,
    );
    t.equal(created.statusCode, 201, created.body);
    const { id, secret } = created.json().application_credential;
    const auth = { auth: { identity: { methods: ['application_credential'], application_credential: { id, secret } } } };
    const issued = await call('POST', '/v3/auth/tokens', auth, null);
    t.equal(issued.statusCode, 201);
    return { auth, token: String(issued.headers['x-subject-token']) };
  };
  const allRoles = await credential('all-roles');
  const memberOnly = await credential('member-only', ['member']);
  const validate = (subject: string) => call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject });
  const roleNames = (answer: { json(): any }) => answer.json().token.roles.map((r: { name: string }) => r.name).sort();
  const things = `/echo/v1/${w.projectId}/things`;

  // Cached at the gateway with both roles: a member may POST.
  t.equal((await rawRequest(w.port, { method: 'POST', path: things, headers: { 'x-auth-token': token }, body: '{}' })).status, 201);
  t.equal((await rawRequest(w.port, { method: 'POST', path: things, headers: { 'x-auth-token': allRoles.token }, body: '{}' })).status, 201);

  t.equal((await call('DELETE', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);

  const after = await validate(token);
  t.equal(after.statusCode, 200, 'the project token still validates');
  t.same(roleNames(after), ['reader'], 'with the role that remains');
  const credentialAfter = await validate(allRoles.token);
  t.equal(credentialAfter.statusCode, 200, "an application credential's token too");
  t.same(roleNames(credentialAfter), ['reader']);
  t.equal((await validate(memberOnly.token)).statusCode, 404, 'a credential whose only role was removed: nothing left, not valid');
  t.equal((await call('POST', '/v3/auth/tokens', memberOnly.auth, null)).statusCode, 401, 'and it cannot authenticate');
  const reissued = await call('POST', '/v3/auth/tokens', allRoles.auth, null);
  t.equal(reissued.statusCode, 201);
  t.same(roleNames(reissued), ['reader']);

  // The gateway's cached validations were refreshed by the change: reader's rights only, at once.
  for (const [name, subject] of [['project token', token], ['credential token', allRoles.token]] as const) {
    t.equal((await rawRequest(w.port, { path: things, headers: { 'x-auth-token': subject } })).status, 200, `${name}: a reader may GET`);
    t.equal((await rawRequest(w.port, { method: 'POST', path: things, headers: { 'x-auth-token': subject }, body: '{}' })).status, 403, `${name}: no longer POST`);
  }

  // The partial removal wrote no revocation event (Keystone 22 writes none either): nothing can
  // revoke a token issued in its second, which carries the role that remains (no same-second retry
  // is involved; the last-role case below is the one that needs it).
  t.same((await call('GET', '/v3/OS-REVOKE/events')).json().events.filter((e: { user_id?: string }) => e.user_id === user.id), [], 'no revocation event');
  const fresh = await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } });
  t.equal(fresh.status, 201);
  t.same(fresh.body.token.roles.map((r: { name: string }) => r.name), ['reader']);
  t.equal((await validate(fresh.token)).statusCode, 200, 'a token issued in the second of the removal validates');
  t.equal((await rawRequest(w.port, { path: things, headers: { 'x-auth-token': fresh.token } })).status, 200);

  // The last role: nothing is left on the project, so its tokens go.
  t.equal((await call('DELETE', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.reader}`)).statusCode, 204);
  for (const subject of [token, allRoles.token, fresh.token]) {
    t.equal((await validate(subject)).statusCode, 404, 'no role left on the project');
    t.equal((await rawRequest(w.port, { path: things, headers: { 'x-auth-token': subject } })).status, 401, 'refused at the gateway');
  }
  t.equal((await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).status, 401);

  // Granted again: the old tokens stay revoked (a deliberate difference: Keystone revives them);
  // a new token, in the same second, is good at once.
  t.equal((await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.reader}`)).statusCode, 204);
  t.equal((await validate(token)).statusCode, 404, 'a token that lost every role does not come back');
  const regranted = await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } });
  t.equal(regranted.status, 201);
  t.equal((await validate(regranted.token)).statusCode, 200, 'a token issued in the second of the revocation event validates');
});

t.test('a role removed while it is still held another way changes nothing', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const user = (await call('POST', '/v3/users', { user: { name: 'via-group', password: 'Pw-1' } })).json().user;
  const group = (await call('POST', '/v3/groups', { group: { name: 'members' } })).json().group;
  t.equal((await call('PUT', `/v3/groups/${group.id}/users/${user.id}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/projects/${w.projectId}/groups/${group.id}/roles/${roles.member}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  const token = (await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  t.equal((await call('DELETE', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
  t.equal(validated.statusCode, 200);
  t.ok(validated.json().token.roles.some((r: { name: string }) => r.name === 'member'), 'member, through the group');
  t.same((await call('GET', '/v3/OS-REVOKE/events')).json().events.filter((e: { user_id?: string }) => e.user_id === user.id), [], 'no revocation event');

  // The group grant goes too: nothing left, refused.
  t.equal((await call('DELETE', `/v3/projects/${w.projectId}/groups/${group.id}/roles/${roles.member}`)).statusCode, 204);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token })).statusCode, 404);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 401);
});

t.test('a removed domain role leaves the domain token the roles that remain, and the project tokens alone', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const user = (await call('POST', '/v3/users', { user: { name: 'domain-roles', password: 'Pw-1' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  for (const role of ['member', 'reader']) t.equal((await call('PUT', `/v3/domains/default/users/${user.id}/roles/${roles[role]}`)).statusCode, 204);
  const projectToken = (await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  const domainToken = (await login({ id: user.id }, 'Pw-1', { domain: { id: 'default' } })).token;
  const validate = (subject: string) => call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject });

  t.equal((await call('DELETE', `/v3/domains/default/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  const domainAfter = await validate(domainToken);
  t.equal(domainAfter.statusCode, 200);
  t.same(domainAfter.json().token.roles.map((r: { name: string }) => r.name), ['reader']);

  t.equal((await call('DELETE', `/v3/domains/default/users/${user.id}/roles/${roles.reader}`)).statusCode, 204);
  t.equal((await validate(domainToken)).statusCode, 404, 'nothing left on the domain');
  t.equal((await validate(projectToken)).statusCode, 200, "the project token, in the user's own domain, is untouched");
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': projectToken } })).status, 200);
});

t.test('two concurrent removals of the last two roles: the second sees nothing left and writes the event (PostgreSQL)', async (t) => {
  // Under READ COMMITTED each removal still saw the other's row, and neither wrote the event.
  const app = await startTestApp(t, {}, { databaseServer: process.env.TEST_DATABASE_URL || LOCAL_POSTGRES });
  const { call } = app;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'race-p' } })).json().project;
  for (let round = 0; round < 8; round++) {
    const user = (await call('POST', '/v3/users', { user: { name: `race-${round}`, password: 'Pw-1' } })).json().user;
    for (const role of ['member', 'reader']) await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles[role]}`);
    // The service directly: both transactions start in the same tick and interleave query by query.
    await Promise.all(['member', 'reader'].map((role) => app.app.assignments.revokeGrant({ actorType: 'user', actorId: user.id, targetType: 'project', targetId: project.id, roleId: roles[role] })));
    t.same((await call('GET', `/v3/projects/${project.id}/users/${user.id}/roles`)).json().roles, [], 'both removed');
    const events = (await call('GET', '/v3/OS-REVOKE/events')).json().events.filter((e: { user_id?: string }) => e.user_id === user.id);
    t.same(events.map((e: { project_id?: string }) => e.project_id), [project.id], `round ${round}: one event for the user and project`);
  }
});
