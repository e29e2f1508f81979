import t from 'tap';
import { isTrustedProxyFunction } from '../../src/gateway/gateway.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// X-Forwarded-For / -Proto / -Host as the upstream receives them. The test client's socket peer is
// 127.0.0.1; TRUSTED_PROXIES decides whether it is one of our load balancers.

const FORGED = {
  'x-forwarded-for': '203.0.113.9, 198.51.100.2',
  'x-forwarded-proto': 'https',
  'x-forwarded-host': 'api.example.com',
};

t.test('isTrustedProxyFunction: addresses and CIDR blocks; nothing when the list is empty', async (t) => {
  const none = isTrustedProxyFunction([]);
  t.equal(none('127.0.0.1'), false);
  const trusted = isTrustedProxyFunction(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32']);
  t.equal(trusted('10.1.2.3'), true);
  t.equal(trusted('192.0.2.7'), true);
  t.equal(trusted('192.0.2.8'), false);
  t.equal(trusted('::ffff:10.1.2.3'), true, 'IPv6-mapped IPv4');
  t.equal(trusted('2001:db8:1::5'), true);
  t.equal(trusted(''), false, 'no peer (socket already gone)');
  t.equal(trusted('not-an-address'), false);
});

t.test('a peer that is not a trusted proxy cannot forge the X-Forwarded-* headers', async (t) => {
  // A TRUSTED_PROXIES list that does not include the peer: the same as none.
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '10.0.0.0/8' });
  const path = `/echo/v1/${w.projectId}/things`;

  const forged = await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member, ...FORGED } });
  t.equal(forged.status, 200);
  let received = w.upstream.received.at(-1)!;
  t.equal(received.headers['x-forwarded-for'], '127.0.0.1', 'the chain the client wrote is replaced by its address');
  t.equal(received.headers['x-forwarded-proto'], 'http', 'the scheme is ours, not the client’s');
  t.equal(received.headers['x-forwarded-host'], `127.0.0.1:${w.port}`, 'the host is the Host header the client sent us');

  // Repeated header lines are no way around it.
  const repeated = await rawRequest(w.port, {
    path,
    headers: { 'x-auth-token': w.member, 'x-forwarded-for': ['203.0.113.9', '198.51.100.2'] as unknown as string },
  });
  t.equal(repeated.status, 200);
  received = w.upstream.received.at(-1)!;
  t.equal(received.headers['x-forwarded-for'], '127.0.0.1');

  const plain = await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } });
  t.equal(plain.status, 200);
  t.equal(w.upstream.received.at(-1)!.headers['x-forwarded-for'], '127.0.0.1');
});

t.test('behind a trusted proxy the chain is kept and extended, and its scheme and host are believed', async (t) => {
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '192.0.2.0/24,127.0.0.0/8' });
  const path = `/echo/v1/${w.projectId}/things`;

  const proxied = await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member, ...FORGED } });
  t.equal(proxied.status, 200);
  let received = w.upstream.received.at(-1)!;
  t.equal(received.headers['x-forwarded-for'], '203.0.113.9, 198.51.100.2, 127.0.0.1', 'the proxy’s chain, then the proxy itself');
  t.equal(received.headers['x-forwarded-proto'], 'https');
  t.equal(received.headers['x-forwarded-host'], 'api.example.com');

  // Several X-Forwarded-For lines are one list (RFC 9110 §5.3).
  const repeated = await rawRequest(w.port, {
    path,
    headers: { 'x-auth-token': w.member, 'x-forwarded-for': ['203.0.113.9', '198.51.100.2'] as unknown as string },
  });
  t.equal(repeated.status, 200);
  received = w.upstream.received.at(-1)!;
  t.equal(received.headers['x-forwarded-for'], '203.0.113.9, 198.51.100.2, 127.0.0.1');

  // A trusted proxy that sends none of them: our own values.
  const bare = await rawRequest(w.port, { path, headers: { 'x-auth-token': w.member } });
  t.equal(bare.status, 200);
  received = w.upstream.received.at(-1)!;
  t.equal(received.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(received.headers['x-forwarded-proto'], 'http');
  t.equal(received.headers['x-forwarded-host'], `127.0.0.1:${w.port}`);

  // Requests the gateway refuses never reach the upstream, whatever they carry.
  const before = w.upstream.received.length;
  t.equal((await rawRequest(w.port, { path, headers: FORGED })).status, 401);
  t.equal(w.upstream.received.length, before);
});
