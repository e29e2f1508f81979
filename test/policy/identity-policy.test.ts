import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { IdentityPolicy, type IdentitySubject } from '../../src/policy/identity-policy.ts';
import { startTestApp } from '../helpers/app.ts';
import { shippedPolicyDirectory, writePolicyFiles } from './policy-directory.ts';

const shippedIdentity = path.join(shippedPolicyDirectory, 'identity');
const identityModel = fs.readFileSync(path.join(shippedIdentity, 'model.conf'), 'utf8');

function identityDirectory(t: { teardown(fn: () => void): void }, rules: string, extra: Record<string, string> = {}): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-identity-policy-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  writePolicyFiles(directory, { 'model.conf': identityModel, 'rules.csv': `# test rules\n${rules}\n`, ...extra });
  return directory;
}

const reader: IdentitySubject = { roles: ['reader'], scope: 'domain', userId: 'u1', domainId: 'd1' };

t.test('the shipped identity policy loads and passes its fixtures', async (t) => {
  const policy = await IdentityPolicy.load(shippedIdentity);
  const result = await policy.runFixtures();
  t.same(result.failures, []);
  t.ok(result.passed >= 20, `${result.passed} fixtures`);
  t.ok(policy.actions().includes('identity:get_user'));
});

t.test('the enforce-scope identity policy loads, passes its fixtures and never allows more than the default', async (t) => {
  const enforceScope = path.join(shippedPolicyDirectory, 'identity-enforce-scope');
  const policy = await IdentityPolicy.load(enforceScope);
  const result = await policy.runFixtures();
  t.same(result.failures, []);
  t.ok(result.passed >= 90, `${result.passed} fixtures`);
  t.same([...policy.actions()].sort(), [...(await IdentityPolicy.load(shippedIdentity)).actions()].sort(), 'the same actions');

  // Every allow line is one of the default file's, or one of them narrowed to a single scope (or,
  // for EC2 credentials, to the member role): scope enforcement only takes away.
  const lines = (directory: string) =>
    fs
      .readFileSync(path.join(directory, 'identity.csv'), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('p,'))
      .map((line) => line.split(',').map((field) => field.trim()));
  const defaults = lines(shippedIdentity);
  const covered = (role: string, scope: string, action: string, condition: string) =>
    defaults.some(([, dRole, dScope, dAction, dCondition, dEffect]) => dEffect === 'allow' && dAction === action && dCondition === condition && (dRole === role || dRole === '*') && (dScope === scope || dScope === '*'));
  const wider = lines(enforceScope).filter(([, role, scope, action, condition, effect]) => effect === 'allow' && !covered(role!, scope!, action!, condition!));
  t.same(wider, [], 'no allow line beyond the default policy');
  t.same(
    lines(shippedIdentity).filter(([, , , , , effect]) => effect === 'deny'),
    lines(enforceScope).filter(([, , , , , effect]) => effect === 'deny'),
    'the same deny lines',
  );
});

t.test('conditions, scopes, roles and deny overrides', async (t) => {
  const directory = identityDirectory(
    t,
    [
      'p, reader, domain, identity:get_user, user_in_domain, allow',
      'p, *, *, identity:get_user, self, allow',
      'p, admin, *, identity:get_user, *, allow',
      'p, *, *, identity:get_user, token_subject, deny',
    ].join('\n'),
  );
  const policy = await IdentityPolicy.load(directory);
  t.ok(policy.decide('identity:get_user', reader, { user: { id: 'u2', domainId: 'd1' } }).allowed, 'user in the reader domain');
  t.notOk(policy.decide('identity:get_user', reader, { user: { id: 'u2', domainId: 'd2' } }).allowed, 'user of another domain');
  t.notOk(policy.decide('identity:get_user', reader, { user: { id: 'u2' } }).allowed, 'a target without attributes (missing entity) matches no condition');
  t.notOk(policy.decide('identity:get_user', { ...reader, scope: 'project', domainId: undefined, projectId: 'p1' }, { user: { id: 'u2', domainId: 'd1' } }).allowed, 'scope column');
  t.ok(policy.decide('identity:get_user', { roles: [], scope: 'unscoped', userId: 'u2' }, { user: { id: 'u2' } }).allowed, 'self, even unscoped');
  const denied = policy.explain('identity:get_user', { roles: ['admin'], scope: 'system', userId: 'u9' }, { user: { id: 'u2' }, token: { userId: 'u9' } });
  t.match(denied, { allowed: false, reason: 'denied by rule', rule: 'p, *, *, identity:get_user, token_subject, deny', source: 'rules.csv', line: 5 });
  t.same(
    denied.matches.map((match) => [match.line, match.effect]),
    [
      [4, 'allow'],
      [5, 'deny'],
    ],
    'explain lists every matching line',
  );
  t.same(policy.decide('identity:list_users', reader, {}), { allowed: false, reason: 'no rule allows' }, 'an action without lines');
});

t.test('load errors name the file and line', async (t) => {
  const cases: [string, RegExp][] = [
    ['p, reader, domain, identity:get_user, user_in_domain', /rules\.csv:2: expected 5 fields/],
    ['p, reader, galaxy, identity:get_user, *, allow', /rules\.csv:2: unknown scope 'galaxy'/],
    ['p, reader, domain, get_user, *, allow', /rules\.csv:2: 'get_user' is not an identity action/],
    ['p, reader, domain, identity:get_user, owner_of_everything, allow', /rules\.csv:2: unknown condition 'owner_of_everything'/],
    ['p, reader, domain, identity:get_user, *, maybe', /rules\.csv:2: effect must be allow or deny/],
    ['g, reader, admin', /rules\.csv:2: only 'p' lines/],
    ['p, reader, domain, identity:get_user, *, allow\np, reader, domain, identity:get_user, *, allow', /rules\.csv:3: duplicate of rules\.csv:2/],
  ];
  for (const [rules, message] of cases) {
    await t.rejects(IdentityPolicy.load(identityDirectory(t, rules)), { name: 'PolicyLoadError', message }, rules);
  }
  const badModel = identityDirectory(t, 'p, *, *, identity:get_user, *, allow', { 'model.conf': identityModel.replace('r = roles, scope, act, ctx', 'r = sub, act') });
  await t.rejects(IdentityPolicy.load(badModel), { name: 'PolicyLoadError', message: /request_definition must be r = roles, scope, act, ctx/ });
  // An emptied rule file (an editor truncating before it writes) is refused, not loaded as deny-all.
  const emptied = identityDirectory(t, 'p, reader, domain, identity:get_user, *, allow', { 'more.csv': '' });
  await t.rejects(IdentityPolicy.load(emptied), { name: 'PolicyLoadError', message: /more\.csv: the rule file is empty/ });
});

t.test('fixture failures name the case', async (t) => {
  const directory = identityDirectory(t, 'p, admin, *, identity:create_user, *, allow', {
    'tests/cases.yaml': [
      '- name: an admin creates users',
      '  action: identity:create_user',
      '  roles: [admin]',
      '  scope: system',
      '  expect: allow',
      '- name: wrongly expected',
      '  action: identity:create_user',
      '  roles: [member]',
      '  scope: project',
      '  expect: allow',
      '- name: bad target',
      '  action: identity:create_user',
      '  roles: [member]',
      '  scope: project',
      '  target: { planet: { id: x } }',
      '  expect: deny',
    ].join('\n'),
  });
  const result = await (await IdentityPolicy.load(directory)).runFixtures();
  t.equal(result.passed, 1);
  t.match(result.failures, [/case 2 "wrongly expected": expected allow, got deny/, /case 3 "bad target": unknown target kind 'planet'/]);
});

t.test('the running service reloads its identity policy, keeping the last good one', async (t) => {
  const policies = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-policies-'));
  t.teardown(() => fs.rmSync(policies, { recursive: true, force: true }));
  fs.cpSync(shippedPolicyDirectory, policies, { recursive: true });
  const rulesFile = path.join(policies, 'identity', 'identity.csv');
  const shippedRules = fs.readFileSync(rulesFile, 'utf8');
  const { call, login, app } = await startTestApp(t, { IDENTITY_POLICY_DIR: path.join(policies, 'identity') });
  const memberRole = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  const project = (await call('POST', '/v3/projects', { project: { name: 'reload' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'reloader', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${memberRole.id}`);
  const member = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;

  const listed = await call('GET', '/v3/users', undefined, member);
  t.equal(listed.statusCode, 403);
  t.equal(listed.json().error.message, 'You are not authorized to perform the requested action: identity:list_users.');

  fs.writeFileSync(rulesFile, `${shippedRules}\np, member, project, identity:list_users, *, allow\n`);
  t.equal(await app.reloadIdentityPolicy(), true);
  t.equal((await call('GET', '/v3/users', undefined, member)).statusCode, 200, 'a security team widened the rule');

  fs.writeFileSync(rulesFile, `${shippedRules}\np, member, project, identity:list_users, anything, allow\n`);
  t.equal(await app.reloadIdentityPolicy(), false, 'an unknown condition is refused');
  t.equal((await call('GET', '/v3/users', undefined, member)).statusCode, 200, 'the last good policy stays');

  // A change that breaks a fixture is refused too: the fixtures say a member may not create users.
  fs.writeFileSync(rulesFile, `${shippedRules}\np, member, *, identity:create_user, *, allow\n`);
  t.equal(await app.reloadIdentityPolicy(), false);
  t.equal((await call('POST', '/v3/users', { user: { name: 'nope' } }, member)).statusCode, 403);
});
