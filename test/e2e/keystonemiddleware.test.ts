import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

// What keystonemiddleware's auth_token does on the wire, step by step, against a listening server.
t.test('keystonemiddleware flow over a real socket', async (t) => {
  const { app, call } = await startTestApp(t, { PUBLIC_URL: '' });
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  // Point the catalog at where the server really listens (bootstrap does this on start).
  const identity = (await call('GET', '/v3/services?type=identity')).json().services[0];
  for (const endpoint of (await call('GET', `/v3/endpoints?service_id=${identity.id}`)).json().endpoints) {
    await call('PATCH', `/v3/endpoints/${endpoint.id}`, { endpoint: { url: `${base}/v3` } });
  }

  // A service user with the service role on a service project, as deployments configure it.
  const serviceRole = (await call('POST', '/v3/roles', { role: { name: 'service' } })).json().role;
  const serviceProject = (await call('POST', '/v3/projects', { project: { name: 'service' } })).json().project;
  const placement = (await call('POST', '/v3/users', { user: { name: 'placement', password: 'placement-pw' } })).json().user;
  await call('PUT', `/v3/projects/${serviceProject.id}/users/${placement.id}/roles/${serviceRole.id}`);

  // 1. discovery on the configured auth URL
  const root = await fetch(`${base}/`, { redirect: 'manual' });
  t.equal(root.status, 300);
  // 2. the service user logs in by names, with a catalog
  const login = await fetch(`${base}/v3/auth/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      auth: {
        identity: { methods: ['password'], password: { user: { name: 'placement', domain: { name: 'Default' }, password: 'placement-pw' } } },
        scope: { project: { name: 'service', domain: { name: 'Default' } } },
      },
    }),
  });
  t.equal(login.status, 201);
  const serviceToken = login.headers.get('x-subject-token')!;
  const catalog = ((await login.json()) as any).token.catalog;
  // 3. it finds the identity API through the catalog, internal interface, and discovers it
  const internal = catalog.find((s: { type: string }) => s.type === 'identity').endpoints.find((e: { interface: string }) => e.interface === 'internal');
  t.equal(internal.url, `${base}/v3`);
  const discovered = await fetch(internal.url);
  t.equal(discovered.status, 200);
  t.equal(((await discovered.json()) as any).version.id, 'v3.14');

  // 4. a user token is validated with the service token
  const user = (await call('POST', '/v3/users', { user: { name: 'enduser', password: 'end-pw' } })).json().user;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${serviceProject.id}/users/${user.id}/roles/${member.id}`);
  const userLogin = await fetch(`${base}/v3/auth/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { id: user.id, password: 'end-pw' } } }, scope: { project: { id: serviceProject.id } } } }),
  });
  const userToken = userLogin.headers.get('x-subject-token')!;
  const validate = (subject: string, query = '') =>
    fetch(`${internal.url}/auth/tokens${query}`, {
      headers: { 'x-auth-token': serviceToken, 'x-subject-token': subject, 'openstack-identity-access-rules': '1' },
    });
  const valid = await validate(userToken);
  t.equal(valid.status, 200);
  const body = ((await valid.json()) as any).token;
  t.match(body, {
    user: { id: user.id, name: 'enduser', domain: { id: 'default', name: 'Default' } },
    project: { id: serviceProject.id, name: 'service', domain: { id: 'default', name: 'Default' } },
  });
  t.match(body.expires_at, /Z$/);
  t.ok(body.roles.some((role: { name: string }) => role.name === 'member'));
  t.equal((await validate(userToken, '?nocatalog')).status, 200);

  // A bad subject token must be 404: to the middleware a 401 would mean its own token is bad.
  t.equal((await validate('gAAAAABbogus')).status, 404);
  t.equal((await validate('not-even-fernet')).status, 404);
  const badService = await fetch(`${internal.url}/auth/tokens`, { headers: { 'x-auth-token': 'bogus', 'x-subject-token': userToken } });
  t.equal(badService.status, 401);
  t.match(badService.headers.get('www-authenticate'), /^Keystone uri="http:\/\/127\.0\.0\.1:\d+\/v3"$/);

});
