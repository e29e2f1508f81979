import t from 'tap';
import { startTestApp } from '../helpers/app.ts';

t.test('request parsing and error shapes', async (t) => {
  const { request, adminToken, call } = await startTestApp(t);
  const headers = { 'x-auth-token': adminToken };

  t.test('unknown path is a Keystone-shaped 404', async (t) => {
    const response = await request({ method: 'GET', url: '/v3/nowhere', headers });
    t.equal(response.statusCode, 404);
    t.same(response.json(), { error: { code: 404, title: 'Not Found', message: 'The resource could not be found.' } });
  });

  t.test('known path, wrong method is 405 with Allow', async (t) => {
    const response = await request({ method: 'DELETE', url: '/v3/domains', headers });
    t.equal(response.statusCode, 405);
    t.match(response.headers.allow, /GET/);
    t.match(response.headers.allow, /POST/);
    t.equal(response.json().error.code, 405);
    const post = await request({ method: 'POST', url: '/v3/domains/default', headers });
    t.equal(post.statusCode, 405);
  });

  t.test('malformed JSON is 400', async (t) => {
    const response = await request({ method: 'POST', url: '/v3/domains', headers: { ...headers, 'content-type': 'application/json' }, payload: '{"domain": ' });
    t.equal(response.statusCode, 400);
    t.match(response.json().error.message, /^Expecting to find valid JSON in request body/);
  });

  t.test('a JSON value that is not an object is 400', async (t) => {
    for (const payload of ['[1,2]', '"text"', 'null', '42']) {
      const response = await request({ method: 'POST', url: '/v3/domains', headers: { ...headers, 'content-type': 'application/json' }, payload });
      t.equal(response.statusCode, 400, payload);
    }
  });

  t.test('a body without Content-Type is read as JSON', async (t) => {
    const response = await request({ method: 'POST', url: '/v3/regions', headers, payload: JSON.stringify({ region: { id: 'no-content-type' } }) });
    t.equal(response.statusCode, 201);
    t.equal(response.json().region.id, 'no-content-type');
  });

  t.test('a body of another content type is 400', async (t) => {
    const response = await request({ method: 'POST', url: '/v3/regions', headers: { ...headers, 'content-type': 'text/plain' }, payload: 'hello' });
    t.equal(response.statusCode, 400);
    t.match(response.json().error.message, /application\/json in Content-Type/);
  });

  t.test('wrong types are 400, never coerced', async (t) => {
    const cases: [string, unknown][] = [
      ['/v3/domains', { domain: { name: 'x', enabled: 'true' } }],
      ['/v3/projects', { project: { name: 5 } }],
      ['/v3/users', { user: { name: ['a'] } }],
      ['/v3/users', { user: { name: 'u', options: { no_such_option: true } } }],
      ['/v3/roles', { role: {} }],
      ['/v3/endpoints', { endpoint: { service_id: 'x', interface: 'bogus', url: 'http://x' } }],
      ['/v3/domains', {}],
    ];
    for (const [url, body] of cases) {
      const response = await call('POST', url, body);
      t.equal(response.statusCode, 400, `${url} ${JSON.stringify(body)}`);
      t.same(Object.keys(response.json().error).sort(), ['code', 'message', 'title']);
    }
  });

  t.test('PATCH needs at least one property', async (t) => {
    const response = await call('PATCH', '/v3/domains/default', { domain: {} });
    t.equal(response.statusCode, 400);
  });

  t.test('the response carries a request id and Vary on errors too', async (t) => {
    const response = await request({ method: 'GET', url: '/v3/users' });
    t.equal(response.statusCode, 401);
    t.match(response.headers['x-openstack-request-id'], /^req-/);
    t.equal(response.headers['www-authenticate'], 'Keystone uri="http://keystone.test:5000/v3"');
  });

  t.test('hostile input is a Keystone-shaped 4xx, never a 500', async (t) => {
    const long = 'x'.repeat(300);
    const cases: [string, string, unknown][] = [
      ['PUT', `/v3/regions/${long}`, {}],
      ['POST', '/v3/regions', { region: { id: long } }],
      ['GET', `/v3/users/${long}`, undefined],
      ['POST', '/v3/projects', { project: { name: 'p', domain_id: long.slice(0,60)} }],
      ['POST', '/v3/users', { user: { name: 'u', default_project_id: 'x' } }],
      ['PUT', `/v3/projects/${'a'.repeat(80)}/tags/${long}`, undefined],
      ['POST', '/v3/endpoints', { endpoint: { service_id: 'x', interface: 'public', url: 'http://x', region_id: long } }],
      ['POST', '/v3/domains', { domain: { name: 'n', tags: ['a','a'] } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { id: long, password: 'x' } } } } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password', 'password'], password: { user: { name: 'admin', domain: {id: 'default'}, password: 'admin-secret' } } } } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: long } } } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: {id: 'default'}, password: 'admin-secret' } } }, scope: { project: { id: 5 } } } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: {id: 'default'}, password: 'admin-secret' } } }, scope: { system: { all: 'yes' } } } }],
      ['POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: {id: 'default'}, password: 'admin-secret' } } }, scope: ['x'] } }],
      ['GET', '/v3/OS-REVOKE/events?since=garbage', undefined],
      ['GET', '/v3/role_assignments?scope.system=all&scope.domain.id=x', undefined],
      ['PATCH', '/v3/regions/RegionOne', { region: { parent_region_id: 'nope' } }],
      ['POST', '/v3/roles', { role: { name: 'r', domain_id: 'nope' } }],
      ['PUT', `/v3/domains/default/users/x/roles/y`, undefined],
      ['GET', '/v3/users?name=%00', undefined],
      ['GET', '/v3/users/%00', undefined],
      ['POST', '/v3/users', { user: { name: 'a\u0000b' } }],
      ['POST', '/v3/groups', { group: { name: 'g', domain_id: long.slice(0, 64) } }],
      ['PUT', `/v3/projects/x/tags`, { tags: ['a'] }],
    ];
    for (const [method, url, body] of cases) {
      const response = await call(method as 'GET', url, body);
      t.ok(response.statusCode >= 400 || response.statusCode < 300, `${method} ${url.slice(0, 40)}`);
      t.ok(response.statusCode < 500, `${method} ${url.slice(0, 40)} -> ${response.statusCode}`);
      if (response.statusCode >= 400) t.same(Object.keys(response.json().error).sort(), ['code', 'message', 'title']);
    }
    const nul = await call('GET', '/v3/users/%00');
    t.equal(nul.statusCode, 400);
    t.equal(nul.json().error.message, 'Invalid input: NUL characters are not allowed.');
    const tooLong = await call('GET', `/v3/users/${'x'.repeat(300)}`);
    t.equal(tooLong.statusCode, 404);
  });
});
