import { createHash } from 'node:crypto';
import t from 'tap';
import { startTestApp } from '../../helpers/app.ts';
import { freePort } from '../../helpers/processes.ts';
import { ldapDomainConfig, startLdapPeer } from '../../helpers/ldap.ts';

// The whole path an operator takes, with no test-only configuration source: a domain is given an
// LDAP back end through Keystone's domain configuration API (the application's own domain config
// service), its users come from the directory at once, a changed configuration takes effect without
// a restart, and deleting it makes the domain an SQL one again.

t.test('an LDAP domain configured through /v3/domains/{id}/config', async (t) => {
  const peer = await startLdapPeer(t);
  const app = await startTestApp(t);
  const domain = await app.call('POST', '/v3/domains', { domain: { name: 'ldap-by-api' } });
  t.equal(domain.statusCode, 201);
  const domainId = domain.json().domain.id as string;
  const alice = createHash('sha256').update(`${domainId}useralice`).digest('hex');
  const names = async () => {
    const response = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    return { status: response.statusCode, names: response.statusCode === 200 ? response.json().users.map((user: { name: string }) => user.name) : response.json() };
  };

  t.same(await names(), { status: 200, names: [] }, 'an SQL domain without users before it is configured');

  const put = await app.call('PUT', `/v3/domains/${domainId}/config`, { config: ldapDomainConfig(peer.url) });
  t.equal(put.statusCode, 201, put.body);
  t.notOk('password' in put.json().config.ldap, 'the bind password is never returned');
  t.same(await names(), { status: 200, names: ['alice', 'bob', 'carol', 'dave', 'eve'] }, 'the directory’s users at once');

  const login = await app.call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['password'], password: { user: { name: 'alice', domain: { name: 'ldap-by-api' }, password: 'alice-secret' } } } },
  });
  t.equal(login.statusCode, 201, 'a directory user logs in by name and domain');
  t.equal(login.json().token.user.id, alice, 'with the public id Keystone gives her');

  // A directory nobody answers at: the new configuration applies without a restart.
  const closed = `ldap://127.0.0.1:${await freePort()}`;
  const moved = await app.call('PATCH', `/v3/domains/${domainId}/config/ldap`, { config: { ldap: { url: closed } } });
  t.equal(moved.statusCode, 200, moved.body);
  const unreachable = await names();
  t.equal(unreachable.status, 503, 'the unreachable directory is a 503');
  t.match(unreachable.names, { error: { code: 503, title: 'Service Unavailable' } });

  const back = await app.call('PATCH', `/v3/domains/${domainId}/config/ldap`, { config: { ldap: { url: peer.url } } });
  t.equal(back.statusCode, 200);
  t.same((await names()).names, ['alice', 'bob', 'carol', 'dave', 'eve'], 'and back');

  const token = login.headers['x-subject-token'] as string;
  const validate = () => app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
  t.equal((await validate()).statusCode, 200, 'her token validates (and is cached)');

  const removed = await app.call('DELETE', `/v3/domains/${domainId}/config`);
  t.equal(removed.statusCode, 204);
  t.same(await names(), { status: 200, names: [] }, 'without its configuration the domain is SQL again');
  t.equal((await validate()).statusCode, 404, 'and her token no longer validates: no cache kept the directory user');
});
