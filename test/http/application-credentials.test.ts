import t from 'tap';
import { ApplicationCredentialEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('application credentials (API keys)', async (t) => {
  const { call, login, app, clock } = await startTestApp(t);
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'apiproj' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'bot-owner', password: 'Pw-1' } })).json().user;
  const other = (await call('POST', '/v3/users', { user: { name: 'other', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const base = `/v3/users/${user.id}/application_credentials`;

  const created = await call('POST', base, { application_credential: { name: 'ci-bot', description: 'ci' } }, session);
  t.equal(created.statusCode, 201);
  const credential = created.json().application_credential;
  t.match(credential, { name: 'ci-bot', description: 'ci', user_id: user.id, project_id: project.id, system: null, expires_at: null, unrestricted: null });
  t.match(credential.secret, /^[A-Za-z0-9_-]{86}$/);
  t.same(credential.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader'], 'default: the roles of the creating token');
  t.notOk('access_rules' in credential);
  t.equal(credential.links.self, `${PUBLIC_URL}/v3/application_credentials/${credential.id}`);
  const row = await app.store.reader().findOne(ApplicationCredentialEntity, { id: credential.id });
  t.match(row?.secretHash, /^\$hmac-sha256\$/, 'secret stored as a keyed hash, never in clear');
  t.notOk(row?.secretHash.includes(credential.secret));

  const got = await call('GET', `${base}/${credential.id}`, undefined, session);
  t.equal(got.statusCode, 200);
  t.notOk('secret' in got.json().application_credential, 'the secret is shown once');
  t.same((await call('GET', base, undefined, session)).json().application_credentials.map((c: { id: string }) => c.id), [credential.id]);
  t.equal((await call('POST', base, { application_credential: { name: 'ci-bot' } }, session)).statusCode, 409);
  t.equal((await call('POST', `/v3/users/${other.id}/application_credentials`, { application_credential: { name: 'x' } }, session)).statusCode, 403);
  const unassigned = await call('POST', base, { application_credential: { name: 'x', roles: [{ name: 'admin' }] } }, session);
  t.equal(unassigned.statusCode, 400);
  t.equal(unassigned.json().error.message, 'Invalid application credential: Cannot create an application credential with unassigned role');
  const past = await call('POST', base, { application_credential: { name: 'x', expires_at: '2000-01-01T00:00:00Z' } }, session);
  t.equal(past.statusCode, 400);
  t.equal((await call('POST', base, { application_credential: { name: 'x', bogus: 1 } }, session)).statusCode, 400);

  // Authentication by id, or by name and user.
  const byId = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } } } }, null);
  t.equal(byId.statusCode, 201);
  const token = byId.json().token;
  t.same(token.methods, ['application_credential']);
  t.equal(token.project.id, project.id);
  t.same(token.application_credential, { id: credential.id, name: 'ci-bot', restricted: true });
  t.same(token.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader']);
  const byName = await call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['application_credential'], application_credential: { name: 'ci-bot', user: { name: 'bot-owner', domain: { id: 'default' } }, secret: credential.secret } } },
  }, null);
  t.equal(byName.statusCode, 201);
  const wrong = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: 'nope' } } } }, null);
  t.equal(wrong.statusCode, 401);
  t.equal(wrong.json().error.message, 'The request you have made requires authentication.');
  const scoped = await call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } }, scope: { project: { id: project.id } } },
  }, null);
  t.equal(scoped.statusCode, 401);
  t.equal(scoped.json().error.message, 'Error authenticating with application credential: Application credentials cannot request a scope.');
  t.same(scoped.json().error.identity, {});

  // A restricted credential's token cannot make more credentials.
  const keyToken = String(byId.headers['x-subject-token']);
  const nested = await call('POST', base, { application_credential: { name: 'nested' } }, keyToken);
  t.equal(nested.statusCode, 403);
  t.match(nested.json().error.message, /Using method 'application_credential' is not allowed for managing additional application credentials/);

  // Losing the role on the project takes it out of the credential's tokens.
  const readerOnly = await call('POST', base, { application_credential: { name: 'reader-only', roles: [{ id: roles.reader }] } }, session);
  t.equal(readerOnly.statusCode, 201);
  const readerToken = await call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['application_credential'], application_credential: { id: readerOnly.json().application_credential.id, secret: readerOnly.json().application_credential.secret } } },
  }, null);
  t.same(readerToken.json().token.roles.map((r: { name: string }) => r.name), ['reader']);

  // Deleting the credential invalidates its tokens at once.
  const validate = (subject: string, headers: Record<string, string> = {}) => call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject, ...headers });
  t.equal((await validate(keyToken)).statusCode, 200);
  t.equal((await call('DELETE', `${base}/${credential.id}`, undefined, session)).statusCode, 204);
  t.equal((await validate(keyToken)).statusCode, 404);
  t.equal((await call('GET', `${base}/${credential.id}`, undefined, session)).json().error.message, `Could not find Application Credential: ${credential.id}.`);

  await call('DELETE', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
  t.equal((await validate(String(readerToken.headers['x-subject-token']))).statusCode, 404, 'no role left on the project');

  // Expiry caps the token and ends the credential.
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`);
  // A token issued in the same second as a revocation counts as revoked, as in Keystone.
  clock.advance(1000);
  const fresh = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const expiry = new Date(clock.now() + 600_000);
  const short = await call('POST', base, { application_credential: { name: 'short', expires_at: expiry.toISOString() } }, fresh);
  t.equal(short.statusCode, 201);
  t.match(short.json().application_credential.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/);
  const shortAuth = { auth: { identity: { methods: ['application_credential'], application_credential: { id: short.json().application_credential.id, secret: short.json().application_credential.secret } } } };
  const shortToken = await call('POST', '/v3/auth/tokens', shortAuth, null);
  t.equal(Date.parse(shortToken.json().token.expires_at), Math.floor(expiry.getTime() / 1000) * 1000);
  clock.advance(601_000);
  t.equal((await call('POST', '/v3/auth/tokens', shortAuth, null)).statusCode, 401);
});

t.test('access rules travel in the token and need a validator that enforces them', async (t) => {
  const { call, login } = await startTestApp(t);
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'rules' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'ruled', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const rule = { service: 'compute', method: 'GET', path: '/v2.1/servers/*' };
  const created = await call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'ruled', access_rules: [rule] } }, session);
  t.equal(created.statusCode, 201);
  t.match(created.json().application_credential.access_rules, [rule]);
  const ruleId = created.json().application_credential.access_rules[0].id;
  const again = await call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'ruled-2', access_rules: [{ id: ruleId }] } }, session);
  t.equal(again.json().application_credential.access_rules[0].id, ruleId, 'rules are reused by id');

  const token = await call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['application_credential'], application_credential: { id: created.json().application_credential.id, secret: created.json().application_credential.secret } } },
  }, null);
  t.match(token.json().token.application_credential.access_rules, [rule]);
  const subject = String(token.headers['x-subject-token']);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject })).statusCode, 404, 'no OpenStack-Identity-Access-Rules header');
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject, 'openstack-identity-access-rules': '1' })).statusCode, 200);

  const rules = await call('GET', `/v3/users/${user.id}/access_rules?service=compute`, undefined, session);
  t.same(rules.json().access_rules.map((r: { id: string }) => r.id), [ruleId]);
  t.equal((await call('GET', `/v3/users/${user.id}/access_rules/${ruleId}`, undefined, session)).json().access_rule.path, '/v2.1/servers/*');
  const inUse = await call('DELETE', `/v3/users/${user.id}/access_rules/${ruleId}`, undefined, session);
  t.equal(inUse.statusCode, 403);
  t.equal(inUse.json().error.message, 'May not delete access rule in use');
  await call('DELETE', `/v3/users/${user.id}/application_credentials/${created.json().application_credential.id}`, undefined, session);
  await call('DELETE', `/v3/users/${user.id}/application_credentials/${again.json().application_credential.id}`, undefined, session);
  t.equal((await call('DELETE', `/v3/users/${user.id}/access_rules/${ruleId}`, undefined, session)).statusCode, 204);
});

t.test('secrets hashed by Keystone (bcrypt) still verify', async (t) => {
  const { call, app } = await startTestApp(t);
  const admin = (await call('GET', '/v3/users?name=admin')).json().users[0];
  const adminProject = (await call('GET', '/v3/projects?name=admin')).json().projects[0];
  const created = await call('POST', `/v3/users/${admin.id}/application_credentials`, { application_credential: { name: 'imported' } });
  t.equal(created.statusCode, 201);
  const id = created.json().application_credential.id;
  await app.store.transaction(async (em) => {
    const row = await em.findOneOrFail(ApplicationCredentialEntity, { id });
    row.secretHash = '$2b$04$AB4xevxSs7wAj01juayWkuWRc4HPwWtsQS7g68W1IMMwna4oY4EZi';
    await em.flush();
  });
  const auth = (secret: string) =>
    call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id, secret } } } }, null);
  t.equal((await auth('imported-secret')).statusCode, 201);
  t.equal((await auth('imported-secret')).json().token.project.id, adminProject.id);
  t.equal((await auth('wrong')).statusCode, 401);
});
