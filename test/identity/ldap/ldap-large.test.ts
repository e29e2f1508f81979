import { createHash } from 'node:crypto';
import t from 'tap';
import { startTestApp } from '../../helpers/app.ts';
import { MemoryDomainConfigs } from '../../helpers/domain-configs.ts';
import { ldapDomainConfig, startLdapPeer } from '../../helpers/ldap.ts';

// A directory larger than one list page and one id_mapping statement: every user is listed once, in
// directory order (streamed in LIST_PAGE_SIZE pages), read through LDAP paged results, and mapped.

const USERS = 2500;

t.test('a directory of 2,505 users', async (t) => {
  const peer = await startLdapPeer(t, { users: USERS });
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, { LIST_PAGE_SIZE: '700' }, { domainIdentityConfigs: configs });
  const created = await app.call('POST', '/v3/domains', { domain: { name: 'big' } });
  const domainId = created.json().domain.id as string;
  configs.set(domainId, ldapDomainConfig(peer.url, { page_size: '500' }));

  const response = await app.call('GET', `/v3/users?domain_id=${domainId}`);
  t.equal(response.statusCode, 200);
  const users = response.json().users as { id: string; name: string; enabled: boolean }[];
  const expectedNames = ['alice', 'bob', 'carol', 'dave', 'eve', ...Array.from({ length: USERS }, (_, i) => `user${String(i + 1).padStart(5, '0')}`)];
  t.same(
    users.map((user) => user.name),
    expectedNames,
  );
  t.equal(users[2000]!.id, createHash('sha256').update(`${domainId}user${users[2000]!.name}`).digest('hex'));
  const [row] = await app.app.store.reader().getConnection().execute<{ count: string | number }[]>('select count(*) as count from id_mapping where domain_id = ?', [domainId]);
  t.equal(Number(row?.count), USERS + 5, 'every user mapped once');

  const disabled = await app.call('GET', `/v3/users?domain_id=${domainId}&enabled=false`);
  t.equal(disabled.json().users.length, 1 + USERS / 10);
  const bulk = (await app.call('GET', `/v3/groups?domain_id=${domainId}&name=bulk`)).json().groups[0].id as string;
  const members = await app.call('GET', `/v3/groups/${bulk}/users`);
  t.equal(members.json().users.length, 100);
  const login = await app.login({ name: 'user00501', domain: { name: 'big' } }, 'bulk-secret');
  t.equal(login.status, 201, JSON.stringify(login.body));
  t.equal((await app.login({ name: 'user00501', domain: { name: 'big' } }, 'wrong')).status, 401);
  t.equal((await app.login({ name: 'user00500', domain: { name: 'big' } }, 'bulk-secret')).status, 401, 'every 10th is disabled');
});
