import t from 'tap';
import { startOtherNode, startTestApp } from '../helpers/app.ts';
import { LOCAL_POSTGRES } from '../helpers/database.ts';
import { waitFor } from '../helpers/processes.ts';
import { TEST_REDIS_URL, testRedis } from '../helpers/redis.ts';

// Two nodes sharing PostgreSQL and Redis: a domain's configuration changed on one takes effect on
// the other without a restart (the `domain-config` change topic crosses Redis with the commit).
t.test('a configuration written on one node reaches the other node\'s map and listeners', async (t) => {
  const redis = await testRedis(t);
  if (!redis) {
    t.fail('no Redis at TEST_REDIS_URL');
    return;
  }
  const channel = `${redis.prefix}events`;
  const writer = await startTestApp(t, { REDIS_URL: TEST_REDIS_URL, REDIS_EVENTS_CHANNEL: channel }, { databaseServer: process.env.TEST_DATABASE_URL || LOCAL_POSTGRES });
  const other = await startOtherNode(t, writer, { REDIS_URL: TEST_REDIS_URL, REDIS_EVENTS_CHANNEL: channel });
  const told: string[] = [];
  other.domainConfigs.onChange((domainId) => told.push(domainId));

  const { call } = writer;
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'nodes' } })).json().domain;
  t.equal((await call('PUT', `/v3/domains/${domain.id}/config`, { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://a', password: 'pw' } } })).statusCode, 201);
  await waitFor(async () => other.domainConfigs.configured().has(domain.id), 'the other node to see the new configuration', 10_000);
  t.same(other.domainConfigs.configured().get(domain.id), { identity: { driver: 'ldap' }, ldap: { password: 'pw', url: 'ldap://a' } });
  t.same(told, [domain.id]);

  await call('PATCH', `/v3/domains/${domain.id}/config/ldap/url`, { config: { url: 'ldap://b' } });
  await waitFor(async () => other.domainConfigs.configured().get(domain.id)?.ldap?.url === 'ldap://b', 'the other node to see the change', 10_000);
  t.same(told, [domain.id, domain.id]);

  // The other node's API answers from the database it shares.
  const read = await other.server.inject({ method: 'GET', url: `/v3/domains/${domain.id}/config`, headers: { 'x-auth-token': writer.adminToken } });
  t.same(read.json(), { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://b' } } });

  t.equal((await call('DELETE', `/v3/domains/${domain.id}/config/ldap`)).statusCode, 204);
  await waitFor(async () => other.domainConfigs.configured().get(domain.id)?.ldap === undefined, 'the other node to see the group deleted', 10_000);
  t.same(other.domainConfigs.configured().get(domain.id), { identity: { driver: 'ldap' } });
  t.same(told, [domain.id, domain.id, domain.id]);
});
