import t from 'tap';
import type { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';

const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };

t.test('password tokens: scopes and bodies', async (t) => {
  const { call, login, request } = await startTestApp(t);
  const admin = { name: 'admin', domain: { name: 'Default' } };

  const unscoped = await login(admin, ADMIN_PASSWORD);
  t.equal(unscoped.status, 201);
  t.match(unscoped.token, /^gAAAAA[A-Za-z0-9_-]+$/);
  t.same(Object.keys(unscoped.body.token).sort(), ['audit_ids', 'expires_at', 'issued_at', 'methods', 'user']);
  t.same(unscoped.body.token.methods, ['password']);
  t.match(unscoped.body.token.user, { name: 'admin', domain: { id: 'default', name: 'Default' }, password_expires_at: null });
  t.match(unscoped.body.token.audit_ids[0], /^[A-Za-z0-9_-]{22}$/);
  const issued = Date.parse(unscoped.body.token.issued_at);
  t.equal(Date.parse(unscoped.body.token.expires_at) - issued, 3600_000, 'one hour by default');
  t.match(unscoped.body.token.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000000Z$/);

  const project = await login(admin, ADMIN_PASSWORD, { project: { name: 'admin', domain: { name: 'Default' } } });
  t.equal(project.status, 201);
  t.match(project.body.token, { project: { name: 'admin', domain: { id: 'default', name: 'Default' } }, is_domain: false });
  t.same(project.body.token.roles.map((r: { name: string }) => r.name).sort(), ['admin', 'member', 'reader']);
  t.ok(project.body.token.catalog.some((s: { type: string }) => s.type === 'identity'));
  const byProjectId = await login({ id: project.body.token.user.id }, ADMIN_PASSWORD, { project: { id: project.body.token.project.id } });
  t.equal(byProjectId.status, 201);

  const domain = await call('PUT', `/v3/domains/default/users/${project.body.token.user.id}/roles/${project.body.token.roles[0].id}`);
  t.equal(domain.statusCode, 204);
  const domainToken = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { domain: { name: 'Default' } });
  t.equal(domainToken.status, 201);
  t.same(domainToken.body.token.domain, { id: 'default', name: 'Default' });
  t.notOk('project' in domainToken.body.token);

  const system = await login(admin, ADMIN_PASSWORD, { system: { all: true } });
  t.equal(system.status, 201);
  t.same(system.body.token.system, { all: true });

  const explicit = await login(admin, ADMIN_PASSWORD, 'unscoped');
  t.notOk('roles' in explicit.body.token);

  const noCatalog = await request({
    method: 'POST',
    url: '/v3/auth/tokens?nocatalog',
    payload: { auth: { identity: { methods: ['password'], password: { user: { ...admin, password: ADMIN_PASSWORD } } }, scope: { system: { all: true } } } },
  });
  t.equal(noCatalog.statusCode, 201);
  t.notOk('catalog' in noCatalog.json().token);

  // The user's default project is used when no scope is asked for and the user has a role there.
  const user = (await call('POST', '/v3/users', { user: { name: 'def', password: 'Pw-1', default_project_id: project.body.token.project.id } })).json().user;
  t.notOk('project' in (await login({ id: user.id }, 'Pw-1')).body.token, 'no role there yet: unscoped');
  await call('PUT', `/v3/projects/${project.body.token.project.id}/users/${user.id}/roles/${project.body.token.roles.find((r: { name: string }) => r.name === 'reader').id}`);
  t.equal((await login({ id: user.id }, 'Pw-1')).body.token.project.id, project.body.token.project.id);
});

t.test('token request errors', async (t) => {
  const { call, login } = await startTestApp(t);
  const post = (body: unknown) => call('POST', '/v3/auth/tokens', body, null);
  const password = (user: unknown) => ({ auth: { identity: { methods: ['password'], password: { user } } } });

  const noAuth = await post({});
  t.equal(noAuth.statusCode, 400);
  t.match(noAuth.json().error.message, /^Expecting to find auth in request body/);
  t.equal((await post({ auth: { identity: { methods: 'password' } } })).statusCode, 400);
  const missingPayload = await post({ auth: { identity: { methods: ['password'] } } });
  t.equal(missingPayload.statusCode, 400);
  t.match(missingPayload.json().error.message, /^Expecting to find password in identity/);
  const unsupported = await post({ auth: { identity: { methods: ['external'], external: {} } } });
  t.equal(unsupported.statusCode, 401);
  t.same(unsupported.json().error.identity, { methods: ['password', 'token', 'application_credential', 'oauth1', 'totp', 'mapped', 'openid', 'saml2'] });
  t.equal(unsupported.json().error.message, 'Attempted to authenticate with an unsupported method.');
  const noDomain = await post(password({ name: 'admin', password: 'x' }));
  t.equal(noDomain.statusCode, 400);
  t.match(noDomain.json().error.message, /^Expecting to find domain in user/);
  const noIdOrName = await post(password({ password: 'x' }));
  t.equal(noIdOrName.json().error.message, 'Invalid input for field identity/password/user: id or name must be present.');
  const twoScopes = await post({ ...password({ name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD }), auth: { ...password({ name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD }).auth, scope: { project: { id: 'x' }, domain: { id: 'y' } } } });
  t.equal(twoScopes.statusCode, 400);
  const projectNoDomain = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { project: { name: 'admin' } });
  t.equal(projectNoDomain.status, 400);
  t.match(projectNoDomain.body.error.message, /^Expecting to find domain in project/);

  // Every failure to authenticate looks the same.
  const user = (await call('POST', '/v3/users', { user: { name: 'victim', password: 'Right-1' } })).json().user;
  const disabled = (await call('POST', '/v3/users', { user: { name: 'off', password: 'Right-1', enabled: false } })).json().user;
  const failures = [
    await login({ id: user.id }, 'wrong'),
    await login({ id: 'nobody' }, 'Right-1'),
    await login({ name: 'nobody', domain: { id: 'default' } }, 'Right-1'),
    await login({ name: 'victim', domain: { name: 'NoSuchDomain' } }, 'Right-1'),
    await login({ id: disabled.id }, 'Right-1'),
    await login({ id: user.id }, 'Right-1', { project: { id: 'nope' } }),
    await login({ id: user.id }, 'Right-1', { project: { name: 'admin', domain: { id: 'default' } } }),
    await login({ id: user.id }, 'Right-1', { system: { all: true } }),
  ];
  for (const [index, failure] of failures.entries()) {
    t.equal(failure.status, 401, `failure ${index}`);
    t.same(failure.body, GENERIC_401, `failure ${index} body`);
    t.equal(failure.token, '', 'no token');
  }
});

t.test('validate, check, revoke, expiry and re-scoping', async (t) => {
  const { call, login, clock, adminToken } = await startTestApp(t);
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'vp' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'vu', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  const userToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;

  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': userToken, 'openstack-identity-access-rules': '1' });
  t.equal(validated.statusCode, 200);
  t.equal(validated.headers['x-subject-token'], userToken);
  t.match(validated.json().token, { user: { id: user.id, name: 'vu' }, project: { id: project.id, name: 'vp' } });
  t.same(validated.json().token.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader']);
  t.ok(validated.json().token.catalog);
  t.notOk('catalog' in (await call('GET', '/v3/auth/tokens?nocatalog', undefined, undefined, { 'x-subject-token': userToken })).json().token);

  const head = await call('HEAD', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': userToken });
  t.equal(head.statusCode, 200);
  t.equal(head.body, '');
  t.equal(head.headers['x-subject-token'], userToken);

  const noSubject = await call('GET', '/v3/auth/tokens');
  t.equal(noSubject.statusCode, 404);
  t.equal(noSubject.json().error.message, 'No token in the request');
  const garbage = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': 'gAAAAABnot-a-token' });
  t.equal(garbage.statusCode, 404, 'keystonemiddleware needs 404, not 401, for a bad subject token');
  t.equal(garbage.json().error.message, 'Could not recognize Fernet token');

  // A user may validate its own token but not somebody else's.
  t.equal((await call('GET', '/v3/auth/tokens', undefined, userToken, { 'x-subject-token': userToken })).statusCode, 200);
  const other = await call('GET', '/v3/auth/tokens', undefined, userToken, { 'x-subject-token': adminToken });
  t.equal(other.statusCode, 403);
  t.equal(other.json().error.message, 'You are not authorized to perform the requested action: identity:validate_token.');

  // Re-scope: unscoped token → project token keeps expiry and the audit chain.
  const unscoped = await login({ id: user.id }, 'Pw-1');
  clock.advance(60_000);
  const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped.token } }, scope: { project: { id: project.id } } } }, null);
  t.equal(rescoped.statusCode, 201);
  t.same(rescoped.json().token.methods, ['token', 'password']);
  t.equal(rescoped.json().token.expires_at, unscoped.body.token.expires_at);
  t.equal(rescoped.json().token.audit_ids.length, 2);
  t.equal(rescoped.json().token.audit_ids[1], unscoped.body.token.audit_ids[0]);
  const badSource = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: 'garbage' } } } }, null);
  t.equal(badSource.statusCode, 404);

  // Expiry, and allow_expired for services.
  clock.advance(3600_000);
  const expired = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': userToken });
  t.equal(expired.statusCode, 401, 'the admin token used to ask has expired too');
  const freshAdmin = (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { project: { name: 'admin', domain: { id: 'default' } } })).token;
  const expiredSubject = await call('GET', '/v3/auth/tokens', undefined, freshAdmin, { 'x-subject-token': userToken });
  t.equal(expiredSubject.statusCode, 404);
  t.equal(expiredSubject.json().error.message, 'Failed to validate token');
  t.equal((await call('GET', '/v3/auth/tokens?allow_expired=1', undefined, freshAdmin, { 'x-subject-token': userToken })).statusCode, 200);
  t.equal((await call('GET', '/v3/users', undefined, userToken)).statusCode, 401, 'an expired X-Auth-Token is a 401');

  // Revocation of one token.
  const victim = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const sibling = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  t.equal((await call('DELETE', '/v3/auth/tokens', undefined, freshAdmin, { 'x-subject-token': victim })).statusCode, 204);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, freshAdmin, { 'x-subject-token': victim })).statusCode, 404);
  t.equal((await call('GET', '/v3/auth/projects', undefined, victim)).statusCode, 401);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, freshAdmin, { 'x-subject-token': sibling })).statusCode, 200, 'only that token');
  const events = await call('GET', '/v3/OS-REVOKE/events', undefined, freshAdmin);
  t.equal(events.statusCode, 200);
  t.ok(events.json().events.some((event: { audit_id?: string }) => typeof event.audit_id === 'string'));

  // Disabling the project or its domain invalidates its tokens at once.
  t.equal((await call('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } }, freshAdmin)).statusCode, 200);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, freshAdmin, { 'x-subject-token': sibling })).statusCode, 404);
  t.equal((await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).status, 401);
});

t.test('tokens survive key rotation; a key rotated out stops validating', async (t) => {
  const { call, login, app } = await startTestApp(t, { FERNET_MAX_ACTIVE_KEYS: '3' });
  const before = (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD)).token;
  const provider = app.tokenProvider as FernetTokenProvider;
  const repository = provider.repository;
  repository.rotate();
  provider.reload();
  const adminLogin = async () => (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } })).token;
  // The caller's token is fresh each time: the admin token of the test setup is rotated out too.
  const validate = async (token: string) => call('GET', '/v3/auth/tokens', undefined, await adminLogin(), { 'x-subject-token': token });
  t.equal((await validate(before)).statusCode, 200, 'issued with the previous primary');
  const after = (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD)).token;
  repository.rotate();
  provider.reload();
  t.equal((await validate(after)).statusCode, 200);
  const gone = await validate(before);
  t.equal(gone.statusCode, 404, 'its key is gone after two more rotations with three active keys');
  t.equal(gone.json().error.message, 'Could not recognize Fernet token');
});

t.test('scopes the caller may use, and its catalog', async (t) => {
  const { call, login } = await startTestApp(t);
  const projects = await call('GET', '/v3/auth/projects');
  t.equal(projects.statusCode, 200);
  t.same(projects.json().projects.map((p: { name: string }) => p.name), ['admin']);
  t.equal(projects.json().links.self, `${PUBLIC_URL}/v3/auth/projects`);
  t.same((await call('GET', '/v3/auth/domains')).json().domains, []);
  t.same((await call('GET', '/v3/auth/system')).json().system, [{ all: true }]);

  const user = (await call('POST', '/v3/users', { user: { name: 'nobody', password: 'Pw-1' } })).json().user;
  const unscoped = (await login({ id: user.id }, 'Pw-1')).token;
  t.same((await call('GET', '/v3/auth/projects', undefined, unscoped)).json().projects, []);
  t.same((await call('GET', '/v3/auth/system', undefined, unscoped)).json().system, []);
  const catalog = await call('GET', '/v3/auth/catalog', undefined, unscoped);
  t.equal(catalog.statusCode, 403, 'an unscoped token has no catalog');
  t.equal(catalog.json().error.message, 'You are not authorized to perform the requested action.');
});

t.test('the scope of a token request: its forms, with the messages Keystone 22 gives (its auth schema)', async (t) => {
  const { call } = await startTestApp(t);
  const asked = async (scope: unknown) => {
    const answer = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } }, scope } }, null);
    return { status: answer.statusCode, first: String(answer.json().error?.message ?? '').split('\n')[0] };
  };
  const EXPECTING = 'Expecting to find system, project, domain, OS-TRUST:trust or unscoped in scope. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.';
  // Each answer as the real Keystone 22 gave it here (the first line of its message).
  const cases: [unknown, string][] = [
    [5, "Invalid input for field 'scope': 5 is not of type 'object', 'string'"],
    [[], "Invalid input for field 'scope': [] is not of type 'object', 'string'"],
    ['x', EXPECTING],
    [{ project: 5 }, "Invalid input for field 'scope/project': 5 is not of type 'object'"],
    [{ project: { id: 5 } }, "Invalid input for field 'scope/project/id': 5 is not of type 'string'"],
    [{ system: { all: 'yes' } }, "Invalid input for field 'scope/system/all': 'yes' is not of type 'boolean'"],
    [{ 'OS-TRUST:trust': [] }, "Invalid input for field 'scope/OS-TRUST:trust': [] is not of type 'object'"],
    [{ foo: {} }, EXPECTING],
    [{ project: { id: 'x' }, domain: { id: 'y' } }, EXPECTING],
  ];
  for (const [scope, message] of cases) {
    t.same(await asked(scope), { status: 400, first: message }, JSON.stringify(scope));
  }
});
