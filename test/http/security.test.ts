import t from 'tap';
import { injectOptions, securityCases } from '../helpers/security.ts';
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
