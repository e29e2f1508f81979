import fs from 'node:fs';
import t from 'tap';
import { FORGED_IDENTITY_HEADERS } from '../helpers/security.ts';
import { PUBLIC_URL } from '../helpers/app.ts';
import { ECHO_RULES, gatewayWorld, IDENTITY_HEADER } from '../helpers/gateway.ts';
import { rawRequest, startEchoUpstream } from '../helpers/upstream.ts';

// Requests that pass: where they go, what the upstream receives, what comes back.

t.test('allowed requests reach the internal endpoint with exactly our identity headers', async (t) => {
  const w = await gatewayWorld(t);
  const response = await rawRequest(w.port, {
    path: `/echo/v1/${w.projectId}/things?limit=2`,
    headers: { 'x-auth-token': w.member, ...FORGED_IDENTITY_HEADERS, 'x-user-id': 'forged', 'X-PROJECT-ID': 'forged', 'x-service-token': '' },
  });
  t.equal(response.status, 200);
  t.match(response.headers['x-openstack-request-id'], /^req-/);
  const received = w.upstream.received.at(-1)!;
  t.equal(received.url, `/v1/${w.projectId}/things?limit=2`, 'the endpoint path is not doubled; the query is kept');
  const identity = Object.fromEntries(Object.entries(received.headers).filter(([name]) => IDENTITY_HEADER.test(name)));
  const validated = (await w.testApp.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.member })).json().token;
  t.same(identity, {
    'x-identity-status': 'Confirmed',
    'x-user-id': validated.user.id,
    'x-user-name': 'gw-member',
    'x-user-domain-id': 'default',
    'x-user-domain-name': 'Default',
    'x-roles': validated.roles.map((role: { name: string }) => role.name).join(','),
    'x-project-id': w.projectId,
    'x-project-name': 'gw',
    'x-project-domain-id': 'default',
    'x-project-domain-name': 'Default',
    'x-is-admin-project': 'True',
  });
  t.equal(received.headers['x-auth-token'], w.member, 'the token is forwarded unchanged for keystonemiddleware behind us');
  t.equal(received.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(received.headers['x-forwarded-host'], `127.0.0.1:${w.port}`);
  t.equal(received.headers['x-forwarded-proto'], 'http');
  t.match(received.headers['x-openstack-request-id'], /^req-/);
  t.equal(received.headers.host, `127.0.0.1:${w.upstream.port}`);

  // Bodies keep their Content-Length (uwsgi behind us does not de-chunk), and Location is rewritten.
  const created = await rawRequest(w.port, {
    method: 'POST',
    path: `/echo/v1/${w.projectId}/things`,
    headers: { 'x-auth-token': w.member, 'content-type': 'application/json', 'content-length': '10' },
    body: '{"a":"b"} ',
  });
  t.equal(created.status, 201);
  const post = w.upstream.received.at(-1)!;
  t.equal(post.headers['content-length'], '10');
  t.notOk(post.headers['transfer-encoding']);
  t.equal(post.body, '{"a":"b"} ');
  t.equal(created.headers.location, `${PUBLIC_URL}/echo/v1/${w.projectId}/things/thing-1`, 'Location points at the public gateway URL');
  // The same on a plain GET (the request front's response, when it is on).
  const redirected = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/redirect`, headers: { 'x-auth-token': w.reader } });
  t.equal(redirected.status, 302);
  t.equal(redirected.headers.location, `${PUBLIC_URL}/echo/v1/${w.projectId}/things/thing-1`, "a GET's Location too");
});

t.test('upstream failures: slow is 504, down is 502', async (t) => {
  const w = await gatewayWorld(t);
  w.upstream.delayMs = 2000;
  const slow = await rawRequest(w.port, { path: '/echo/v1/public/slow', headers: { 'x-auth-token': w.member } });
  t.equal(slow.status, 504);
  t.equal(JSON.parse(slow.body).error.code, 504);
  w.upstream.delayMs = 0;
  await w.upstream.close();
  const down = await rawRequest(w.port, { path: '/echo/v1/public/down', headers: { 'x-auth-token': w.member } });
  t.equal(down.status, 502);
  t.equal(JSON.parse(down.body).error.title, 'Bad Gateway');
});

t.test('catalog and policy changes take effect without a restart', async (t) => {
  const w = await gatewayWorld(t);
  const path = `/echo/v1/${w.projectId}/things`;
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 200);

  // A broken rule file: the last good policy stays.
  fs.writeFileSync(`${w.policies}/echo.csv`, `${ECHO_RULES}p, reader, this is not a rule\n`);
  t.equal(await w.testApp.app.reloadPolicy(), false);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 200, 'still the old policy');
  // A good change: readers lose GET on things.
  fs.writeFileSync(`${w.policies}/echo.csv`, ECHO_RULES.replace(/^p, reader, project, \/v1\/\{project_id\}\/things, GET, allow\n/m, ''));
  t.equal(await w.testApp.app.reloadPolicy(), true);
  t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': w.reader } })).status, 403, 'the new policy');

  // The endpoint moves: the next request goes to the new place.
  const second = await startEchoUpstream();
  t.teardown(() => second.close());
  const endpoints = (await w.testApp.call('GET', '/v3/endpoints?interface=internal')).json().endpoints;
  const echo = endpoints.find((endpoint: { url: string }) => endpoint.url.startsWith(w.upstream.url));
  await w.testApp.call('PATCH', `/v3/endpoints/${echo.id}`, { endpoint: { url: `${second.url}/v1` } });
  t.equal((await rawRequest(w.port, { path: '/echo/v1/public/moved', headers: { 'x-auth-token': w.member } })).status, 200);
  t.equal(second.received.at(-1)?.url, '/v1/public/moved');
});

t.test('the identity API is reachable through the gateway at /identity/v3', async (t) => {
  const w = await gatewayWorld(t, { PUBLIC_URL: '' });
  const version = await rawRequest(w.port, { path: '/identity/v3', headers: { host: 'gateway.test' } });
  t.equal(version.status, 200);
  t.equal(JSON.parse(version.body).version.links[0].href, 'http://gateway.test/identity/v3/');
  const users = await rawRequest(w.port, { path: '/identity/v3/users', headers: { host: 'gateway.test', 'x-auth-token': w.admin } });
  t.equal(users.status, 200);
  t.equal(JSON.parse(users.body).links.self, 'http://gateway.test/identity/v3/users');
});

t.test('identity headers for system and domain scope, service tokens and the v2 catalog', async (t) => {
  const w = await gatewayWorld(t, { GATEWAY_SERVICE_CATALOG_HEADER: 'true' });
  const { login } = w.testApp;
  const identityOf = () => Object.fromEntries(Object.entries(w.upstream.received.at(-1)!.headers).filter(([name]) => IDENTITY_HEADER.test(name)));

  const system = (await login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { system: { all: true } })).token;
  t.equal((await rawRequest(w.port, { path: '/echo/v1/admin/x', headers: { 'x-auth-token': system } })).status, 200);
  const systemHeaders = identityOf();
  t.equal(systemHeaders['openstack-system-scope'], 'all');
  t.notOk(systemHeaders['x-project-id'], 'no project for a system token');
  t.ok(
    JSON.parse(String(systemHeaders['x-service-catalog'])).some((entry: { type: string }) => entry.type === 'echo'),
    'a system token carries the whole catalog, as in its token body',
  );

  const { call } = w.testApp;
  const adminUser = (await call('GET', '/v3/users?name=admin')).json().users[0];
  const adminRole = (await call('GET', '/v3/roles?name=admin')).json().roles[0];
  t.equal((await call('PUT', `/v3/domains/default/users/${adminUser.id}/roles/${adminRole.id}`)).statusCode, 204);
  const domain = (await login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { domain: { id: 'default' } })).token;
  t.equal((await rawRequest(w.port, { path: '/echo/v1/admin/x', headers: { 'x-auth-token': domain } })).status, 200);
  t.match(identityOf(), { 'x-domain-id': 'default', 'x-domain-name': 'Default' });
  t.notOk(identityOf()['openstack-system-scope']);

  t.equal((await rawRequest(w.port, { path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member, 'x-service-token': w.admin } })).status, 200);
  const withService = identityOf();
  t.match(withService, {
    'x-user-name': 'gw-member',
    'x-project-id': w.projectId,
    'x-service-identity-status': 'Confirmed',
    'x-service-user-name': 'admin',
    'x-service-project-name': 'admin',
    'x-service-roles': /admin/,
  });
  const catalog = JSON.parse(String(withService['x-service-catalog']));
  const echo = catalog.find((entry: { type: string }) => entry.type === 'echo');
  t.same(echo, { type: 'echo', name: 'echo', endpoints: [{ region: 'RegionOne', internalURL: `${w.upstream.url}/v1`, publicURL: 'http://gateway.test/echo/v1' }] });
  t.equal(w.upstream.received.at(-1)!.headers['x-service-token'], w.admin, 'the service token is forwarded unchanged too');
});

t.test('names beyond ASCII reach the upstream as UTF-8 bytes, and do not count against its circuit', async (t) => {
  const w = await gatewayWorld(t, { GATEWAY_SERVICE_CATALOG_HEADER: 'true', UPSTREAM_CIRCUIT_FAILURES: '1' });
  const { call, login } = w.testApp;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'Projekt Größe' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: '李雷', password: 'Pw-1' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`)).statusCode, 204);
  const service = (await call('POST', '/v3/services', { service: { type: 'wiki', name: 'Вики' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'internal', region_id: 'RegionOne', url: `${w.upstream.url}/v1` } });
  const token = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;

  // Twice: with a threshold of 1, a failure counted against the upstream would open its circuit.
  for (const attempt of ['first', 'second']) {
    const response = await rawRequest(w.port, { path: `/echo/v1/public/x`, headers: { 'x-auth-token': token } });
    t.equal(response.status, 200, `${attempt} request forwarded`);
  }
  // Node reads header bytes as Latin-1: the UTF-8 bytes we sent decode back to the names.
  const received = w.upstream.received.at(-1)!.headers;
  const utf8 = (value: unknown) => Buffer.from(String(value), 'latin1').toString('utf8');
  t.equal(utf8(received['x-user-name']), '李雷');
  t.equal(utf8(received['x-project-name']), 'Projekt Größe', 'Latin-1 letters go as UTF-8 too, not as single bytes');
  t.equal(received['x-user-id'], user.id, 'ASCII values are unchanged');
  const catalog = JSON.parse(utf8(received['x-service-catalog']));
  t.ok(catalog.some((entry: { name: string }) => entry.name === 'Вики'), 'the catalog header as well');
});

t.test("X-Service-Catalog carries the caller's own $(user_id)s URLs, not another user's of the same project", async (t) => {
  const w = await gatewayWorld(t, { GATEWAY_SERVICE_CATALOG_HEADER: 'true' });
  const { call, login } = w.testApp;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const service = (await call('POST', '/v3/services', { service: { type: 'files', name: 'files' } })).json().service;
  await call('POST', '/v3/endpoints', { endpoint: { service_id: service.id, interface: 'public', region_id: 'RegionOne', url: 'http://files.test/v1/$(user_id)s' } });
  const filesUrlsFor = async (token: string) => {
    t.equal((await rawRequest(w.port, { path: `/echo/v1/public/x`, headers: { 'x-auth-token': token } })).status, 200);
    const catalog = JSON.parse(String(w.upstream.received.at(-1)!.headers['x-service-catalog']));
    return catalog.find((entry: { type: string }) => entry.type === 'files')?.endpoints.map((endpoint: { publicURL: string }) => endpoint.publicURL);
  };
  const users = [];
  for (const name of ['first', 'second']) {
    const user = (await call('POST', '/v3/users', { user: { name, password: 'Pw-1' } })).json().user;
    t.equal((await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${member.id}`)).statusCode, 204);
    users.push({ id: user.id as string, token: (await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).token as string });
  }
  for (const user of [...users, ...users]) t.same(await filesUrlsFor(user.token), [`http://files.test/v1/${user.id}`], 'this user’s URL, cached or not');
});
