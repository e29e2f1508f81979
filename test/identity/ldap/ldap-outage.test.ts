import net from 'node:net';
import { performance } from 'node:perf_hooks';
import t from 'tap';
import { ADMIN_PASSWORD, startTestApp, type TestApp } from '../../helpers/app.ts';
import { MemoryDomainConfigs } from '../../helpers/domain-configs.ts';
import { LDAP_UNAVAILABLE as UNAVAILABLE, createDomain, ldapDomainConfig, startLdapPeer } from '../../helpers/ldap.ts';

// The directory of an LDAP domain goes away: its requests answer a Keystone-shaped 503 within the
// configured timeouts (real Keystone answers a generic 500 after its pool retries), SQL domains
// are unaffected, and once slapd is back the same process serves the domain again.

/** Runs `request` and how long it took, in ms (measured, never waited on). */
async function timed<T>(request: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await request();
  return { result, ms: performance.now() - start };
}

t.test('slapd stopped and started again under a running service', async (t) => {
  const peer = await startLdapPeer(t);
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, {}, { domainIdentityConfigs: configs });
  const domainId = await createDomain(app, 'ldap');
  configs.set(domainId, ldapDomainConfig(peer.url, { connection_timeout: '2', operation_timeout: '2' }));

  const before = await app.call('GET', `/v3/users?domain_id=${domainId}`);
  t.equal(before.statusCode, 200);
  const ids = before.json().users.map((user: { id: string }) => user.id);
  t.equal(ids.length, 5);
  t.equal((await app.login({ name: 'alice', domain: { name: 'ldap' } }, 'alice-secret')).status, 201);

  await peer.stop();

  const list = await timed(() => app.call('GET', `/v3/users?domain_id=${domainId}`));
  t.equal(list.result.statusCode, 503);
  t.same(list.result.json(), UNAVAILABLE);
  t.equal(list.result.headers['retry-after'], '5');
  t.ok(list.ms < 4000, `answered in ${Math.round(list.ms)} ms`);
  const get = await app.call('GET', `/v3/users/${ids[1]}`);
  t.equal(get.statusCode, 503);
  t.same(get.json(), UNAVAILABLE);
  const groups = await app.call('GET', `/v3/groups?domain_id=${domainId}`);
  t.equal(groups.statusCode, 503);
  const auth = await timed(() => app.login({ name: 'bob', domain: { name: 'ldap' } }, 'bob-secret'));
  t.equal(auth.result.status, 503, 'an LDAP user cannot be authenticated: 503, not 401');
  t.same(auth.result.body, UNAVAILABLE);
  t.ok(auth.ms < 4000, `answered in ${Math.round(auth.ms)} ms`);

  // The SQL domain is unaffected.
  t.equal((await app.login({ name: 'admin', domain: { name: 'Default' } }, ADMIN_PASSWORD)).status, 201);
  const sqlUsers = await app.call('GET', '/v3/users');
  t.equal(sqlUsers.statusCode, 200);
  t.same(sqlUsers.json().users.map((user: { name: string }) => user.name), ['admin']);

  await peer.start();

  // The same process serves the domain again at the first request; the ids are unchanged.
  const after = await app.call('GET', `/v3/users?domain_id=${domainId}`);
  t.equal(after.statusCode, 200);
  t.same(after.json().users.map((user: { id: string }) => user.id), ids);
  t.equal((await app.call('GET', `/v3/users/${ids[1]}`)).statusCode, 200);
  t.equal((await app.login({ name: 'bob', domain: { name: 'ldap' } }, 'bob-secret')).status, 201);
});

t.test('a directory that accepts connections but never answers: 503 after the operation timeout', async (t) => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        silent.close(() => resolve());
      }),
  );
  const port = (silent.address() as net.AddressInfo).port;
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, {}, { domainIdentityConfigs: configs });
  const domainId = await createDomain(app, 'silent');
  configs.set(domainId, ldapDomainConfig(`ldap://127.0.0.1:${port}`, { connection_timeout: '1', operation_timeout: '1' }));

  const list = await timed(() => app.call('GET', `/v3/users?domain_id=${domainId}`));
  t.equal(list.result.statusCode, 503);
  t.same(list.result.json(), UNAVAILABLE);
  t.ok(list.ms >= 900 && list.ms < 3500, `answered in ${Math.round(list.ms)} ms (operation timeout 1 s)`);
  const auth = await timed(() => app.login({ name: 'alice', domain: { name: 'silent' } }, 'alice-secret'));
  t.equal(auth.result.status, 503);
  t.ok(auth.ms < 3500, `answered in ${Math.round(auth.ms)} ms`);
  t.equal((await app.call('GET', '/v3/users')).statusCode, 200, 'SQL users unaffected');
});
