import t from 'tap';
import { AssignmentEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('grants and role assignment listing', async (t) => {
  const { call, app, login } = await startTestApp(t);
  const base = `${PUBLIC_URL}/v3`;
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'ad' } })).json().domain;
  const project = (await call('POST', '/v3/projects', { project: { name: 'ap', domain_id: domain.id } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'au', domain_id: domain.id, password: 'Pw-1' } })).json().user;
  const group = (await call('POST', '/v3/groups', { group: { name: 'ag', domain_id: domain.id } })).json().group;
  const role = (await call('POST', '/v3/roles', { role: { name: 'observer' } })).json().role;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));

  const grant = `/v3/projects/${project.id}/users/${user.id}/roles/${role.id}`;
  const absent = await call('HEAD', grant);
  t.equal(absent.statusCode, 404);
  const absentGet = await call('GET', grant);
  t.equal(
    absentGet.json().error.message,
    `Could not find role assignment with role: ${role.id}, user or group: ${user.id}, project, domain, or system: ${project.id}.`,
  );
  t.equal((await call('PUT', grant)).statusCode, 204);
  t.equal((await call('PUT', grant)).statusCode, 204, 'idempotent');
  t.equal((await call('HEAD', grant)).statusCode, 204);
  t.equal(await app.store.reader().count(AssignmentEntity, { actorId: user.id }), 1);
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/nope`)).json().error.message, 'Could not find role: nope.');
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/nope/roles/${role.id}`)).json().error.message, 'Could not find user: nope.');
  t.equal((await call('PUT', `/v3/projects/nope/users/${user.id}/roles/${role.id}`)).json().error.message, 'Could not find project: nope.');

  const listed = await call('GET', `/v3/projects/${project.id}/users/${user.id}/roles`);
  t.same(listed.json().roles.map((r: { id: string }) => r.id), [role.id]);

  t.equal((await call('PUT', `/v3/domains/${domain.id}/groups/${group.id}/roles/${roles.member}`)).statusCode, 204);
  t.equal((await call('PUT', `/v3/groups/${group.id}/users/${user.id}`)).statusCode, 204);

  const direct = await call('GET', `/v3/role_assignments?user.id=${user.id}`);
  t.same(direct.json().role_assignments, [
    {
      user: { id: user.id },
      role: { id: role.id },
      scope: { project: { id: project.id } },
      links: { assignment: `${base}/projects/${project.id}/users/${user.id}/roles/${role.id}` },
    },
  ]);
  const byGroup = await call('GET', `/v3/role_assignments?group.id=${group.id}`);
  t.same(byGroup.json().role_assignments, [
    {
      group: { id: group.id },
      role: { id: roles.member },
      scope: { domain: { id: domain.id } },
      links: { assignment: `${base}/domains/${domain.id}/groups/${group.id}/roles/${roles.member}` },
    },
  ]);

  const names = await call('GET', `/v3/role_assignments?user.id=${user.id}&include_names`);
  t.same(names.json().role_assignments[0], {
    user: { id: user.id, name: 'au', domain: { id: domain.id, name: 'ad' } },
    role: { id: role.id, name: 'observer' },
    scope: { project: { id: project.id, name: 'ap', domain: { id: domain.id, name: 'ad' } } },
    links: { assignment: `${base}/projects/${project.id}/users/${user.id}/roles/${role.id}` },
  });

  const effective = (await call('GET', `/v3/role_assignments?user.id=${user.id}&effective`)).json().role_assignments;
  const summary = effective
    .map((a: { role: { id: string }; scope: { project?: { id: string }; domain?: { id: string } }; links: Record<string, string> }) =>
      [a.role.id, a.scope.project?.id ?? a.scope.domain?.id, Object.keys(a.links).sort().join('+')].join(' '),
    )
    .sort();
  t.same(
    summary,
    [
      `${role.id} ${project.id} assignment`,
      `${roles.member} ${domain.id} assignment+membership`,
      `${roles.reader} ${domain.id} assignment+membership+prior_role`,
    ].sort(),
  );

  const mutuallyExclusive: [string, string][] = [
    [`scope.project.id=${project.id}&scope.domain.id=${domain.id}`, 'Specify a domain or project, not both'],
    [`user.id=${user.id}&group.id=${group.id}`, 'Specify a user or group, not both'],
    [`effective&group.id=${group.id}`, 'Combining effective and group filter will always result in an empty list.'],
    ['include_subtree', 'scope.project.id must be specified if include_subtree is also specified'],
  ];
  for (const [query, message] of mutuallyExclusive) {
    const response = await call('GET', `/v3/role_assignments?${query}`);
    t.equal(response.statusCode, 400, query);
    t.equal(response.json().error.message, message);
  }

  // The token reflects direct, group and implied roles; removing the grant takes it away at once.
  const token = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(token.status, 201);
  t.same(token.body.token.roles.map((r: { name: string }) => r.name), ['observer']);
  const domainToken = await login({ id: user.id }, 'Pw-1', { domain: { id: domain.id } });
  t.same(domainToken.body.token.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader']);

  t.equal((await call('DELETE', grant)).statusCode, 204);
  t.equal((await call('DELETE', grant)).statusCode, 404);
  const validate = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token.token });
  t.equal(validate.statusCode, 404, 'a project token with no role left is invalid');
  t.equal((await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).status, 401);

  // System grants.
  const noSystemGrant = await call('DELETE', `/v3/system/users/${user.id}/roles/${roles.reader}`);
  t.equal(noSystemGrant.statusCode, 404);
  t.equal(
    noSystemGrant.json().error.message,
    `Could not find role assignment with role: ${roles.reader}, user or group: ${user.id}, project, domain, or system: system.`,
    'the system is named as Keystone 22 names it',
  );
  t.equal((await call('PUT', `/v3/system/users/${user.id}/roles/${roles.reader}`)).statusCode, 204);
  const system = await call('GET', `/v3/role_assignments?scope.system=all&user.id=${user.id}`);
  t.same(system.json().role_assignments[0].scope, { system: { all: true } });
  t.equal(system.json().role_assignments[0].links.assignment, `${base}/system/users/${user.id}/roles/${roles.reader}`);
  for (const query of [`user.id=${user.id}&effective`, 'effective']) {
    const entries = (await call('GET', `/v3/role_assignments?${query}`)).json().role_assignments as { scope: { system?: unknown } }[];
    t.notOk(entries.some((entry) => entry.scope.system), `no system entry in ${query}, as Keystone 22`);
  }
  const systemToken = await login({ id: user.id }, 'Pw-1', { system: { all: true } });
  t.equal(systemToken.status, 201);
  t.same(systemToken.body.token.system, { all: true });

  // Deleting the user takes its grants with it.
  t.equal((await call('DELETE', `/v3/users/${user.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(AssignmentEntity, { actorId: user.id }), 0);
});

t.test('inherited grants reach the projects of a domain', async (t) => {
  const { call, login } = await startTestApp(t);
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'inh' } })).json().domain;
  const project = (await call('POST', '/v3/projects', { project: { name: 'ip', domain_id: domain.id } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'iu', domain_id: domain.id, password: 'Pw-1' } })).json().user;
  const reader = (await call('GET', '/v3/roles?name=reader')).json().roles[0];
  const path = `/v3/OS-INHERIT/domains/${domain.id}/users/${user.id}/roles/${reader.id}/inherited_to_projects`;
  t.equal((await call('PUT', path)).statusCode, 204);
  t.equal((await call('HEAD', path)).statusCode, 204);
  const token = await login({ id: user.id }, 'Pw-1', { project: { id: project.id } });
  t.equal(token.status, 201);
  t.same(token.body.token.roles.map((r: { name: string }) => r.name), ['reader']);
  const effective = await call('GET', `/v3/role_assignments?user.id=${user.id}&effective`);
  t.same(effective.json().role_assignments.map((a: { scope: { project: { id: string } } }) => a.scope.project.id), [project.id]);
  t.same(effective.json().role_assignments[0].scope, { project: { id: project.id }, 'OS-INHERIT:inherited_to': 'projects' }, 'the inherited mark stays, as in Keystone 22');
  const direct = await call('GET', `/v3/role_assignments?user.id=${user.id}`);
  t.same(direct.json().role_assignments[0].scope, { domain: { id: domain.id }, 'OS-INHERIT:inherited_to': 'projects' });
});
