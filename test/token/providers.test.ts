import t from 'tap';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { loadConfig } from '../../src/config.ts';
import { TokenEntity } from '../../src/store/entities.ts';
import type { JwsTokenProvider } from '../../src/token/jws-provider.ts';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from '../helpers/app.ts';

type Scope = 'unscoped' | 'project' | 'domain' | 'system';

/** A user with a role on a project, its domain and the system, and an API key for the project. */
async function fixture(testApp: TestApp) {
  const { call, login } = testApp;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'matrix' } })).json().domain;
  const project = (await call('POST', '/v3/projects', { project: { name: 'matrix', domain_id: domain.id } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'matrix', domain_id: domain.id, password: 'Pw-1' } })).json().user;
  for (const target of [`/v3/projects/${project.id}`, `/v3/domains/${domain.id}`, '/v3/system']) {
    t.equal((await call('PUT', `${target}/users/${user.id}/roles/${member.id}`)).statusCode, 204);
  }
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const key = (await call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'matrix' } }, session)).json().application_credential;
  const scopes: Record<Scope, unknown> = {
    unscoped: 'unscoped',
    project: { project: { id: project.id } },
    domain: { domain: { id: domain.id } },
    system: { system: { all: true } },
  };
  return { user, project, domain, key, scopes };
}

for (const provider of ['fernet', 'jws', 'uuid'] as const) {
  t.test(`${provider} tokens: every method and scope issues, validates and revokes`, async (t) => {
    const testApp = await startTestApp(t, { TOKEN_PROVIDER: provider });
    const { call, login } = testApp;
    t.equal(testApp.app.tokenProvider.name, provider);
    const { user, project, domain, key, scopes } = await fixture(testApp);
    const validate = (subject: string) => call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject });
    const expectScope = (body: Record<string, any>, scope: Scope) => {
      if (scope === 'project') t.equal(body.project?.id, project.id);
      if (scope === 'domain') t.equal(body.domain?.id, domain.id);
      if (scope === 'system') t.same(body.system, { all: true });
      if (scope === 'unscoped') t.notOk('roles' in body);
    };

    for (const scope of Object.keys(scopes) as Scope[]) {
      // password
      const password = await login({ id: user.id }, 'Pw-1', scopes[scope]);
      t.equal(password.status, 201, `password, ${scope}`);
      expectScope(password.body.token, scope);
      // token (re-scope an unscoped token)
      const unscoped = await login({ id: user.id }, 'Pw-1', 'unscoped');
      const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: unscoped.token } }, scope: scopes[scope] } }, null);
      t.equal(rescoped.statusCode, 201, `token, ${scope}`);
      t.same(rescoped.json().token.methods, ['token', 'password']);
      expectScope(rescoped.json().token, scope);

      for (const issued of [password.token, String(rescoped.headers['x-subject-token'])]) {
        const validated = await validate(issued);
        t.equal(validated.statusCode, 200, `${scope} validates`);
        expectScope(validated.json().token, scope);
      }
      t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': password.token })).statusCode, 204);
      t.equal((await validate(password.token)).statusCode, 404, `${scope} revoked`);
    }

    // application_credential (always project-scoped)
    const viaKey = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: key.id, secret: key.secret } } } }, null);
    t.equal(viaKey.statusCode, 201);
    const keyToken = String(viaKey.headers['x-subject-token']);
    const validated = await validate(keyToken);
    t.equal(validated.statusCode, 200);
    t.equal(validated.json().token.application_credential.id, key.id);
    expectScope(validated.json().token, 'project');
    t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': keyToken })).statusCode, 204);
    t.equal((await validate(keyToken)).statusCode, 404);

    t.equal((await validate('garbage')).statusCode, 404);
    const jwks = await call('GET', '/v3/auth/jwks', undefined, null);
    t.equal(jwks.statusCode, provider === 'jws' ? 200 : 404);
  });
}

t.test('JWS tokens verify offline with the published keys and survive a rotation', async (t) => {
  const testApp = await startTestApp(t, { TOKEN_PROVIDER: 'jws', JWS_MAX_ACTIVE_KEYS: '2' });
  const { call, login } = testApp;
  const issued = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } });
  t.match(issued.token, /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/);
  const jwks = (await call('GET', '/v3/auth/jwks', undefined, null)).json();
  t.equal(jwks.keys.length, 1);
  t.match(jwks.keys[0], { kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
  t.notOk('d' in jwks.keys[0], 'no private part is published');
  const { payload } = await jwtVerify(issued.token, createLocalJWKSet(jwks));
  t.match(payload, { sub: issued.body.token.user.id, openstack_system: 'all', openstack_methods: ['password'] });
  t.equal(payload.exp, Date.parse(issued.body.token.expires_at) / 1000);

  const provider = testApp.app.tokenProvider as JwsTokenProvider;
  await provider.repository.rotate();
  await provider.reload();
  t.equal((await call('GET', '/v3/auth/jwks', undefined, null)).json().keys.length, 2);
  const fresh = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } });
  const validate = (subject: string) => call('GET', '/v3/auth/tokens', undefined, fresh.token, { 'x-subject-token': subject });
  t.equal((await validate(issued.token)).statusCode, 200, 'signed with the previous key, still published');
  await provider.repository.rotate();
  await provider.reload();
  t.equal((await call('GET', '/v3/auth/jwks', undefined, null)).json().keys.length, 2, 'at most JWS_MAX_ACTIVE_KEYS');
  const newest = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } });
  t.equal((await call('GET', '/v3/auth/tokens', undefined, newest.token, { 'x-subject-token': issued.token })).statusCode, 404, 'its key is gone');

  // A forged signature or a token signed with another key is refused.
  const [header, body] = fresh.token.split('.');
  const tampered = `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), sub: 'someone-else' })).toString('base64url')}.${fresh.token.split('.')[2]}`;
  t.equal((await call('GET', '/v3/auth/tokens', undefined, newest.token, { 'x-subject-token': tampered })).statusCode, 404);
});

t.test('uuid tokens are database rows', async (t) => {
  const testApp = await startTestApp(t, { TOKEN_PROVIDER: 'uuid' });
  const issued = await testApp.login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD);
  t.match(issued.token, /^[0-9a-f]{32}$/);
  const row = await testApp.app.store.reader().findOne(TokenEntity, { id: issued.token });
  t.equal(Math.floor(row!.expiresAt.getTime() / 1000), Date.parse(issued.body.token.expires_at) / 1000);
});

t.test('pki and pkiz refuse to start, naming fernet and jws', async (t) => {
  for (const provider of ['pki', 'pkiz', 'PKI']) {
    t.throws(() => loadConfig({ TOKEN_PROVIDER: provider }), { name: 'ConfigError', message: /fernet.*jws/ });
  }
  t.throws(() => loadConfig({ TOKEN_PROVIDER: 'magic' }), { name: 'ConfigError' });
});
