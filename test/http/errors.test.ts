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
});
