import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';

// Query strings are declared schemas of raw strings, read as Keystone reads them: unknown
// parameters are ignored, a repeated one counts with its last value, booleans are lenient.

t.test("query strings are read as Keystone reads them", async (t) => {
  const { call } = await startTestApp(t);
  t.equal((await call('POST', '/v3/domains', { domain: { name: 'on' } })).statusCode, 201);
  t.equal((await call('POST', '/v3/domains', { domain: { name: 'off', enabled: false } })).statusCode, 201);
  const names = async (url: string) => {
    const response = await call('GET', url);
    t.equal(response.statusCode, 200, url);
    return (response.json().domains as { name: string }[]).map((domain) => domain.name).sort();
  };

  t.same(await names('/v3/domains?unknown=1&unknown=2&%C3%A9=x'), ['Default', 'off', 'on'], 'unknown parameters are ignored, even repeated');
  t.same(await names('/v3/domains?name=nope&name=on'), ['on'], 'a repeated parameter counts with its last value');
  t.same(await names('/v3/domains?enabled='), ['Default', 'on'], 'an empty boolean is true');
  t.same(await names('/v3/domains?enabled=OFF'), ['off'], 'false words in any case');
  t.same(await names('/v3/domains?enabled=false&enabled=yes'), ['Default', 'on'], 'the last of repeated booleans');
  t.same(await names('/v3/domains?name__startswith=o&name__endswith=n'), ['on'], 'inexact filters combine');

  const noSince = await call('GET', '/v3/OS-REVOKE/events?since=a&since=b');
  t.equal(noSince.statusCode, 200, 'a repeated since is no filter');
  const badSince = await call('GET', '/v3/OS-REVOKE/events?since=garbage');
  t.equal(badSince.statusCode, 400);
  t.equal(badSince.json().error.message, 'invalidate date format garbage');
});

t.test('?nocatalog with any value, ?allow_expired only with a truthy word', async (t) => {
  const { call, login, clock } = await startTestApp(t);
  const body = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } }, scope: { system: { all: true } } } };
  const withCatalog = await call('POST', '/v3/auth/tokens', body, null);
  t.equal(withCatalog.statusCode, 201);
  t.ok(withCatalog.json().token.catalog, 'a scoped token has its catalog');
  const noCatalog = await call('POST', '/v3/auth/tokens?nocatalog=false', body, null);
  t.equal(noCatalog.statusCode, 201);
  t.notOk('catalog' in noCatalog.json().token, 'nocatalog is mere presence');

  const subject = (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD)).token;
  clock.advance(3601_000);
  const fresh = (await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, { system: { all: true } })).token;
  const validate = (query: string) => call('GET', `/v3/auth/tokens${query}`, undefined, fresh, { 'x-subject-token': subject });
  t.equal((await validate('')).statusCode, 404, 'expired');
  t.equal((await validate('?allow_expired=maybe')).statusCode, 404, 'not a truthy word');
  t.equal((await validate('?allow_expired=Yes')).statusCode, 200, 'a truthy word in any case');
});
