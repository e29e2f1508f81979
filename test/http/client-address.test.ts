import t from 'tap';
import { clientAddressResolver } from '../../src/http/client-address.ts';

t.test('without TRUSTED_PROXIES the socket peer is the client, whatever the headers say', async (t) => {
  const resolve = clientAddressResolver([]);
  t.equal(resolve('198.51.100.4', { 'x-forwarded-for': '203.0.113.1' }), '198.51.100.4');
  t.equal(resolve('::ffff:198.51.100.4', {}), '198.51.100.4', 'IPv4-mapped IPv6 is IPv4');
  t.equal(resolve(undefined, {}), '');
});

t.test('behind trusted proxies, X-Forwarded-For is read from the right', async (t) => {
  const resolve = clientAddressResolver(['10.0.0.0/8', '2001:db8::1']);
  t.equal(resolve('10.0.0.5', { 'x-forwarded-for': '203.0.113.1' }), '203.0.113.1');
  t.equal(resolve('10.0.0.5', { 'x-forwarded-for': '203.0.113.9, 203.0.113.1' }), '203.0.113.1', 'what the client wrote before the last hop is not believed');
  t.equal(resolve('10.0.0.5', { 'x-forwarded-for': '203.0.113.1, 10.2.3.4' }), '203.0.113.1', 'trusted hops are skipped');
  t.equal(resolve('2001:db8::1', { 'x-forwarded-for': '2001:db8:ffff::7' }), '2001:db8:ffff::7');
  t.equal(resolve('10.0.0.5', {}), '10.0.0.5', 'no header: the proxy itself');
  t.equal(resolve('10.0.0.5', { 'x-forwarded-for': 'unknown, 10.1.1.1' }), '10.1.1.1', 'garbage stops the walk at the last trusted hop');
  t.equal(resolve('10.0.0.5', { 'x-forwarded-for': ['203.0.113.1', '10.3.3.3'] as unknown as string }), '203.0.113.1', 'repeated headers are one list');
  t.equal(resolve('198.51.100.4', { 'x-forwarded-for': '203.0.113.1' }), '198.51.100.4', 'an untrusted peer is the client');
});
