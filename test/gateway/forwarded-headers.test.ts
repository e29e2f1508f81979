import t from 'tap';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawHeaderRequest, rawRequest } from '../helpers/upstream.ts';

// X-Forwarded-For / -Proto / -Host as the upstream receives them. The test client's socket peer is
// 127.0.0.1; TRUSTED_PROXIES decides whether it is one of our load balancers.

const FORGED = {
  'x-forwarded-for': '203.0.113.9, 198.51.100.2',
  'x-forwarded-proto': 'https',
  'x-forwarded-host': 'api.example.com',
};
// Two X-Forwarded-For lines: one list (RFC 9110 §5.3), whichever way it is treated.
const REPEATED = { 'x-forwarded-for': ['203.0.113.9', '198.51.100.2'] as unknown as string };

/** Sends a member's request with `headers` through the gateway; the X-Forwarded-* the upstream got. */
async function forwardedBy(w: Awaited<ReturnType<typeof gatewayWorld>>, t: { equal(a: unknown, b: unknown): void }, headers: Record<string, string>) {
  const response = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.member, ...headers } });
  t.equal(response.status, 200);
  const received = w.upstream.received.at(-1)!.headers;
  return { for: received['x-forwarded-for'], proto: received['x-forwarded-proto'], host: received['x-forwarded-host'] };
}

t.test('a peer that is not a trusted proxy cannot forge the X-Forwarded-* headers', async (t) => {
  // A TRUSTED_PROXIES list that does not include the peer: the same as none.
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '10.0.0.0/8' });
  const ours = { for: '127.0.0.1', proto: 'http', host: `127.0.0.1:${w.port}` };
  t.same(await forwardedBy(w, t, FORGED), ours, 'the chain, scheme and host the client wrote are replaced by its address, our scheme, its Host');
  t.same(await forwardedBy(w, t, REPEATED), ours, 'repeated header lines are no way around it');
  t.same(await forwardedBy(w, t, {}), ours);
});

t.test('behind a trusted proxy the chain is kept and extended, and its scheme and host are believed', async (t) => {
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '192.0.2.0/24,127.0.0.0/8' });
  t.same(await forwardedBy(w, t, FORGED), { for: '203.0.113.9, 198.51.100.2, 127.0.0.1', proto: 'https', host: 'api.example.com' }, 'the proxy’s chain, then the proxy itself');
  t.equal((await forwardedBy(w, t, REPEATED)).for, '203.0.113.9, 198.51.100.2, 127.0.0.1');
  t.same(await forwardedBy(w, t, {}), { for: '127.0.0.1', proto: 'http', host: `127.0.0.1:${w.port}` }, 'a trusted proxy that sends none of them: our own values');

  // Requests the gateway refuses never reach the upstream, whatever they carry.
  const before = w.upstream.received.length;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: FORGED })).status, 401);
  t.equal(w.upstream.received.length, before);
});

t.test('Forwarded, X-Real-Ip, X-Forwarded-Prefix and method overrides never reach the service', async (t) => {
  for (const trustedProxies of ['10.0.0.0/8', '127.0.0.0/8']) {
    const w = await gatewayWorld(t, { TRUSTED_PROXIES: trustedProxies });
    const trusted = trustedProxies === '127.0.0.0/8';
    // oslo.middleware's HTTPProxyToWSGI reads Forwarded before X-Forwarded-*: a client must not pick
    // the scheme and host a service sees, from any peer (a trusted proxy's X-Forwarded-* say it all).
    const response = await rawRequest(w.port, {
      path: `/echo/v1/${w.projectId}/things`,
      headers: {
        'x-auth-token': w.reader,
        forwarded: 'for=203.0.113.9;proto=https;host=evil.example',
        'x-real-ip': '203.0.113.9',
        'x-forwarded-prefix': '/admin',
        'x-forwarded-port': '8443',
        'x-http-method-override': 'DELETE',
        'X-HTTP-Method': 'DELETE',
        'X-Method-Override': 'DELETE',
      },
    });
    t.equal(response.status, 200, 'policy allowed the reader a GET');
    const received = w.upstream.received.at(-1)!;
    t.equal(received.method, 'GET');
    const names = Object.keys(received.headers);
    for (const dropped of ['forwarded', 'x-real-ip', 'x-forwarded-prefix', 'x-http-method-override', 'x-http-method', 'x-method-override']) {
      t.notOk(names.includes(dropped), `${dropped} is not forwarded (${trusted ? 'trusted' : 'untrusted'} peer)`);
    }
    t.equal(received.headers['x-forwarded-port'], trusted ? '8443' : undefined, 'X-Forwarded-Port only from a trusted proxy');
    t.equal(received.headers['x-forwarded-proto'], 'http');
  }
});

t.test('hop-by-hop: headers the client names in Connection, and every Proxy-* header, stop at the gateway', async (t) => {
  const w = await gatewayWorld(t);
  const response = await rawHeaderRequest(w.port, {
    path: `/echo/v1/${w.projectId}/things`,
    headers: [
      ['X-Auth-Token', w.member],
      // rawHeaderRequest sends 'Connection: close' too: the two lines are one list (RFC 9110 §5.3).
      ['Connection', 'X-Hop-One , x-hop-two,,Keep-Alive'],
      ['X-Hop-One', '1'],
      ['x-hop-two', '2'],
      ['X-Kept', '3'],
      ['Proxy-Authorization', 'Basic Zm9vOmJhcg=='],
      ['Proxy-Connection', 'keep-alive'],
      ['Proxy-Status', 'forged'],
      ['Proxy-Anything', 'forged'],
    ],
  });
  t.equal(response.status, 200);
  const received = w.upstream.received.at(-1)!.headers;
  t.equal(received['x-kept'], '3', 'a header not named in Connection is forwarded');
  for (const dropped of ['x-hop-one', 'x-hop-two', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'proxy-status', 'proxy-anything']) {
    t.equal(received[dropped], undefined, `${dropped} is not forwarded`);
  }
  // The token named in Connection is the client's own business: it still authenticates the request
  // here, and the service behind does not receive it.
  const before = w.upstream.received.length;
  const named = await rawHeaderRequest(w.port, {
    path: `/echo/v1/${w.projectId}/things`,
    headers: [
      ['X-Auth-Token', w.member],
      ['Connection', 'x-auth-token'],
    ],
  });
  t.equal(named.status, 200);
  t.equal(w.upstream.received.length, before + 1);
  t.equal(w.upstream.received.at(-1)!.headers['x-auth-token'], undefined);
  t.equal(w.upstream.received.at(-1)!.headers['x-user-id'] !== undefined, true, 'identity headers are the gateway’s own, set all the same');
});
