import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { GatewayPolicy } from '../../src/policy/gateway-policy.ts';
import type { PolicyRequest } from '../../src/policy/gateway-policy-types.ts';
import { PolicyLoadError } from '../../src/policy/policy-files.ts';
import { policyDirectory, ruleFile, shippedModel, shippedPolicyDirectory } from './policy-directory.ts';

/** A project-scoped request for service "demo" with no roles; override what a case needs. */
function request(overrides: Partial<PolicyRequest> = {}): PolicyRequest {
  return { service: 'demo', roles: [], scope: 'project', projectId: 'p-own', userId: 'u-own', method: 'GET', path: '/', ...overrides };
}

async function loadRules(t: { teardown(fn: () => void): void }, ...lines: string[]): Promise<GatewayPolicy> {
  return GatewayPolicy.load(policyDirectory(t, { 'demo.csv': ruleFile(...lines) }));
}

t.test('path templates', async (t) => {
  const policy = await loadRules(
    t,
    'p, *, *, /lit/exact, GET, allow',
    'p, *, *, /one/*/x, GET, allow',
    'p, *, *, /named/{thing_id}, GET, allow',
    'p, *, *, /proj/{project_id}/items, GET, allow',
    'p, *, *, /users/{user_id}, GET, allow',
    'p, *, *, /rest/**, GET, allow',
    'p, *, *, /mid/**/end, GET, allow',
    'p, *, *, /slash/, GET, allow',
    'p, *, *, /Case, GET, allow',
    'p, *, *, /tail/**/{project_id}, GET, allow',
  );
  const allowed = (path: string, overrides: Partial<PolicyRequest> = {}) => policy.decide(request({ path, ...overrides })).allowed;

  t.ok(allowed('/lit/exact'), 'literal');
  t.notOk(allowed('/lit'), 'literal: prefix is not enough');
  t.notOk(allowed('/lit/exactly'), 'literal: whole segment');
  t.notOk(allowed('/lit/exact/more'), 'literal: no extra segments');

  t.ok(allowed('/one/abc/x'), '* is one segment');
  t.notOk(allowed('/one/x'), '* is not zero segments');
  t.notOk(allowed('/one/a/b/x'), '* is not two segments');
  t.notOk(allowed('/one//x'), '* is not an empty segment');

  t.ok(allowed('/named/s-1'), '{name} is one segment');
  t.notOk(allowed('/named'), '{name} is not zero segments');
  t.notOk(allowed('/named/'), '{name} is not an empty segment');
  t.notOk(allowed('/named/a/b'), '{name} is not two segments');

  t.ok(allowed('/proj/p-own/items'), '{project_id}: the token project');
  t.notOk(allowed('/proj/p-other/items'), "{project_id}: another project's id");
  t.notOk(allowed('/proj/p-own/items', { scope: 'domain', projectId: undefined }), '{project_id}: a domain token has no project');
  t.notOk(allowed('/proj//items', { projectId: '' }), '{project_id}: an empty project never matches');

  t.ok(allowed('/users/u-own'), '{user_id}: the token user');
  t.notOk(allowed('/users/u-other'), "{user_id}: another user's id");

  t.ok(allowed('/rest'), '** matches no segments');
  t.ok(allowed('/rest/'), '** matches a final empty segment');
  t.ok(allowed('/rest/a/b/c'), '** matches several segments');
  t.notOk(allowed('/restful'), '** follows a whole segment');

  t.ok(allowed('/mid/end'), 'inner ** matches none');
  t.ok(allowed('/mid/a/b/end'), 'inner ** matches several');
  t.notOk(allowed('/mid/a/b'), 'the part after ** must match');

  t.ok(allowed('/tail/x/y/p-own'), 'owner placeholder after ** is checked from the end');
  t.notOk(allowed('/tail/p-own/y/p-other'), 'owner placeholder after ** is checked from the end, not anywhere');
  t.ok(allowed('/tail/p-own'), 'owner placeholder after an empty **');

  t.ok(allowed('/slash/'), 'a template with a trailing slash');
  t.notOk(allowed('/slash'), 'the trailing slash is part of the template');
  t.notOk(allowed('/lit/exact/'), 'a path with a trailing slash does not match the template without');

  t.ok(allowed('/Case'), 'case as written');
  t.notOk(allowed('/case'), 'matching is case-sensitive');
  t.notOk(allowed('/LIT/exact'), 'matching is case-sensitive for every literal');

  t.notOk(allowed('lit/exact'), 'a path without a leading slash never matches');
  t.equal(policy.decide(request({ path: '/nowhere' })).reason, 'no rule allows');
});

t.test('/** matches every path, the root included', async (t) => {
  const policy = await loadRules(t, 'p, admin, *, /**, *, allow');
  for (const path of ['/', '/a', '/a/', '/a/b/c']) {
    t.ok(policy.decide(request({ roles: ['admin'], path })).allowed, path);
  }
  t.notOk(policy.decide(request({ roles: ['member'], path: '/a' })).allowed, 'other roles are not admin');
});

t.test('deny overrides every allow, admin included; the decision names the deciding line', async (t) => {
  const policy = await loadRules(
    t,
    'p, admin, *, /**, *, allow',
    'p, member, project, /v1/{project_id}/things, GET, allow',
    'p, *, project, /v1/*/secret/**, *, deny',
    'p, reader, project, /v1/*/secret/**, GET, deny',
  );
  const admin = ['admin', 'member', 'reader'];

  const denied = policy.decide(request({ roles: admin, path: '/v1/p-own/secret/x' }));
  t.same(denied, {
    allowed: false,
    reason: 'denied by rule',
    rule: 'p, *, project, /v1/*/secret/**, *, deny',
    source: 'demo.csv',
    line: 4,
  }, 'the first matching deny line decides');

  const system = policy.decide(request({ roles: admin, scope: 'system', projectId: undefined, path: '/v1/p-own/secret/x' }));
  t.same(system, { allowed: true, reason: 'allowed', rule: 'p, admin, *, /**, *, allow', source: 'demo.csv', line: 2 }, 'a deny keyed on scope spares system admins');

  const lastAllow = policy.decide(request({ roles: admin, path: '/v1/p-own/things' }));
  t.same(lastAllow, {
    allowed: true,
    reason: 'allowed',
    rule: 'p, member, project, /v1/{project_id}/things, GET, allow',
    source: 'demo.csv',
    line: 3,
  }, 'the last matching allow line decides');

  t.same(policy.decide(request({ roles: ['member'], path: '/v1/p-own/other' })), { allowed: false, reason: 'no rule allows' });
});

t.test("'*' role and '*' scope", async (t) => {
  const policy = await loadRules(
    t,
    'p, *, *, /open, GET, allow',
    'p, reader, system, /system-only, GET, allow',
    'p, reader, *, /any-scope, GET, allow',
  );
  for (const scope of ['project', 'domain', 'system'] as const) {
    t.ok(policy.decide(request({ scope, path: '/open' })).allowed, `'*' role allows a token without roles (${scope})`);
    t.ok(policy.decide(request({ scope, roles: ['reader'], path: '/any-scope' })).allowed, `'*' scope allows ${scope}`);
    t.notOk(policy.decide(request({ scope, path: '/any-scope' })).allowed, `a named role is required (${scope})`);
  }
  t.ok(policy.decide(request({ scope: 'system', roles: ['reader'], path: '/system-only' })).allowed);
  t.notOk(policy.decide(request({ scope: 'project', roles: ['reader'], path: '/system-only' })).allowed, 'scope must match');
  t.notOk(policy.decide(request({ scope: 'domain', roles: ['reader'], path: '/system-only' })).allowed, 'scope must match');
});

t.test('methods: HEAD is not derived from GET; * covers every method', async (t) => {
  const policy = await loadRules(t, 'p, reader, *, /r, GET, allow', 'p, writer, *, /w, *, allow', 'p, reader, *, /h, HEAD, allow');
  const decide = (roles: string[], method: string, path: string) => policy.decide(request({ roles, method, path })).allowed;
  t.ok(decide(['reader'], 'GET', '/r'));
  t.notOk(decide(['reader'], 'HEAD', '/r'), 'HEAD is not GET');
  t.notOk(decide(['reader'], 'POST', '/r'));
  t.ok(decide(['reader'], 'HEAD', '/h'));
  t.notOk(decide(['reader'], 'GET', '/h'), 'GET is not HEAD');
  for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'PATCH']) t.ok(decide(['writer'], method, '/w'), `* allows ${method}`);
});

t.test('unknown service', async (t) => {
  const policy = await loadRules(t, 'p, *, *, /**, *, allow');
  t.same(policy.services(), ['demo']);
  t.same(policy.decide(request({ service: 'nova' })), { allowed: false, reason: 'unknown service' });
  t.same(policy.explain(request({ service: 'nova' })), { allowed: false, reason: 'unknown service', matches: [] });
});

t.test('load errors name the file and the line', async (t) => {
  const cases: { name: string; lines: string[]; line: number; message: RegExp }[] = [
    { name: 'too few fields', lines: ['p, *, *, /a, GET, allow', 'p, *, *, /b, GET'], line: 3, message: /expected 5 fields after 'p'.*found 4/ },
    { name: 'too many fields', lines: ['p, *, *, /a, GET, allow, extra'], line: 2, message: /expected 5 fields after 'p'.*found 6/ },
    { name: 'a g line', lines: ['g, alice, admin'], line: 2, message: /only 'p' lines/ },
    { name: 'bad scope', lines: ['p, *, tenant, /a, GET, allow'], line: 2, message: /unknown scope 'tenant'/ },
    { name: 'lower-case method', lines: ['p, *, *, /a, get, allow'], line: 2, message: /unknown method 'get'/ },
    { name: 'bad effect', lines: ['p, *, *, /a, GET, permit'], line: 2, message: /effect must be allow or deny/ },
    { name: 'empty field', lines: ['p, , *, /a, GET, allow'], line: 2, message: /empty field/ },
    { name: 'duplicate line', lines: ['p, *, *, /a, GET, allow', '', 'p,*,*,/a,GET,allow'], line: 4, message: /duplicate of line 2/ },
    { name: 'template without a leading slash', lines: ['p, *, *, a/b, GET, allow'], line: 2, message: /must start with '\/'/ },
    { name: 'partial wildcard', lines: ['p, *, *, /a/foo*, GET, allow'], line: 2, message: /must be whole segments/ },
    { name: 'partial placeholder', lines: ['p, *, *, /a/x{id}, GET, allow'], line: 2, message: /must be whole segments/ },
    { name: 'empty segment', lines: ['p, *, *, /a//b, GET, allow'], line: 2, message: /empty segment/ },
    { name: 'two **', lines: ['p, *, *, /**/a/**, GET, allow'], line: 2, message: /'\*\*' only once/ },
  ];
  for (const { name, lines, line, message } of cases) {
    const directory = policyDirectory(t, { 'aaa.csv': ruleFile('p, *, *, /ok, GET, allow'), 'demo.csv': ruleFile(...lines) });
    const error = await GatewayPolicy.load(directory).then(
      () => undefined,
      (error: unknown) => error,
    );
    t.type(error, PolicyLoadError, name);
    if (!(error instanceof PolicyLoadError)) continue;
    t.match(error.file, /demo\.csv$/, `${name}: file`);
    t.equal(error.line, line, `${name}: line`);
    t.match(error.message, new RegExp(`demo\\.csv:${line}: `), `${name}: message names file:line`);
    t.match(error.message, message, `${name}: message says what is wrong`);
  }
});

t.test('model.conf problems reject the set', async (t) => {
  const rules = { 'demo.csv': ruleFile('p, *, *, /a, GET, allow') };
  const cases: { name: string; model: string; message: RegExp }[] = [
    { name: 'other effect', model: shippedModel.replace('!some(where (p.eft == deny))', 'true'), message: /policy_effect must be/ },
    { name: 'other request', model: shippedModel.replace('r = roles, scope, project, user, obj, act', 'r = sub, obj, act'), message: /request_definition must be/ },
    { name: 'other policy line', model: shippedModel.replace('p = sub, scope, obj, act, eft', 'p = sub, obj, act, eft'), message: /policy_definition must be/ },
    { name: 'unknown function', model: shippedModel.replace('roleMatch(r.roles, p.sub)', 'keyMatch(r.roles, p.sub)'), message: /matcher fails to evaluate/ },
    { name: 'not a model', model: '[matchers\nm = ', message: /model\.conf/ },
  ];
  for (const { name, model, message } of cases) {
    t.not(model, shippedModel, `${name}: the fixture changes the model`);
    const directory = policyDirectory(t, { ...rules, 'model.conf': model });
    await t.rejects(GatewayPolicy.load(directory), { name: 'PolicyLoadError', message }, name);
  }
  const missing = policyDirectory(t, rules);
  rmSync(path.join(missing, 'model.conf'));
  await t.rejects(GatewayPolicy.load(missing), { name: 'PolicyLoadError', message: /model\.conf: cannot read/ }, 'missing model.conf');
});

t.test('an invalid service file name rejects the set', async (t) => {
  const directory = policyDirectory(t, { 'bad name.csv': ruleFile('p, *, *, /a, GET, allow') });
  await t.rejects(GatewayPolicy.load(directory), { name: 'PolicyLoadError', message: /'bad name' is not a valid service type name/ });
});

t.test('explain lists every matching line and names the deciding one', async (t) => {
  const policy = await loadRules(
    t,
    'p, admin, *, /**, *, allow',
    'p, member, project, /v1/{project_id}/things, GET, allow',
    'p, reader, project, /v1/{project_id}/things, GET, allow',
    'p, *, project, /v1/*/things, DELETE, deny',
    'p, member, project, /v1/{project_id}/other, GET, allow',
  );
  const roles = ['admin', 'member', 'reader'];
  const allow = policy.explain(request({ roles, path: '/v1/p-own/things' }));
  t.equal(allow.allowed, true);
  t.equal(allow.rule, 'p, reader, project, /v1/{project_id}/things, GET, allow', 'the last matching allow decides');
  t.equal(allow.line, 4);
  t.same(
    allow.matches.map((match) => [match.line, match.effect, match.source]),
    [
      [2, 'allow', 'demo.csv'],
      [3, 'allow', 'demo.csv'],
      [4, 'allow', 'demo.csv'],
    ],
    'every matching line in file order',
  );
  t.same(allow.matches[1], { rule: 'p, member, project, /v1/{project_id}/things, GET, allow', source: 'demo.csv', line: 3, effect: 'allow' });

  const deny = policy.explain(request({ roles, method: 'DELETE', path: '/v1/p-own/things' }));
  t.equal(deny.reason, 'denied by rule');
  t.equal(deny.line, 5);
  t.same(
    deny.matches.map((match) => [match.line, match.effect]),
    [
      [2, 'allow'],
      [5, 'deny'],
    ],
    'the allow that lost is listed too',
  );

  const otherProject = policy.explain(request({ roles: ['member'], path: '/v1/p-other/things' }));
  t.same(otherProject, { allowed: false, reason: 'no rule allows', matches: [] }, 'an owner line that fails is not a match');

  const sameAsDecide = policy.decide(request({ roles, path: '/v1/p-own/things' }));
  const { matches: _matches, ...explained } = allow;
  t.same(explained, sameAsDecide, 'explain decides as decide does');
});

t.test('fixtures', async (t) => {
  t.test('the shipped policies pass their fixtures', async (t) => {
    const policy = await GatewayPolicy.load(shippedPolicyDirectory);
    t.same(policy.services(), ['compute', 'placement']);
    const { passed, failures } = await policy.runFixtures();
    t.same(failures, []);
    t.ok(passed >= 10, `${passed} cases passed`);
  });

  t.test('a failing case names the file, the case, what was expected and what was decided', async (t) => {
    const directory = policyDirectory(t, {
      'demo.csv': ruleFile('p, reader, *, /r, GET, allow'),
      'tests/demo.yaml': [
        '- name: reader reads',
        '  service: demo',
        '  roles: [reader]',
        '  scope: project',
        '  method: GET',
        '  path: /r',
        '  expect: allow',
        '  rule: "p,reader,*,/r,GET,allow"',
        '- name: wrongly expected',
        '  service: demo',
        '  roles: [reader]',
        '  scope: project',
        '  method: HEAD',
        '  path: /r',
        '  expect: allow',
        '- name: typo in the service',
        '  service: dmeo',
        '  roles: [reader]',
        '  scope: project',
        '  method: GET',
        '  path: /r',
        '  expect: deny',
        '',
      ].join('\n'),
    });
    const policy = await GatewayPolicy.load(directory);
    const { passed, failures } = await policy.runFixtures();
    t.equal(passed, 1);
    t.equal(failures.length, 2);
    t.match(failures[0], /^tests\/demo\.yaml: case 2 "wrongly expected": expected allow, got deny \(no rule allows/);
    t.match(failures[1], /^tests\/demo\.yaml: case 3 "typo in the service": unknown service 'dmeo'/);
  });
});

t.test('decision cache', async (t) => {
  const rules = [
    'p, *, *, /, GET, allow',
    'p, admin, *, /**, *, allow',
    'p, member, project, /v1/{project_id}/things, GET, allow',
    'p, member, project, /v1/{project_id}/things/*, GET, allow',
    'p, member, project, /v1/{project_id}/things/*, DELETE, allow',
    'p, reader, project, /v1/{project_id}/things/**, GET, allow',
    'p, member, *, /v1/users/{user_id}/keys/*, GET, allow',
    'p, *, project, /v1/*/locked/**, *, deny',
    'p, member, *, /v1/{project_id}/users/{user_id}, PUT, allow',
  ];

  t.test('cached decisions equal uncached evaluation across many ids', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': ruleFile(...rules) });
    const cached = await GatewayPolicy.load(directory);
    const uncached = await GatewayPolicy.load(directory, { decisionCacheSize: 0 });
    const roleSets = [[], ['reader'], ['member', 'reader'], ['admin', 'member', 'reader'], ['reader', 'member']];
    const projects = ['p-1', 'p-2', 'p-3'];
    const users = ['u-1', 'u-2'];
    const shapes = [
      (id: string, project: string) => `/v1/${project}/things`,
      (id: string, project: string) => `/v1/${project}/things/${id}`,
      (id: string) => `/v1/p-1/things/${id}`,
      (id: string, project: string) => `/v1/${project}/things/${id}/sub/${id}`,
      (id: string) => `/v1/${id}/locked/x`,
      (id: string, _project: string, user: string) => `/v1/users/${user}/keys/${id}`,
      (id: string) => `/v1/users/u-1/keys/${id}`,
      (_id: string, project: string, user: string) => `/v1/${project}/users/${user}`,
      () => `/v1/p-2/users/u-2`,
      () => '/',
    ];
    let allowedCount = 0;
    let deniedCount = 0;
    let compared = 0;
    const mismatches: { input: PolicyRequest; got: unknown; expected: unknown }[] = [];
    for (let n = 0; n < 400; n++) {
      const id = `id-${n}-${(n * 7919).toString(16)}`;
      const project = projects[n % projects.length]!;
      const user = users[Math.floor(n / 3) % users.length]!;
      for (const [shapeIndex, shape] of shapes.entries()) {
        const roles = roleSets[(n + shapeIndex) % roleSets.length]!;
        const scope = (['project', 'project', 'domain', 'system'] as const)[(n + shapeIndex) % 4]!;
        const method = ['GET', 'DELETE', 'PUT'][(n * 3 + shapeIndex) % 3]!;
        const subject = scope === 'project' ? { projectId: project } : {};
        const input: PolicyRequest = { service: 'demo', roles, scope, userId: user, method, path: shape(id, project, user), ...subject };
        const expected = uncached.decide(input);
        // Twice: the second answer comes from the cache.
        for (const got of [cached.decide(input), cached.decide(input)]) {
          if (JSON.stringify(got) !== JSON.stringify(expected)) mismatches.push({ input, got, expected });
        }
        compared++;
        if (expected.allowed) allowedCount++;
        else deniedCount++;
      }
    }
    t.same(mismatches.slice(0, 5), [], `cached and uncached decisions agree (${mismatches.length} mismatches)`);
    t.equal(uncached.cachedDecisions, 0, 'size 0 disables the cache');
    t.ok(allowedCount > 100 && deniedCount > 100, `both outcomes exercised (${allowedCount} allowed, ${deniedCount} denied of ${compared})`);
    t.ok(cached.cachedDecisions < 400, `one entry per template, not per id (${cached.cachedDecisions} entries for ${compared} requests)`);
  });

  t.test('distinct resource ids share one entry', async (t) => {
    const policy = await GatewayPolicy.load(policyDirectory(t, { 'demo.csv': ruleFile(...rules) }));
    let allowed = 0;
    for (let n = 0; n < 1000; n++) {
      const decision = policy.decide(request({ roles: ['member'], projectId: 'p-1', path: `/v1/p-1/things/${randomUUID()}` }));
      if (decision.allowed) allowed++;
    }
    t.equal(allowed, 1000);
    t.equal(policy.cachedDecisions, 1);
  });

  t.test('owner rules still deny another project or user on cache hits', async (t) => {
    const policy = await GatewayPolicy.load(policyDirectory(t, { 'demo.csv': ruleFile(...rules) }));
    const member = { roles: ['member', 'reader'], projectId: 'p-own', userId: 'u-own' };
    t.equal(policy.decide(request({ ...member, path: '/v1/p-own/things/s-1' })).allowed, true, 'own project');
    t.equal(policy.decide(request({ ...member, path: '/v1/p-other/things/s-1' })).allowed, false, "another project's id, same token");
    t.equal(policy.decide(request({ ...member, path: '/v1/p-own/things/s-2' })).allowed, true, 'own project again (cache hit)');
    t.equal(policy.decide(request({ ...member, path: '/v1/p-other2/things/s-3' })).allowed, false, 'a third project (cache hit of the deny)');
    t.equal(policy.decide(request({ ...member, projectId: 'p-other', path: '/v1/p-other/things/s-1' })).allowed, true, 'the other project with its own token');

    t.equal(policy.decide(request({ ...member, path: '/v1/users/u-own/keys/k-1' })).allowed, true, 'own user');
    t.equal(policy.decide(request({ ...member, path: '/v1/users/u-other/keys/k-1' })).allowed, false, "another user's id, same token");
    t.equal(policy.decide(request({ ...member, userId: 'u-other', path: '/v1/users/u-own/keys/k-2' })).allowed, false, 'another token user');

    const both = (path: string) => policy.decide(request({ ...member, method: 'PUT', path })).allowed;
    t.equal(both('/v1/p-own/users/u-own'), true, 'two owner placeholders, both own');
    t.equal(both('/v1/p-own/users/u-other'), false, 'project own, user not');
    t.equal(both('/v1/p-other/users/u-own'), false, 'user own, project not');

    t.equal(policy.decide(request({ ...member, path: '/v1/p-own/things/a/b' })).allowed, true, 'owner before ** (reader line)');
    t.equal(policy.decide(request({ ...member, path: '/v1/p-other/things/a/b' })).allowed, false, 'owner before **, other project');
  });

  t.test('lines on one path shape with different owner placeholders are told apart', async (t) => {
    const directory = policyDirectory(t, {
      'demo.csv': ruleFile(
        'p, member, project, /v1/{project_id}/x, GET, allow',
        'p, reader, *, /v1/{user_id}/x, GET, allow',
        'p, auditor, *, /v1/*/x, GET, allow',
        'p, member, project, /v1/{project_id}/x/{user_id}, GET, allow',
        'p, member, project, /v1/{user_id}/x/{project_id}, GET, allow',
      ),
    });
    const cached = await GatewayPolicy.load(directory);
    const uncached = await GatewayPolicy.load(directory, { decisionCacheSize: 0 });
    const ids = ['p-own', 'u-own', 'other', 'same'];
    const roleSets = [['member'], ['reader'], ['auditor'], ['member', 'reader']];
    let mismatches = 0;
    let allowed = 0;
    let asked = 0;
    for (const roles of roleSets) {
      for (const projectId of ['p-own', 'same']) {
        for (const userId of ['u-own', 'same']) {
          for (const first of ids) {
            for (const path of [`/v1/${first}/x`, ...ids.map((second) => `/v1/${first}/x/${second}`)]) {
              const input = request({ roles, projectId, userId, path });
              const expected = JSON.stringify(uncached.decide(input));
              // Twice: the second answer comes from the cache.
              if (JSON.stringify(cached.decide(input)) !== expected || JSON.stringify(cached.decide(input)) !== expected) mismatches++;
              if (uncached.decide(input).allowed) allowed++;
              asked++;
            }
          }
        }
      }
    }
    t.equal(mismatches, 0, 'cached decisions equal uncached ones');
    t.ok(allowed > 20 && allowed < asked - 20, `both outcomes exercised (${allowed} of ${asked} allowed)`);
    t.ok(cached.cachedDecisions < asked / 4, `entries are per owner outcome, not per path (${cached.cachedDecisions} for ${asked} requests)`);
  });

  t.test('a matcher that reads the path itself keys the cache by the concrete request', async (t) => {
    const model = shippedModel.replace('&& pathMatch(r.obj, p.obj, r.project, r.user)', '&& pathMatch(r.obj, p.obj, r.project, r.user) && r.project != "p-blocked"');
    t.not(model, shippedModel);
    const directory = policyDirectory(t, { 'model.conf': model, 'demo.csv': ruleFile('p, member, project, /v1/*/things, GET, allow') });
    const policy = await GatewayPolicy.load(directory);
    const decide = (projectId: string) => policy.decide(request({ roles: ['member'], projectId, path: '/v1/any/things' })).allowed;
    t.equal(decide('p-1'), true);
    t.equal(decide('p-blocked'), false, 'not the decision cached for p-1');
    t.equal(decide('p-1'), true);
  });

  t.test('the cache stays bounded', async (t) => {
    const directory = policyDirectory(t, { 'demo.csv': ruleFile(...rules) });
    const policy = await GatewayPolicy.load(directory, { decisionCacheSize: 16 });
    const uncached = await GatewayPolicy.load(directory, { decisionCacheSize: 0 });
    let largest = 0;
    let agreed = 0;
    for (let n = 0; n < 500; n++) {
      // A distinct role set per request makes every key new.
      const input = request({ roles: [`role-${n}`, n % 2 ? 'member' : 'reader'], path: `/v1/p-own/things/${n}` });
      if (JSON.stringify(policy.decide(input)) === JSON.stringify(uncached.decide(input))) agreed++;
      largest = Math.max(largest, policy.cachedDecisions);
    }
    t.equal(agreed, 500, 'evictions do not change decisions');
    t.equal(largest, 16, 'never more entries than the bound');
    t.equal(policy.cachedDecisions, 16);
  });
});

t.test('a 10,000-rule policy loads and decides correctly', async (t) => {
  const routes = 2_500;
  const lines: string[] = [];
  for (let n = 0; n < routes; n++) {
    const role = `role-${n % 50}`;
    lines.push(`p, ${role}, project, /api/r${n}/{project_id}/items, GET, allow`);
    lines.push(`p, ${role}, project, /api/r${n}/{project_id}/items/*, *, allow`);
    lines.push(`p, reader, *, /api/r${n}/public/**, GET, allow`);
    lines.push(`p, *, *, /api/r${n}/public/secret, *, deny`);
  }
  t.equal(lines.length, 10_000);
  const policy = await GatewayPolicy.load(policyDirectory(t, { 'big.csv': ruleFile(...lines) }));
  const ask = (n: number, overrides: Partial<PolicyRequest>) => policy.decide(request({ service: 'big', ...overrides })).allowed;
  for (const n of [0, 1, 49, 50, 777, 1234, 2499]) {
    const role = `role-${n % 50}`;
    const otherRole = `role-${(n + 1) % 50}`;
    t.equal(ask(n, { roles: [role], path: `/api/r${n}/p-own/items` }), true, `r${n}: its role lists`);
    t.equal(ask(n, { roles: [role], method: 'DELETE', path: `/api/r${n}/p-own/items/i-9` }), true, `r${n}: * method`);
    t.equal(ask(n, { roles: [otherRole], path: `/api/r${n}/p-own/items` }), false, `r${n}: another role`);
    t.equal(ask(n, { roles: [role], path: `/api/r${n}/p-other/items` }), false, `r${n}: another project`);
    t.equal(ask(n, { roles: [role], method: 'POST', path: `/api/r${n}/p-own/items` }), false, `r${n}: method not listed`);
    t.equal(ask(n, { roles: ['reader'], path: `/api/r${n}/public/a/b` }), true, `r${n}: ** line`);
    const denied = policy.explain(request({ service: 'big', roles: ['reader'], path: `/api/r${n}/public/secret` }));
    t.equal(denied.reason, 'denied by rule', `r${n}: deny line`);
    t.equal(denied.line, 2 + n * 4 + 3, `r${n}: the deny line's number`);
    t.equal(denied.matches.length, 2, `r${n}: only this route's lines match`);
  }
  t.equal(ask(0, { roles: ['role-0'], path: '/api/r2500/p-own/items' }), false, 'a route with no lines');
});
