import t from 'tap';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Disabling a project or a domain takes access away, so it records a revocation event (Keystone 22
// does not): tokens issued before stay dead once it is enabled again.

async function validate(app: TestApp, token: string): Promise<number> {
  return (await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token })).statusCode;
}

async function revocationEvents(app: TestApp): Promise<Array<Record<string, string>>> {
  const response = await app.call('GET', '/v3/OS-REVOKE/events');
  if (response.statusCode !== 200) throw new Error(`OS-REVOKE/events: ${response.statusCode}`);
  return response.json().events;
}

async function roleId(app: TestApp, name: string): Promise<string> {
  return (await app.call('GET', `/v3/roles?name=${name}`)).json().roles[0].id;
}

t.test('disabling a project revokes its tokens for good', async (t) => {
  const app = await startTestApp(t);
  const { call, login, clock } = app;
  const member = await roleId(app, 'member');
  const project = (await call('POST', '/v3/projects', { project: { name: 'dis-p' } })).json().project;
  const other = (await call('POST', '/v3/projects', { project: { name: 'dis-other' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'dis-u', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member}`);
  await call('PUT', `/v3/projects/${other.id}/users/${user.id}/roles/${member}`);
  const scoped = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const otherScoped = (await login({ id: user.id }, 'Pw-1', { project: { id: other.id } })).token;
  const credential = await call(
    'POST',
    `/v3/users/${user.id}/application_credentials`,
    { application_credential: { name: 'dis-ac' } },
    scoped,
  );
  t.equal(credential.statusCode, 201);
  const credentialAuth = await app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({
      auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.json().application_credential.id, secret: credential.json().application_credential.secret } } },
    }),
  });
  t.equal(credentialAuth.statusCode, 201);
  const credentialToken = String(credentialAuth.headers['x-subject-token']);
  t.equal(await validate(app, scoped), 200);
  t.equal(await validate(app, credentialToken), 200);

  const unrelated = await call('PATCH', `/v3/projects/${project.id}`, { project: { description: 'still on', enabled: true } });
  t.equal(unrelated.statusCode, 200);
  t.same(await revocationEvents(app), [], 'an update that takes nothing away records nothing');

  clock.advance(1000);
  const disabled = await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } });
  t.equal(disabled.statusCode, 200);
  const events = await revocationEvents(app);
  t.equal(events.length, 1, 'one event, stored in the database');
  t.same(Object.keys(events[0]!).sort(), ['issued_before', 'project_id', 'revoked_at']);
  t.equal(events[0]!.project_id, project.id);
  t.equal(await validate(app, scoped), 404, 'refused while disabled');
  const again = await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false, description: 'off' } });
  t.equal(again.statusCode, 200);
  t.equal((await revocationEvents(app)).length, 1, 'disabling a disabled project takes nothing more away');

  clock.advance(1000);
  const enabled = await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: true } });
  t.equal(enabled.statusCode, 200);
  t.equal(await validate(app, scoped), 404, 'a token from before the disable stays dead after the re-enable');
  t.equal(await validate(app, credentialToken), 404, 'so does an application credential token of the project');
  t.equal(await validate(app, otherScoped), 200, "another project's token is untouched");

  const fresh = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(fresh.status, 201);
  t.equal(await validate(app, fresh.token), 200, 'a token issued after the re-enable is good');
});

t.test('a project disabled and enabled again within one second: the old token stays dead, a new login is good at once', async (t) => {
  const app = await startTestApp(t);
  const { call, login, clock } = app;
  const member = await roleId(app, 'member');
  const project = (await call('POST', '/v3/projects', { project: { name: 'dis-same-second' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'dis-same-second-u', password: 'Pw-1' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member}`)).statusCode, 204);
  // Start at the beginning of a second, so the steps below stay within it (the clock is not moved).
  clock.set(Math.ceil(clock.now() / 1000) * 1000 + 1000);
  const old = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  t.equal(await validate(app, old), 200);
  const second = Math.floor(clock.now() / 1000);
  t.equal((await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } })).statusCode, 200);
  t.equal((await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: true } })).statusCode, 200);
  t.equal(Math.floor(clock.now() / 1000), second, 'all in one second');
  t.equal(await validate(app, old), 404, 'the token from before the disable is dead');
  // The event revokes what was issued in its second: the login waits for the next one.
  const fresh = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(fresh.status, 201);
  t.equal(await validate(app, fresh.token), 200);
});

t.test('disabling a domain revokes the tokens of its users and of its projects', async (t) => {
  const app = await startTestApp(t);
  const { call, login, clock } = app;
  const member = await roleId(app, 'member');
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'dis-d' } })).json().domain;
  const project = (await call('POST', '/v3/projects', { project: { name: 'dis-dp', domain_id: domain.id } })).json().project;
  const inside = (await call('POST', '/v3/users', { user: { name: 'dis-in', password: 'Pw-1', domain_id: domain.id } })).json().user;
  const outside = (await call('POST', '/v3/users', { user: { name: 'dis-out', password: 'Pw-1' } })).json().user;
  const defaultProject = (await call('POST', '/v3/projects', { project: { name: 'dis-default' } })).json().project;
  await call('PUT', `/v3/projects/${project.id}/users/${inside.id}/roles/${member}`);
  await call('PUT', `/v3/projects/${project.id}/users/${outside.id}/roles/${member}`);
  await call('PUT', `/v3/domains/${domain.id}/users/${inside.id}/roles/${member}`);
  await call('PUT', `/v3/projects/${defaultProject.id}/users/${outside.id}/roles/${member}`);
  const tokens = {
    insideUnscoped: (await login({ id: inside.id }, 'Pw-1')).token,
    insideDomain: (await login({ id: inside.id }, 'Pw-1', { domain: { id: domain.id } })).token,
    insideProject: (await login({ id: inside.id }, 'Pw-1', { project: { id: project.id } })).token,
    outsideProject: (await login({ id: outside.id }, 'Pw-1', { project: { id: project.id } })).token,
  };
  const outsideElsewhere = (await login({ id: outside.id }, 'Pw-1', { project: { id: defaultProject.id } })).token;
  for (const [name, token] of Object.entries(tokens)) t.equal(await validate(app, token), 200, `${name} valid`);

  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/domains/${domain.id}`, { domain: { enabled: false } })).statusCode, 200);
  const events = await revocationEvents(app);
  t.equal(events.length, 1);
  t.equal(events[0]!.domain_id, domain.id);
  t.notOk(events[0]!.project_id);
  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/domains/${domain.id}`, { domain: { enabled: true } })).statusCode, 200);
  for (const [name, token] of Object.entries(tokens)) t.equal(await validate(app, token), 404, `${name} stays dead after the re-enable`);
  t.equal(await validate(app, outsideElsewhere), 200, "an outside user's token for a project elsewhere is untouched");
  const fresh = await login({ id: inside.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(fresh.status, 201);
  t.equal(await validate(app, fresh.token), 200, 'a token issued after the re-enable is good');

  // A domain (without projects) disabled through the projects API, as a project acting as a domain.
  const bare = (await call('POST', '/v3/domains', { domain: { name: 'dis-bare' } })).json().domain;
  const bareUser = (await call('POST', '/v3/users', { user: { name: 'dis-bare-u', password: 'Pw-1', domain_id: bare.id } })).json().user;
  const bareToken = (await login({ id: bareUser.id }, 'Pw-1')).token;
  t.equal(await validate(app, bareToken), 200);
  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/projects/${bare.id}`, { project: { enabled: false } })).statusCode, 200);
  const after = await revocationEvents(app);
  t.equal(after.length, 2);
  t.equal(after[1]!.domain_id, bare.id, 'a domain event, whichever API disabled it');
  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/projects/${bare.id}`, { project: { enabled: true } })).statusCode, 200);
  t.equal(await validate(app, bareToken), 404);
});

t.test('the gateway refuses a cached token once its project is disabled, and after the re-enable', async (t) => {
  const w = await gatewayWorld(t);
  const { call, clock } = w.testApp;
  const path = `/echo/v1/${w.projectId}/things`;
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } })).status, 200, 'validated and cached');
  const received = w.upstream.received.length;
  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/projects/${w.projectId}`, { project: { enabled: false } })).statusCode, 200);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } })).status, 401, 'refused while disabled');
  clock.advance(1000);
  t.equal((await call('PATCH', `/v3/projects/${w.projectId}`, { project: { enabled: true } })).statusCode, 200);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } })).status, 401, 'still refused after the re-enable');
  t.equal(w.upstream.received.length, received, 'nothing reached the upstream');
  const fresh = await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } });
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': fresh.token } })).status, 200, 'a new token is forwarded');
});

t.test('removing a user from a group revokes every token of the user, as Keystone does', async (t) => {
  const app = await startTestApp(t);
  const { call, login, clock } = app;
  const member = await roleId(app, 'member');
  const project = (await call('POST', '/v3/projects', { project: { name: 'grp-p' } })).json().project;
  const elsewhere = (await call('POST', '/v3/projects', { project: { name: 'grp-elsewhere' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'grp-u', password: 'Pw-1' } })).json().user;
  const group = (await call('POST', '/v3/groups', { group: { name: 'grp-g' } })).json().group;
  await call('PUT', `/v3/groups/${group.id}/users/${user.id}`);
  await call('PUT', `/v3/projects/${project.id}/groups/${group.id}/roles/${member}`);
  // A direct grant elsewhere: Keystone's event names the user, so that token dies too.
  await call('PUT', `/v3/projects/${elsewhere.id}/users/${user.id}/roles/${member}`);
  const viaGroup = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const direct = (await login({ id: user.id }, 'Pw-1', { project: { id: elsewhere.id } })).token;
  t.equal(await validate(app, viaGroup), 200);
  t.equal(await validate(app, direct), 200);

  clock.advance(1000);
  t.equal((await call('DELETE', `/v3/groups/${group.id}/users/${user.id}`)).statusCode, 204);
  t.equal(await validate(app, viaGroup), 404, 'the token of the group grant');
  t.equal(await validate(app, direct), 404, 'and every other token of the user (a revocation event for the user)');
  t.ok((await revocationEvents(app)).some((event) => event.user_id === user.id), 'OS-REVOKE lists the event');
  clock.advance(1000);
  t.equal((await login({ id: user.id }, 'Pw-1', { project: { id: elsewhere.id } })).status, 201, 'a new login is good');
});
