import net from 'node:net';
import t from 'tap';
import { recordResolvedModules } from '../../helpers/resolved-modules.ts';

// A service without LDAP domains does not hold ldapts's code (issue 21, item 6: memory per worker):
// the pool loads it with its first connection. The pool is imported after the recording starts.
const loaded = recordResolvedModules();
const ldapts = () => loaded(/node_modules\/ldapts\//);

const { LdapPool } = await import('../../../src/identity/ldap/ldap-pool.ts');
const { parseLdapOptions } = await import('../../../src/identity/ldap/ldap-options.ts');

t.test('ldapts is loaded by the first connection, not by the pool', async (t) => {
  // A port nothing listens on: the connection is refused at once.
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));

  const pool = new LdapPool(parseLdapOptions({ url: `ldap://127.0.0.1:${port}`, suffix: 'dc=example,dc=org' }));
  t.teardown(() => pool.close());
  t.same(ldapts(), [], 'a pool that has not connected has not loaded ldapts');
  await t.rejects(pool.checkPassword('cn=someone,dc=example,dc=org', 'secret'), { name: 'UnavailableError' }, 'the directory cannot be reached (503)');
  t.ok(ldapts().length > 0, 'connecting loaded ldapts');
});
