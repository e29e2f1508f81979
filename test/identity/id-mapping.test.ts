import { createHash } from 'node:crypto';
import t from 'tap';
import { IdMappings, publicIdOf } from '../../src/identity/id-mapping.ts';
import { IdentityRepository, type DomainBackend } from '../../src/identity/identity-repository.ts';
import { SqlIdentityBackend } from '../../src/identity/sql-identity-backend.ts';
import { IdMappingEntity } from '../../src/store/entities.ts';
import { MemoryDomainConfigs } from '../helpers/domain-configs.ts';
import { openTestStore } from '../helpers/store.ts';
import { startTestApp } from '../helpers/app.ts';

// Keystone's public ids of directory entities (sha256 of domain_id + entity_type + local_id) and
// the id_mapping table; the repository places ids through it and rebuilds a domain's back end
// when its configuration changes.

t.test('public ids are Keystone sha256 ids, stored once, found by any node', async (t) => {
  const store = await openTestStore(t);
  const mappings = new IdMappings();
  const alice = { domainId: '5344b824f78e4a16857ccd1b4013c45d', entityType: 'user' as const, localId: 'alice' };
  const expected = createHash('sha256').update('5344b824f78e4a16857ccd1b4013c45duseralice').digest('hex');
  t.equal(publicIdOf(alice), expected);
  t.same(await mappings.remember(store.reader(), [alice, alice]), [expected, expected]);
  t.same(await mappings.remember(store.reader(), [alice]), [expected], 'seen again: nothing new');
  const rows = await store.reader().find(IdMappingEntity, {});
  t.same(rows.map((row) => ({ ...row })), [{ publicId: expected, domainId: alice.domainId, localId: 'alice', entityType: 'user' }]);
  // Another node (a fresh index) finds it in the table, and after load() without a query.
  const other = new IdMappings();
  t.equal(other.known(expected), undefined);
  t.same(await other.find(store.reader(), expected), alice);
  const loaded = new IdMappings();
  await loaded.load(store.reader());
  t.same(loaded.known(expected), alice);
  t.equal(await loaded.find(store.reader(), 'not-a-public-id'), undefined);
});

t.test('the repository builds a configured domain back end once, rebuilds it on change and closes the old one', async (t) => {
  const store = await openTestStore(t);
  const sql = new SqlIdentityBackend();
  const configs = new MemoryDomainConfigs();
  const mappings = new IdMappings();
  const built: Array<{ domainId: string; url: unknown; closed: boolean }> = [];
  const repository = new IdentityRepository(sql, {
    configs,
    mappings,
    drivers: {
      fake: (domainId, groups) => {
        const record = { domainId, url: groups.ldap?.url, closed: false };
        built.push(record);
        return Object.assign(Object.create(sql) as DomainBackend, { writes: null, close: async () => void (record.closed = true) });
      },
    },
  });
  t.equal(repository.backendFor('d1'), sql, 'no configuration: the default');
  configs.set('d1', { identity: { driver: 'sql' } });
  t.equal(repository.backendFor('d1'), sql);
  configs.set('d1', { identity: { driver: 'fake' }, ldap: { url: 'one' } });
  const first = repository.backendFor('d1');
  t.not(first, sql);
  t.equal(repository.backendFor('d1'), first, 'built once');
  configs.set('d1', { identity: { driver: 'fake' }, ldap: { url: 'two' } });
  const second = repository.backendFor('d1');
  t.not(second, first);
  t.same(built, [
    { domainId: 'd1', url: 'one', closed: true },
    { domainId: 'd1', url: 'two', closed: false },
  ]);
  // Ids: a mapped public id belongs to its domain's back end, any other id to the default.
  const [userId] = await mappings.remember(store.reader(), [{ domainId: 'd1', entityType: 'user', localId: 'u' }]);
  t.equal(repository.backendOf(userId!), second);
  t.equal(repository.backendOf('0123456789abcdef0123456789abcdef'), sql);
  t.equal(repository.backendOfQuery({ domainId: 'd1' }), second);
  t.equal(repository.backendOfQuery({}), sql, 'a list naming no domain is the default back end');
  // A mapping written by another node is found by resolve.
  const [groupId] = await new IdMappings().remember(store.reader(), [{ domainId: 'd1', entityType: 'group', localId: 'g' }]);
  t.equal(repository.backendOf(groupId!), sql);
  t.equal(await repository.resolve(groupId!, store.reader()), second);
  configs.set('d2', { identity: { driver: 'nonsense' } });
  t.throws(() => repository.backendFor('d2'), { message: /Unknown identity driver "nonsense"/ });
  await repository.close();
  t.equal(built[1]!.closed, true);
});

t.test('deleting a SQL user still removes its application credentials and access rules (trigger, not foreign key)', async (t) => {
  const app = await startTestApp(t);
  const user = (await app.call('POST', '/v3/users', { user: { name: 'leaver', password: 'Leaver-secret-1' } })).json().user.id as string;
  const project = (await app.call('GET', '/v3/projects?name=admin')).json().projects[0].id as string;
  const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  t.equal((await app.call('PUT', `/v3/projects/${project}/users/${user}/roles/${member}`)).statusCode, 204);
  const session = await app.login({ id: user }, 'Leaver-secret-1', { project: { id: project } });
  const created = await app.call(
    'POST',
    `/v3/users/${user}/application_credentials`,
    { application_credential: { name: 'c', access_rules: [{ service: 'compute', path: '/v2.1/servers', method: 'GET' }] } },
    session.token,
  );
  t.equal(created.statusCode, 201);
  const count = async (table: string) =>
    Number((await app.app.store.reader().getConnection().execute<{ n: number }[]>(`select count(*) as n from ${table} where user_id = ?`, [user]))[0]?.n);
  t.equal(await count('application_credential'), 1);
  t.equal(await count('access_rule'), 1);
  t.equal((await app.call('DELETE', `/v3/users/${user}`)).statusCode, 204);
  t.equal(await count('application_credential'), 0);
  t.equal(await count('access_rule'), 0);
});
