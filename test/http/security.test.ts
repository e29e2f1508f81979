import t from 'tap';
import { bodyCases, FORGED_IDENTITY_HEADERS, injectOptions, publicSecurityCases, securityCases, takesBody } from '../helpers/security.ts';
import { startTestApp } from '../helpers/app.ts';

t.test('every authenticated identity route refuses missing, bad and forged credentials', async (t) => {
  const { app, call, login, request } = await startTestApp(t);
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'elsewhere' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'plain', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  const memberToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const revoked = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': revoked })).statusCode, 204);
  const tokens = { member: memberToken, revoked, expiredOrGarbage: 'gAAAAABgarbage-token' };

  const routes = app.routes.filter((route) => !route.public && route.method !== 'HEAD');
  t.ok(routes.length > 60, `${routes.length} routes covered`);
  for (const route of routes) {
    const baseline = await request(injectOptions(route, { 'X-Auth-Token': memberToken }));
    for (const securityCase of securityCases(route, tokens)) {
      const response = await request(injectOptions(route, securityCase.headers));
      const failure = securityCase.check(response, baseline);
      t.notOk(failure, `${route.method} ${route.url}: ${securityCase.name}${failure ? ` — ${failure}` : ''}`);
    }
  }
});

t.test('every route anyone may call ignores forged credentials', async (t) => {
  const { app, request } = await startTestApp(t);
  const tokens = { member: '', revoked: '', expiredOrGarbage: 'gAAAAABgarbage-token' };
  const routes = app.routes.filter((route) => route.public && route.method !== 'HEAD');
  t.ok(routes.some((route) => route.method === 'POST' && route.url === '/v3/auth/tokens'), 'token issue is covered');
  t.ok(routes.some((route) => route.method === 'POST' && route.url === '/v3/users/:user_id/password'), 'password change is covered');
  for (const route of routes) {
    const baseline = await request(injectOptions(route, {}));
    for (const securityCase of publicSecurityCases(route, tokens)) {
      const response = await request(injectOptions(route, securityCase.headers));
      const failure = securityCase.check(response, baseline);
      t.notOk(failure, `${route.method} ${route.url}: ${securityCase.name}${failure ? ` — ${failure}` : ''}`);
    }
  }
  // A real login: the forged headers do not turn a wrong password into a token.
  const login = (headers: Record<string, string>) =>
    request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: 'wrong' } } } } }),
    });
  t.equal((await login(FORGED_IDENTITY_HEADERS)).statusCode, 401);
});

t.test('every route that reads a body refuses deep, oversized and ill-formed ones, Keystone-shaped', async (t) => {
  const { app, call, login, request } = await startTestApp(t, { BODY_LIMIT_BYTES: '16384', PUBLIC_BODY_LIMIT_BYTES: '4096' });
  const user = (await call('POST', '/v3/users', { user: { name: 'plain', password: 'Pw-1' } })).json().user;
  const memberToken = (await login({ id: user.id }, 'Pw-1')).token;
  const routes = app.routes.filter(takesBody);
  t.ok(routes.length > 30, `${routes.length} routes take a body`);
  for (const route of routes) {
    const headers: Record<string, string> = route.public ? {} : { 'X-Auth-Token': memberToken };
    for (const securityCase of bodyCases(route.public ? 4096 : 16384, headers)) {
      const response = await request(injectOptions(route, securityCase.headers, securityCase.payload));
      const failure = securityCase.check(response, response);
      t.notOk(failure, `${route.method} ${route.url}${route.public ? ' (public)' : ''}: ${securityCase.name}${failure ? ` — ${failure}` : ''}`);
    }
  }
});
