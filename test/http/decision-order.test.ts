// Keystone's order for a request on one member: read the member (404 when it exists nowhere), decide
// (403), then validate the body (400). The protection matrix sees allowed/denied only; this file
// checks the statuses themselves, as the real Keystone 22 gave them (keystone-tempest-plugin's RBAC
// tests expect the same).
import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

t.test('a member is read, then the policy decides, then the body is validated', async (t) => {
  const { call, login } = await startTestApp(t);
  const roles = Object.fromEntries(((await call('GET', '/v3/roles')).json().roles as { id: string; name: string }[]).map((role) => [role.name, role.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'order' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'order-member', password: 'secret-pw' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  const member = (await login({ id: user.id }, 'secret-pw', { project: { id: project.id } })).token;
  const service = (await call('POST', '/v3/services', { service: { type: 'order' } })).json().service;
  const nowhere = 'f'.repeat(32);

  const status = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body: unknown, token?: string) => (await call(method, url, body, token)).statusCode;
  // An id that exists nowhere: 404 for any token, whatever the body.
  for (const url of [`/v3/domains/${nowhere}`, `/v3/roles/${nowhere}`, `/v3/endpoints/${nowhere}`]) {
    t.equal(await status('PATCH', url, { [url.split('/')[2]!.slice(0, -1)]: {} }, member), 404, `PATCH ${url} with an empty entity, as a member`);
  }
  t.equal(await status('GET', `/v3/endpoints/${nowhere}`, undefined, member), 404, 'GET an endpoint that exists nowhere, as a member');
  t.equal(await status('GET', `/v3/roles/${nowhere}`, undefined, member), 404, 'GET a role that exists nowhere, as a member');
  t.equal(await status('DELETE', `/v3/groups/${nowhere}`, undefined, member), 404, 'DELETE a group that exists nowhere, as a member');

  // A caller the policy refuses: 403 whatever it sent; one it lets through: the body's 400.
  const refused = await call('PATCH', `/v3/services/${service.id}`, { service: {} }, member);
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.message, 'You are not authorized to perform the requested action: identity:update_service.');
  const invalid = await call('PATCH', `/v3/services/${service.id}`, { service: {} });
  t.equal(invalid.statusCode, 400);
  t.same(invalid.json().error, { code: 400, title: 'Bad Request', message: '{} does not have enough properties' });
  t.equal(await status('PATCH', `/v3/users/${user.id}`, { user: 'not an object' }, member), 403, 'users: refused before validation');
  t.equal(await status('PATCH', `/v3/users/${user.id}`, { user: 'not an object' }), 400, 'users: an admin gets the 400');
  t.equal((await call('GET', `/v3/services/${service.id}`)).json().service.type, 'order', 'nothing changed');

  // Creating: the same order, for every route that needs a token (the body's schema is held back).
  for (const [url, entity] of [
    ['/v3/users', 'user'],
    ['/v3/projects', 'project'],
    ['/v3/regions', 'region'],
    ['/v3/OS-OAUTH1/consumers', 'consumer'],
  ] as const) {
    t.equal(await status('POST', url, { [entity]: 'not an object' }, member), 403, `POST ${url}: refused before validation`);
    const answer = await call('POST', url, { [entity]: 'not an object' });
    t.equal(answer.statusCode, 400, `POST ${url}: an admin gets the 400`);
    t.equal(answer.json().error.title, 'Bad Request');
  }
  // A route anyone may call validates first, as before.
  t.equal((await call('POST', '/v3/auth/tokens', { auth: 'not an object' }, null)).statusCode, 400);
});
