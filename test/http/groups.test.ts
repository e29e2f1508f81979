import t from 'tap';
import { MembershipEntity } from '../../src/store/entities.ts';
import { startTestApp } from '../helpers/app.ts';

t.test('groups and membership', async (t) => {
  const { call, app } = await startTestApp(t);
  const created = await call('POST', '/v3/groups', { group: { name: 'ops' } });
  t.equal(created.statusCode, 201);
  const group = created.json().group;
  t.match(group, { name: 'ops', domain_id: 'default', description: '' });
  const duplicate = await call('POST', '/v3/groups', { group: { name: 'ops' } });
  t.equal(duplicate.statusCode, 409);
  t.equal(duplicate.json().error.message, 'Conflict occurred attempting to store group - Duplicate entry found with name ops at domain ID default.');

  const user = (await call('POST', '/v3/users', { user: { name: 'member1' } })).json().user;
  const membership = `/v3/groups/${group.id}/users/${user.id}`;
  const notMember = await call('HEAD', membership);
  t.equal(notMember.statusCode, 404);
  t.equal(notMember.body, '');
  const notMemberGet = await call('GET', membership);
  t.equal(notMemberGet.json().error.message, `User '${user.id}' not found in group '${group.id}'`);
  t.equal((await call('PUT', membership)).statusCode, 204);
  t.equal((await call('PUT', membership)).statusCode, 204, 'idempotent');
  t.equal((await call('HEAD', membership)).statusCode, 204);
  t.equal(await app.store.reader().count(MembershipEntity, { groupId: group.id }), 1);

  const members = await call('GET', `/v3/groups/${group.id}/users`);
  t.same(members.json().users.map((u: { id: string }) => u.id), [user.id]);
  const groups = await call('GET', `/v3/users/${user.id}/groups`);
  t.same(groups.json().groups.map((g: { id: string; membership_expires_at: null }) => [g.id, g.membership_expires_at]), [[group.id, null]]);
  t.equal((await call('PUT', `/v3/groups/${group.id}/users/nobody`)).json().error.message, 'Could not find user: nobody.');
  t.equal((await call('PUT', `/v3/groups/nogroup/users/${user.id}`)).json().error.message, 'Could not find group: nogroup.');

  const patched = await call('PATCH', `/v3/groups/${group.id}`, { group: { description: 'operators' } });
  t.equal(patched.json().group.description, 'operators');
  t.same((await call('GET', '/v3/groups?name=ops')).json().groups.map((g: { id: string }) => g.id), [group.id]);

  t.equal((await call('DELETE', membership)).statusCode, 204);
  t.equal((await call('DELETE', membership)).statusCode, 404);
  t.equal((await call('PUT', membership)).statusCode, 204);
  t.equal((await call('DELETE', `/v3/groups/${group.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(MembershipEntity, { userId: user.id }), 0, 'memberships go with the group');
});
