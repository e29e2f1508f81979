import { Client } from 'ldapts';
import t from 'tap';
import { LDAP_ADMIN_DN, LDAP_ADMIN_PASSWORD, LDAP_SUFFIX, startLdapPeer } from './ldap.ts';
import { takenPortFirst } from './processes.ts';

t.test('a directory whose port was taken before slapd could bind it is started on another', async (t) => {
  // Taken as an outgoing connection takes it: start.sh's check for listeners passes, slapd's bind fails.
  const { taken, offered, ports } = await takenPortFirst(t);
  const peer = await startLdapPeer(t, { ports });
  t.equal(offered.length, 2, 'a second port was asked for');
  t.equal(offered[0], taken);
  t.equal(peer.url, `ldap://127.0.0.1:${offered[1]}`, 'the directory listens on the second');
  const client = new Client({ url: peer.url });
  t.teardown(() => client.unbind());
  await client.bind(LDAP_ADMIN_DN, LDAP_ADMIN_PASSWORD);
  const { searchEntries } = await client.search(`ou=Users,${LDAP_SUFFIX}`, { scope: 'one', filter: '(uid=alice)' });
  t.equal(searchEntries.length, 1, "the seed's alice is there");
});
