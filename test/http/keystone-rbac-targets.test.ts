// What Keystone's API does around its policy checks, beyond the rules (found with
// keystone-tempest-plugin's RBAC tests, checked against the real Keystone 22): the owner of an
// application credential is the policy's user, and a domain-scoped caller's lists of role
// assignments, of a user's groups and of a group's users hold its own domain only.
import t from 'tap';
import { startTestApp, type TestApp } from '../helpers/app.ts';

async function rolesByName(call: TestApp['call']): Promise<Record<string, string>> {
  return Object.fromEntries(((await call('GET', '/v3/roles')).json().roles as { id: string; name: string }[]).map((role) => [role.name, role.id]));
}

t.test("an application credential is decided on its owner, not on the path's user", async (t) => {
  const { call, login } = await startTestApp(t);
  const roles = await rolesByName(call);
  const project = (await call('POST', '/v3/projects', { project: { name: 'keys' } })).json().project;
  const owner = (await call('POST', '/v3/users', { user: { name: 'key-owner', password: 'secret-pw' } })).json().user;
  const peer = (await call('POST', '/v3/users', { user: { name: 'key-peer', password: 'secret-pw' } })).json().user;
  for (const user of [owner, peer]) t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.member}`)).statusCode, 204);
  const ownerToken = (await login({ id: owner.id }, 'secret-pw', { project: { id: project.id } })).token;
  const peerToken = (await login({ id: peer.id }, 'secret-pw', { project: { id: project.id } })).token;
  const credential = (await call('POST', `/v3/users/${owner.id}/application_credentials`, { application_credential: { name: 'k' } }, ownerToken)).json().application_credential;

  // The peer names itself in the path and the owner's credential id: Keystone's 403, not a 404.
  const underOwnPath = `/v3/users/${peer.id}/application_credentials/${credential.id}`;
  const read = await call('GET', underOwnPath, undefined, peerToken);
  t.equal(read.statusCode, 403);
  t.equal(read.json().error.message, 'You are not authorized to perform the requested action: identity:get_application_credential.');
  t.equal((await call('DELETE', underOwnPath, undefined, peerToken)).statusCode, 403);
  t.equal((await call('GET', `/v3/users/${owner.id}/application_credentials/${credential.id}`, undefined, ownerToken)).statusCode, 200, 'still there, for its owner');
  t.equal((await call('GET', `/v3/users/${peer.id}/application_credentials/${'0'.repeat(32)}`, undefined, peerToken)).statusCode, 404, 'one that exists nowhere: 404');
  // An admin reaches it under any user's path, as in Keystone.
  const byAdmin = await call('GET', `/v3/users/${peer.id}/application_credentials/${credential.id}`);
  t.equal(byAdmin.statusCode, 200);
  t.equal(byAdmin.json().application_credential.user_id, owner.id);
});

t.test("a domain-scoped reader's lists hold its own domain only", async (t) => {
  const { call, login } = await startTestApp(t);
  const roles = await rolesByName(call);
  const [own, other] = await Promise.all(['own-domain', 'other-domain'].map(async (name) => (await call('POST', '/v3/domains', { domain: { name } })).json().domain));
  const project = async (name: string, domain: { id: string }) => (await call('POST', '/v3/projects', { project: { name, domain_id: domain.id } })).json().project;
  const user = async (name: string, domain: { id: string }) => (await call('POST', '/v3/users', { user: { name, domain_id: domain.id, password: 'secret-pw' } })).json().user;
  const group = async (name: string, domain: { id: string }) => (await call('POST', '/v3/groups', { group: { name, domain_id: domain.id } })).json().group;
  const [ownProject, otherProject] = [await project('p-own', own), await project('p-other', other)];
  const [reader, ownUser, otherUser] = [await user('reader', own), await user('u-own', own), await user('u-other', other)];
  const [ownGroup, otherGroup] = [await group('g-own', own), await group('g-other', other)];
  t.equal((await call('PUT', `/v3/domains/${own.id}/users/${reader.id}/roles/${roles.reader}`)).statusCode, 204);
  for (const [project, member] of [
    [ownProject, ownUser],
    [otherProject, ownUser],
  ]) t.equal((await call('PUT', `/v3/projects/${project.id}/users/${member.id}/roles/${roles.member}`)).statusCode, 204);
  for (const g of [ownGroup, otherGroup]) for (const u of [ownUser, otherUser]) t.equal((await call('PUT', `/v3/groups/${g.id}/users/${u.id}`)).statusCode, 204);
  const token = (await login({ id: reader.id }, 'secret-pw', { domain: { id: own.id } })).token;

  const assignments = async (query = '') => {
    const answer = await call('GET', `/v3/role_assignments${query}`, undefined, token);
    t.equal(answer.statusCode, 200, `role_assignments${query}`);
    return (answer.json().role_assignments as { user?: { id: string }; scope: { project?: { id: string }; domain?: { id: string } } }[]).map(
      (entry) => `${entry.user?.id}@${entry.scope.project?.id ?? entry.scope.domain?.id}`,
    );
  };
  t.same((await assignments()).sort(), [`${reader.id}@${own.id}`, `${ownUser.id}@${ownProject.id}`].sort(), 'the domain and its projects, not the other domain');
  t.same(await assignments(`?scope.project.id=${ownProject.id}`), [`${ownUser.id}@${ownProject.id}`]);
  t.same(await assignments(`?scope.project.id=${otherProject.id}`), [], "another domain's project: nothing");
  t.same(await assignments(`?scope.domain.id=${other.id}`), [], 'another domain: nothing');
  t.same(await assignments(`?user.id=${ownUser.id}`), [`${ownUser.id}@${ownProject.id}`], "a user's assignments, in this domain only");

  const groups = await call('GET', `/v3/users/${ownUser.id}/groups`, undefined, token);
  t.equal(groups.statusCode, 200);
  t.same(groups.json().groups.map((g: { id: string }) => g.id), [ownGroup.id], "the user's groups of this domain");
  const members = await call('GET', `/v3/groups/${ownGroup.id}/users`, undefined, token);
  t.equal(members.statusCode, 200);
  t.same(members.json().users.map((u: { id: string }) => u.id), [ownUser.id], "the group's members of this domain");

  // The admin (project-scoped) sees everything.
  t.equal((await call('GET', `/v3/groups/${ownGroup.id}/users`)).json().users.length, 2);
  t.equal((await call('GET', `/v3/users/${ownUser.id}/groups`)).json().groups.length, 2);
});
