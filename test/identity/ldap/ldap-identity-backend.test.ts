import { createHash } from 'node:crypto';
import t from 'tap';
import { Client } from 'ldapts';
import { startTestApp, type TestApp } from '../../helpers/app.ts';
import { MemoryDomainConfigs } from '../../helpers/domain-configs.ts';
import { LDAP_ADMIN_DN, LDAP_ADMIN_PASSWORD, LDAP_SUFFIX, SEED_USERS, createDomain, ldapDomainConfig, startLdapPeer } from '../../helpers/ldap.ts';

// A domain whose identity back end is the LDAP directory (a real slapd with the peer's seed), read
// through the HTTP API as real Keystone 22 answers (shared/peers/ldap/README.md): public ids are
// Keystone's sha256, users and groups are read-only (generic 403), passwords are checked by a bind,
// group membership in the directory gives roles, and SQL domains are unaffected.

const FORBIDDEN = { error: { code: 403, title: 'Forbidden', message: 'You are not authorized to perform the requested action.' } };
const UNAUTHORIZED = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };

/** Keystone's recipe, independently: sha256 of domain_id + entity_type + local_id (keys sorted), hex. */
function keystoneId(domainId: string, entityType: 'user' | 'group', localId: string): string {
  return createHash('sha256').update(`${domainId}${entityType}${localId}`, 'utf8').digest('hex');
}

t.test('an LDAP domain through the API', async (t) => {
  const peer = await startLdapPeer(t);
  const configs = new MemoryDomainConfigs();
  const app = await startTestApp(t, {}, { domainIdentityConfigs: configs });
  const domainId = await createDomain(app, 'ldap');
  configs.set(domainId, ldapDomainConfig(peer.url));
  const userId = (uid: string) => keystoneId(domainId, 'user', uid);
  const groupId = (cn: string) => keystoneId(domainId, 'group', cn);

  await t.test('users are listed in directory order with Keystone public ids; optional attributes only when present', async (t) => {
    const response = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    t.equal(response.statusCode, 200);
    const users = response.json().users as Record<string, unknown>[];
    t.same(
      users,
      SEED_USERS.map((seed) => ({
        ...('email' in seed ? { email: seed.email } : {}),
        ...('description' in seed ? { description: seed.description } : {}),
        id: userId(seed.name),
        name: seed.name,
        domain_id: domainId,
        enabled: seed.enabled,
        password_expires_at: null,
        options: {},
        links: { self: `http://keystone.test:5000/v3/users/${userId(seed.name)}` },
      })),
    );
    const dave = users.find((user) => user.name === 'dave')!;
    t.notOk('email' in dave, 'dave has no email key');
    t.notOk('description' in dave, 'dave has no description key');
    t.notOk('default_project_id' in dave);
    t.match(users[0]!.id, /^[0-9a-f]{64}$/);
    // Each mapping is stored the first time the entity is seen.
    const rows = await app.app.store.reader().getConnection().execute<{ public_id: string; domain_id: string; local_id: string; entity_type: string }[]>(
      "select public_id, domain_id, local_id, entity_type from id_mapping where entity_type = 'user' order by local_id",
    );
    t.same(
      rows.map((row) => ({ ...row })),
      SEED_USERS.map((seed) => ({ public_id: userId(seed.name), domain_id: domainId, local_id: seed.name, entity_type: 'user' })).sort((a, b) => a.local_id.localeCompare(b.local_id)),
    );
  });

  await t.test('filters: name and enabled', async (t) => {
    const byName = await app.call('GET', `/v3/users?domain_id=${domainId}&name=dave`);
    t.same(byName.json().users.map((user: { id: string }) => user.id), [userId('dave')]);
    const disabled = await app.call('GET', `/v3/users?domain_id=${domainId}&enabled=false`);
    t.same(disabled.json().users.map((user: { name: string }) => user.name), ['eve']);
    const enabled = await app.call('GET', `/v3/users?domain_id=${domainId}&enabled=true`);
    t.same(enabled.json().users.map((user: { name: string }) => user.name), ['alice', 'bob', 'carol', 'dave']);
  });

  await t.test('without domain_id only the default domain (SQL) users are listed', async (t) => {
    const all = await app.call('GET', '/v3/users');
    t.equal(all.statusCode, 200);
    t.same(all.json().users.map((user: { name: string }) => user.name), ['admin']);
    const alice = await app.call('GET', '/v3/users?name=alice');
    t.same(alice.json().users, []);
  });

  await t.test('get by id; unknown ids are 404', async (t) => {
    const response = await app.call('GET', `/v3/users/${userId('eve')}`);
    t.equal(response.statusCode, 200);
    t.match(response.json().user, { id: userId('eve'), name: 'eve', enabled: false, domain_id: domainId, email: 'eve@example.org' });
    for (const id of ['deadbeef', 'f'.repeat(64)]) {
      const missing = await app.call('GET', `/v3/users/${id}`);
      t.equal(missing.statusCode, 404);
      t.same(missing.json(), { error: { code: 404, title: 'Not Found', message: `Could not find user: ${id}.` } });
    }
  });

  await t.test('groups, members and memberships', async (t) => {
    const groups = await app.call('GET', `/v3/groups?domain_id=${domainId}`);
    t.equal(groups.statusCode, 200);
    t.same(
      groups.json().groups.map((group: Record<string, unknown>) => ({ id: group.id, name: group.name, description: group.description, domain_id: group.domain_id })),
      [
        { id: groupId('developers'), name: 'developers', description: 'Developers', domain_id: domainId },
        { id: groupId('admins'), name: 'admins', description: 'Administrators', domain_id: domainId },
      ],
    );
    const group = await app.call('GET', `/v3/groups/${groupId('admins')}`);
    t.equal(group.statusCode, 200);
    t.equal(group.json().group.name, 'admins');
    const members = await app.call('GET', `/v3/groups/${groupId('developers')}/users`);
    t.equal(members.statusCode, 200);
    t.same(members.json().users.map((user: { id: string; name: string }) => [user.name, user.id]), [
      ['alice', userId('alice')],
      ['bob', userId('bob')],
    ]);
    const ofAlice = await app.call('GET', `/v3/users/${userId('alice')}/groups`);
    t.same(ofAlice.json().groups.map((group: { name: string }) => group.name).sort(), ['admins', 'developers']);
    const ofDave = await app.call('GET', `/v3/users/${userId('dave')}/groups`);
    t.same(ofDave.json().groups, []);
    t.equal((await app.call('HEAD', `/v3/groups/${groupId('developers')}/users/${userId('bob')}`)).statusCode, 204);
    t.equal((await app.call('HEAD', `/v3/groups/${groupId('developers')}/users/${userId('carol')}`)).statusCode, 404);
  });

  await t.test('every write to the directory domain is the generic 403', async (t) => {
    const writes: Array<[string, string, unknown]> = [
      ['POST', '/v3/users', { user: { name: 'zed', domain_id: domainId } }],
      ['PATCH', `/v3/users/${userId('alice')}`, { user: { enabled: false } }],
      ['DELETE', `/v3/users/${userId('alice')}`, undefined],
      ['POST', '/v3/groups', { group: { name: 'new', domain_id: domainId } }],
      ['PATCH', `/v3/groups/${groupId('admins')}`, { group: { description: 'x' } }],
      ['DELETE', `/v3/groups/${groupId('admins')}`, undefined],
      ['PUT', `/v3/groups/${groupId('admins')}/users/${userId('dave')}`, undefined],
      ['DELETE', `/v3/groups/${groupId('admins')}/users/${userId('alice')}`, undefined],
    ];
    for (const [method, url, body] of writes) {
      const response = await app.call(method as 'POST', url, body);
      t.equal(response.statusCode, 403, `${method} ${url}`);
      t.same(response.json(), FORBIDDEN);
    }
    const change = await app.call('POST', `/v3/users/${userId('alice')}/password`, { user: { original_password: 'alice-secret', password: 'new-Secret-1' } }, null);
    t.equal(change.statusCode, 403);
    t.same(change.json(), FORBIDDEN);
    // Nothing changed in the directory.
    const alice = await app.call('GET', `/v3/users/${userId('alice')}`);
    t.equal(alice.json().user.enabled, true);
    t.equal((await app.login({ name: 'alice', domain: { name: 'ldap' } }, 'alice-secret')).status, 201);
  });

  await t.test('memberships across back ends are refused as Keystone does (CrossBackendNotAllowed, generic 403)', async (t) => {
    const sqlGroup = await app.call('POST', '/v3/groups', { group: { name: 'sql-staff', domain_id: 'default' } });
    t.equal(sqlGroup.statusCode, 201);
    const sqlGroupId = sqlGroup.json().group.id as string;
    const admin = (await app.call('GET', '/v3/users?name=admin')).json().users[0].id as string;
    for (const [method, url] of [
      ['PUT', `/v3/groups/${sqlGroupId}/users/${userId('alice')}`],
      ['HEAD', `/v3/groups/${sqlGroupId}/users/${userId('alice')}`],
      ['DELETE', `/v3/groups/${sqlGroupId}/users/${userId('alice')}`],
      ['HEAD', `/v3/groups/${groupId('developers')}/users/${admin}`],
    ] as const) {
      const response = await app.call(method, url);
      t.equal(response.statusCode, 403, `${method} ${url}`);
      if (method !== 'HEAD') t.same(response.json(), FORBIDDEN);
    }
    const members = await app.call('GET', `/v3/groups/${sqlGroupId}/users`);
    t.same(members.json().users, [], 'nothing stored');
  });

  await t.test('password authentication binds as the user; every failure is the generic 401', async (t) => {
    const byName = await app.login({ name: 'alice', domain: { name: 'ldap' } }, 'alice-secret');
    t.equal(byName.status, 201);
    t.same(byName.body.token.user, { domain: { id: domainId, name: 'ldap' }, id: userId('alice'), name: 'alice', password_expires_at: null });
    const byId = await app.login({ id: userId('dave') }, 'dave-secret');
    t.equal(byId.status, 201);
    t.equal(byId.body.token.user.name, 'dave');
    const failures: Array<[string, Record<string, unknown>, string]> = [
      ['wrong password', { name: 'alice', domain: { name: 'ldap' } }, 'bob-secret'],
      ['empty password', { name: 'alice', domain: { name: 'ldap' } }, ''],
      ['unknown user', { name: 'mallory', domain: { name: 'ldap' } }, 'alice-secret'],
      ['right name, wrong domain', { name: 'alice', domain: { name: 'Default' } }, 'alice-secret'],
      ['disabled user, right password', { name: 'eve', domain: { name: 'ldap' } }, 'eve-secret'],
      ['disabled user by id', { id: userId('eve') }, 'eve-secret'],
    ];
    for (const [what, user, password] of failures) {
      const response = await app.login(user, password);
      t.equal(response.status, 401, what);
      t.same(response.body, UNAUTHORIZED, what);
    }
  });

  await t.test('a role granted to an LDAP group reaches its members in a project-scoped token', async (t) => {
    const project = await app.call('POST', '/v3/projects', { project: { name: 'ldap-work', domain_id: 'default' } });
    t.equal(project.statusCode, 201);
    const projectId = project.json().project.id as string;
    const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
    const grant = await app.call('PUT', `/v3/projects/${projectId}/groups/${groupId('developers')}/roles/${member}`);
    t.equal(grant.statusCode, 204);
    const scope = { project: { id: projectId } };
    const bob = await app.login({ name: 'bob', domain: { name: 'ldap' } }, 'bob-secret', scope);
    t.equal(bob.status, 201);
    t.equal(bob.body.token.user.id, userId('bob'));
    t.same(bob.body.token.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader']);
    // An LDAP user's application credential (stored in SQL under the public id) authenticates.
    const credential = await app.call('POST', `/v3/users/${userId('bob')}/application_credentials`, { application_credential: { name: 'bob-cred' } }, bob.token);
    t.equal(credential.statusCode, 201, credential.body);
    const { id: credentialId, secret } = credential.json().application_credential as { id: string; secret: string };
    const viaCredential = await app.request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ auth: { identity: { methods: ['application_credential'], application_credential: { id: credentialId, secret } } } }),
    });
    t.equal(viaCredential.statusCode, 201);
    t.equal(viaCredential.json().token.user.id, userId('bob'));
    // The token validates; effective assignments expand the directory group to its members.
    const validated = await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': bob.token });
    t.equal(validated.statusCode, 200);
    t.equal(validated.json().token.user.id, userId('bob'));
    const effective = await app.call('GET', `/v3/role_assignments?scope.project.id=${projectId}&effective&include_names`);
    t.equal(effective.statusCode, 200);
    t.same(
      effective
        .json()
        .role_assignments.map((assignment: { user: { id: string; name: string; domain: { name: string } }; role: { name: string } }) => [
          assignment.user.name,
          assignment.user.id,
          assignment.user.domain.name,
          assignment.role.name,
        ])
        .sort(),
      [
        ['alice', userId('alice'), 'ldap', 'member'],
        ['alice', userId('alice'), 'ldap', 'reader'],
        ['bob', userId('bob'), 'ldap', 'member'],
        ['bob', userId('bob'), 'ldap', 'reader'],
      ],
    );
    const named = await app.call('GET', `/v3/role_assignments?scope.project.id=${projectId}&include_names`);
    t.same(
      named.json().role_assignments.map((assignment: { group: { id: string; name: string } }) => [assignment.group.name, assignment.group.id]),
      [['developers', groupId('developers')]],
    );
    // carol is not a developer: no role on the project.
    const carol = await app.login({ name: 'carol', domain: { name: 'ldap' } }, 'carol-secret', scope);
    t.equal(carol.status, 401);
    t.same(carol.body, UNAUTHORIZED);
    // A grant to the LDAP user itself (assignments live in SQL under the public id).
    const direct = await app.call('PUT', `/v3/projects/${projectId}/users/${userId('carol')}/roles/${member}`);
    t.equal(direct.statusCode, 204);
    t.equal((await app.login({ name: 'carol', domain: { name: 'ldap' } }, 'carol-secret', scope)).status, 201);
  });

  await t.test('group_members_are_ids: members named by id (posixGroup memberUid)', async (t) => {
    const client = new Client({ url: peer.url });
    await client.bind(LDAP_ADMIN_DN, LDAP_ADMIN_PASSWORD);
    await client.add(`cn=ops,ou=Groups,${LDAP_SUFFIX}`, { objectClass: 'posixGroup', cn: 'ops', gidNumber: '1000', memberUid: ['bob', 'dave'], description: 'Operators' });
    await client.unbind();
    const idsDomain = await createDomain(app, 'ldap-ids');
    configs.set(
      idsDomain,
      ldapDomainConfig(peer.url, { group_objectclass: 'posixGroup', group_member_attribute: 'memberUid', group_members_are_ids: 'True', page_size: '2' }),
    );
    const groups = await app.call('GET', `/v3/groups?domain_id=${idsDomain}`);
    t.same(groups.json().groups.map((group: { id: string; name: string }) => [group.name, group.id]), [['ops', keystoneId(idsDomain, 'group', 'ops')]]);
    const members = await app.call('GET', `/v3/groups/${keystoneId(idsDomain, 'group', 'ops')}/users`);
    t.same(members.json().users.map((user: { id: string; name: string }) => [user.name, user.id]), [
      ['bob', keystoneId(idsDomain, 'user', 'bob')],
      ['dave', keystoneId(idsDomain, 'user', 'dave')],
    ]);
    const ofDave = await app.call('GET', `/v3/users/${keystoneId(idsDomain, 'user', 'dave')}/groups`);
    t.same(ofDave.json().groups.map((group: { name: string }) => group.name), ['ops']);
    t.equal((await app.call('HEAD', `/v3/groups/${keystoneId(idsDomain, 'group', 'ops')}/users/${keystoneId(idsDomain, 'user', 'alice')}`)).statusCode, 404);
    // Paged results (page_size 2) still give every user.
    const users = await app.call('GET', `/v3/users?domain_id=${idsDomain}`);
    t.equal(users.json().users.length, 5);
  });

  await t.test('a domain whose configuration goes back to sql is served by SQL again', async (t) => {
    configs.set(domainId, { identity: { driver: 'sql' } });
    const users = await app.call('GET', `/v3/users?domain_id=${domainId}`);
    t.same(users.json().users, []);
    configs.set(domainId, ldapDomainConfig(peer.url));
    t.equal((await app.call('GET', `/v3/users?domain_id=${domainId}`)).json().users.length, 5);
  });
});
