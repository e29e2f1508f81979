import t from 'tap';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('version discovery', async (t) => {
  const { request } = await startTestApp(t);

  const root = await request({ method: 'GET', url: '/' });
  t.equal(root.statusCode, 300);
  t.equal(root.headers.location, `${PUBLIC_URL}/v3/`);
  const values = root.json().versions.values;
  t.equal(values.length, 1);
  t.match(values[0], { id: 'v3.14', status: 'stable', links: [{ rel: 'self', href: `${PUBLIC_URL}/v3/` }] });
  t.match(root.headers['x-openstack-request-id'], /^req-[0-9a-f-]{36}$/);
  t.equal(root.headers.vary, 'X-Auth-Token');

  for (const url of ['/v3', '/v3/']) {
    const v3 = await request({ method: 'GET', url });
    t.equal(v3.statusCode, 200, url);
    t.same(v3.json().version['media-types'], [{ base: 'application/json', type: 'application/vnd.openstack.identity-v3+json' }]);
  }

  const head = await request({ method: 'HEAD', url: '/v3' });
  t.equal(head.statusCode, 200);
  t.equal(head.body, '');

  const home = await request({ method: 'GET', url: '/v3', headers: { accept: 'application/json-home' } });
  t.equal(home.statusCode, 200);
  t.match(home.headers['content-type'], /application\/json-home/);
  t.ok(home.json().resources);
});

t.test('links follow the Host header when PUBLIC_URL is not set', async (t) => {
  const { request } = await startTestApp(t, { PUBLIC_URL: '' });
  const v3 = await request({ method: 'GET', url: '/v3', headers: { host: 'id.example.net:8443', 'x-forwarded-proto': 'https' } });
  t.equal(v3.json().version.links[0].href, 'https://id.example.net:8443/v3/');
  const plain = await request({ method: 'GET', url: '/v3', headers: { host: 'id.example.net:80' } });
  t.equal(plain.json().version.links[0].href, 'http://id.example.net/v3/');
});
