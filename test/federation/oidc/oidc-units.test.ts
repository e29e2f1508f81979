// The OIDC verifier's pieces that need no provider: its settings, the claim names and values, and
// the bounds on HTTP to a provider (redirects, sizes, status codes), against a local HTTP server.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { assertionOfClaims } from '../../../src/federation/oidc/claims.ts';
import { acceptableProviderUrl } from '../../../src/federation/oidc/provider-directory.ts';
import { MAX_PROVIDER_RESPONSE_BYTES, providerRequest, ProviderRequestError } from '../../../src/federation/oidc/provider-http.ts';

t.test('settings: defaults and validation', async (t) => {
  t.same(loadConfig({}).oidc, {
    protocols: ['openid'],
    audiences: [],
    clockSkewSeconds: 60,
    httpTimeoutMs: 5000,
    metadataCacheSeconds: 3600,
    jwksRefreshIntervalSeconds: 30,
    introspection: { default: undefined, byIssuer: {} },
  });
  const config = loadConfig({
    OIDC_PROTOCOLS: 'openid, mapped',
    OIDC_AUDIENCES: 'urn:keystone,keystone',
    OIDC_CLOCK_SKEW_SECONDS: '5',
    OIDC_INTROSPECTION_CLIENT_ID: 'keystone',
    OIDC_INTROSPECTION_CLIENT_SECRET: 's3cret',
    OIDC_INTROSPECTION_CLIENTS: '{"https://idp.example.org": {"client_id": "ks", "client_secret": "other"}}',
  }).oidc;
  t.match(config, {
    protocols: ['openid', 'mapped'],
    audiences: ['urn:keystone', 'keystone'],
    clockSkewSeconds: 5,
    introspection: { default: { clientId: 'keystone', clientSecret: 's3cret' }, byIssuer: { 'https://idp.example.org': { clientId: 'ks', clientSecret: 'other' } } },
  });
  for (const [environment, name] of [
    [{ OIDC_PROTOCOLS: 'open id' }, 'OIDC_PROTOCOLS'],
    [{ OIDC_CLOCK_SKEW_SECONDS: '3600' }, 'OIDC_CLOCK_SKEW_SECONDS'],
    [{ OIDC_HTTP_TIMEOUT_MS: 'soon' }, 'OIDC_HTTP_TIMEOUT_MS'],
    [{ OIDC_METADATA_CACHE_SECONDS: '0' }, 'OIDC_METADATA_CACHE_SECONDS'],
    [{ OIDC_JWKS_REFRESH_INTERVAL_SECONDS: '-1' }, 'OIDC_JWKS_REFRESH_INTERVAL_SECONDS'],
    [{ OIDC_INTROSPECTION_CLIENT_ID: 'keystone' }, 'OIDC_INTROSPECTION_CLIENT_SECRET'],
    [{ OIDC_INTROSPECTION_CLIENTS: '[1]' }, 'OIDC_INTROSPECTION_CLIENTS'],
    [{ OIDC_INTROSPECTION_CLIENTS: '{"not a url": {"client_id": "a", "client_secret": "b"}}' }, 'OIDC_INTROSPECTION_CLIENTS'],
    [{ OIDC_INTROSPECTION_CLIENTS: '{"https://idp.example.org": {"client_id": "a"}}' }, 'OIDC_INTROSPECTION_CLIENTS'],
  ] as const) {
    t.throws(() => loadConfig(environment), { name: 'ConfigError', message: new RegExp(name) }, JSON.stringify(environment));
  }
  const error = t.throws(() => loadConfig({ OIDC_INTROSPECTION_CLIENTS: '{"https://idp.example.org": {"client_id": "", "client_secret": "hunter2"}}' })) as Error;
  t.ok(error instanceof ConfigError);
  t.notMatch(error.message, /hunter2/, 'a secret is never echoed');
});

t.test("claims: mod_auth_openidc's names and renderings, both forms, REMOTE_USER", async (t) => {
  t.same(
    assertionOfClaims({
      sub: 'alice',
      iss: 'https://idp.example.org',
      'preferred-username': 'al',
      'https://example.org/roles': ['a', 'b'],
      groups: ['', 'developers', '', 'admins', 3, { x: 1 }, true],
      email_verified: false,
      age: 42,
      ratio: 1.234567891,
      address: { country: 'FR', city: 'Lyon' },
      nothing: null,
      empty: [],
    }),
    {
      HTTP_OIDC_SUB: 'alice',
      'OIDC-sub': 'alice',
      HTTP_OIDC_ISS: 'https://idp.example.org',
      'OIDC-iss': 'https://idp.example.org',
      HTTP_OIDC_PREFERRED_USERNAME: 'al',
      'OIDC-preferred-username': 'al',
      HTTP_OIDC_HTTPS___EXAMPLE_ORG_ROLES: 'a;b',
      'OIDC-https://example.org/roles': 'a;b',
      HTTP_OIDC_GROUPS: 'developers;;admins;1',
      'OIDC-groups': 'developers;;admins;1',
      HTTP_OIDC_EMAIL_VERIFIED: '0',
      'OIDC-email_verified': '0',
      HTTP_OIDC_AGE: '42',
      'OIDC-age': '42',
      HTTP_OIDC_RATIO: '1.2345679',
      'OIDC-ratio': '1.2345679',
      HTTP_OIDC_ADDRESS: '{"country":"FR","city":"Lyon"}',
      'OIDC-address': '{"country":"FR","city":"Lyon"}',
      HTTP_OIDC_EMPTY: '',
      'OIDC-empty': '',
      REMOTE_USER: 'alice',
    },
  );
  t.same(assertionOfClaims({ sub: 7 }), { HTTP_OIDC_SUB: '7', 'OIDC-sub': '7' }, 'REMOTE_USER only from a string sub');
});

t.test('issuer and endpoint URLs: https, or http on the loopback host only', async (t) => {
  for (const ok of ['https://idp.example.org', 'https://idp.example.org/realms/x', 'http://127.0.0.1:19000', 'http://localhost:8080/', 'http://[::1]:9000']) t.ok(acceptableProviderUrl(ok), ok);
  for (const bad of ['http://idp.example.org', 'http://10.0.0.1', 'ftp://idp.example.org', 'https://user:pw@idp.example.org', 'https://idp.example.org?x=1', 'https://idp.example.org#f', 'idp.example.org', '']) t.notOk(acceptableProviderUrl(bad), bad);
});

/** A local server answering each path as `routes` says. */
async function server(t: { teardown(fn: () => unknown): void }, routes: Record<string, (request: http.IncomingMessage, response: http.ServerResponse) => void>): Promise<string> {
  const instance = http.createServer((request, response) => {
    const route = routes[request.url ?? ''];
    if (route) route(request, response);
    else response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => instance.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => instance.close(() => resolve())));
  instance.unref();
  return `http://127.0.0.1:${(instance.address() as AddressInfo).port}`;
}

t.test('HTTP to a provider: redirects within the origin only, bounded answers, 5xx is unreachable', async (t) => {
  const elsewhere = await server(t, { '/jwks': (_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}') });
  const base = await server(t, {
    '/ok': (_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end('{"a":1}'),
    '/same': (_q, r) => r.writeHead(302, { location: '/ok' }).end(),
    '/other': (_q, r) => r.writeHead(302, { location: `${elsewhere}/jwks` }).end(),
    '/loop': (_q, r) => r.writeHead(302, { location: '/loop' }).end(),
    '/big': (_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end(`"${'x'.repeat(MAX_PROVIDER_RESPONSE_BYTES)}"`),
    '/big-chunked': (_q, r) => {
      r.writeHead(200, { 'content-type': 'application/json' });
      for (let i = 0; i < 40; i++) r.write('x'.repeat(8192));
      r.end();
    },
    '/html': (_q, r) => r.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>'),
    '/down': (_q, r) => r.writeHead(502).end('bad gateway'),
    '/busy': (_q, r) => r.writeHead(429).end(),
  });
  const get = (path: string) => providerRequest((input, init) => fetch(input, init), `${base}${path}`, { method: 'GET' }, 5000);
  t.same(await get('/ok'), { status: 200, body: { a: 1 } });
  t.same(await get('/same'), { status: 200, body: { a: 1 } }, 'a redirect within the origin is followed');
  t.same(await get('/missing'), { status: 404, body: { error: 'not found' } }, '4xx is the caller to judge');
  const cases: Array<[string, 'refused' | 'unreachable', RegExp]> = [
    ['/other', 'refused', /another host/],
    ['/loop', 'refused', /more than 3 redirects/],
    ['/big', 'refused', /exceeds/],
    ['/big-chunked', 'refused', /exceeds/],
    ['/html', 'refused', /not JSON/],
    ['/down', 'unreachable', /answered 502/],
    ['/busy', 'unreachable', /answered 429/],
  ];
  for (const [path, kind, message] of cases) {
    await t.rejects(get(path), { name: 'ProviderRequestError', kind, message }, path);
  }
  await t.rejects(
    providerRequest((input, init) => fetch(input, init), `${base}/same`, { method: 'POST', body: 'token=x' }, 5000),
    { kind: 'refused', message: /redirected/ },
    'a POST (introspection, with client credentials) is never redirected',
  );
  const closed = await server(t, {});
  await t.rejects(providerRequest(() => Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } })), `${closed}/x`, { method: 'GET' }, 5000), { kind: 'unreachable', message: /ECONNREFUSED/ });
  t.ok(new ProviderRequestError('refused', 'x') instanceof Error);
});

t.test('HTTP to a provider: a provider that does not answer in time is unreachable', async (t) => {
  // The provider never answers; the request's own timeout (100 ms) ends the wait.
  const base = await server(t, { '/hang': () => undefined });
  await t.rejects(providerRequest((input, init) => fetch(input, init), `${base}/hang`, { method: 'GET' }, 100), { kind: 'unreachable', message: /timed out/ });
});
