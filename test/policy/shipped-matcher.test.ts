import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { GatewayPolicy } from '../../src/policy/gateway-policy.ts';
import type { PolicyRequest, PolicyScope } from '../../src/policy/gateway-policy-types.ts';
import { policyDirectory, ruleFile, shippedModel, shippedPolicyDirectory } from './policy-directory.ts';

// The gateway evaluates the shipped model.conf in plain JavaScript and any other model through
// Casbin. These tests hold the JavaScript evaluation to Casbin's answers and check which models
// take which path.

const SHIPPED_MATCHER = `m = (p.act == r.act || p.act == "*") \\
  && (p.scope == r.scope || p.scope == "*") \\
  && roleMatch(r.roles, p.sub) \\
  && pathMatch(r.obj, p.obj, r.project, r.user)`;

/** The shipped model with its matcher replaced by `matcher` (a whole `m = ...` definition). */
function withMatcher(matcher: string): string {
  if (!shippedModel.includes(SHIPPED_MATCHER)) throw new Error('policies/model.conf no longer holds the matcher these tests replace');
  return shippedModel.replace(SHIPPED_MATCHER, matcher);
}

/**
 * The shipped matcher inside one more pair of parentheses: the same expression to Casbin, but not
 * the shipped definition, so a policy loaded with it is evaluated by Casbin. The reference below.
 */
const CASBIN_REFERENCE_MODEL = withMatcher(SHIPPED_MATCHER.replace('m = ', 'm = (') + ')');

/** What compareWithCasbin asserts with. */
type Assertions = Pick<typeof t, 'teardown' | 'equal' | 'same'>;

/** A deterministic pseudo-random source (mulberry32), so a failure reproduces. */
function randomSource(seed: number): { below(count: number): number; pick<T>(items: readonly T[]): T; chance(probability: number): boolean } {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
  const below = (count: number) => Math.floor(next() * count);
  return { below, pick: (items) => items[below(items.length)]!, chance: (probability) => next() < probability };
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const ROLES = ['admin', 'member', 'reader', 'service', 'auditor', 'team-1', 'team-2'];
/** Role sets as tokens carry them: implied roles expanded (admin ⇒ member ⇒ reader), in any order. */
const ROLE_SETS = [[], ['reader'], ['member', 'reader'], ['reader', 'member'], ['admin', 'member', 'reader'], ['service'], ['auditor', 'reader'], ['team-1'], ['team-2', 'member', 'reader'], ['unrelated']];
const LITERALS = ['v1', 'v2', 'things', 'items', 'secret', 'action'];
const PROJECTS = ['p-own', 'p-other'];
const USERS = ['u-own', 'u-other'];

/** A template of 0–4 segments: literals, '*', placeholders (owner ones included), at most one '**', maybe a trailing slash. */
function generatedTemplate(random: ReturnType<typeof randomSource>): string {
  const segments: string[] = [];
  const length = random.below(5);
  let rest = false;
  for (let n = 0; n < length; n++) {
    const kind = random.below(10);
    if (kind < 5) segments.push(random.pick(LITERALS));
    else if (kind === 5) segments.push('*');
    else if (kind === 6) segments.push('{project_id}');
    else if (kind === 7) segments.push('{user_id}');
    else if (kind === 8) segments.push('{thing_id}');
    else if (!rest) {
      rest = true;
      segments.push('**');
    } else segments.push(random.pick(LITERALS));
  }
  if (segments.length > 0 && segments.at(-1) !== '**' && random.chance(0.1)) segments.push('');
  return `/${segments.join('/')}`;
}

function generatedRules(random: ReturnType<typeof randomSource>, count: number): string[] {
  const seen = new Set<string>();
  const rules: string[] = [];
  while (rules.length < count) {
    const role = random.chance(0.2) ? '*' : random.pick(ROLES);
    const scope = random.pick(['project', 'project', 'domain', 'system', '*']);
    const method = random.chance(0.25) ? '*' : random.pick(METHODS);
    const effect = random.chance(0.25) ? 'deny' : 'allow';
    const rule = `p, ${role}, ${scope}, ${generatedTemplate(random)}, ${method}, ${effect}`;
    if (seen.has(rule)) continue;
    seen.add(rule);
    rules.push(rule);
  }
  return rules;
}

/** A concrete path for a template: owner placeholders get the token's ids or someone else's, '**' 0–2 segments. */
function pathFor(template: string, random: ReturnType<typeof randomSource>, projectId: string, userId: string): string {
  const segments: string[] = [];
  for (const segment of template.slice(1).split('/')) {
    if (segment === '{project_id}') segments.push(random.chance(0.7) ? projectId || random.pick(PROJECTS) : random.pick([...PROJECTS, '']));
    else if (segment === '{user_id}') segments.push(random.chance(0.7) ? userId : random.pick([...USERS, '']));
    else if (segment === '*' || /^\{.*\}$/.test(segment)) segments.push(random.pick(['id-1', 'id-2', ...LITERALS, ...(random.chance(0.1) ? [''] : [])]));
    else if (segment === '**') for (let n = random.below(3); n > 0; n--) segments.push(random.pick(['x', ...LITERALS, projectId || 'p-own']));
    else segments.push(random.chance(0.9) ? segment : random.pick(LITERALS));
  }
  return `/${segments.join('/')}`;
}

function generatedRequest(random: ReturnType<typeof randomSource>, service: string, templates: readonly string[]): PolicyRequest {
  const scope = random.pick<PolicyScope>(['project', 'project', 'domain', 'system']);
  const projectId = scope === 'project' ? random.pick(PROJECTS) : undefined;
  const userId = random.pick(USERS);
  const template = random.chance(0.85) ? random.pick(templates) : generatedTemplate(random);
  const request: PolicyRequest = {
    service,
    roles: random.pick(ROLE_SETS),
    scope,
    userId,
    method: random.chance(0.1) ? random.pick(['OPTIONS', 'TRACE']) : random.pick(METHODS),
    path: pathFor(template, random, projectId ?? '', userId),
  };
  if (projectId !== undefined) request.projectId = projectId;
  return request;
}

function templatesOf(ruleText: string): string[] {
  return ruleText
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('p,'))
    .map((line) => line.split(',')[3]!.trim());
}

t.test('which models are evaluated in JavaScript', async (t) => {
  const rules = { 'demo.csv': ruleFile('p, *, *, /a, GET, allow') };
  const load = (model: string) => GatewayPolicy.load(policyDirectory(t, { ...rules, 'model.conf': model }));

  t.equal((await GatewayPolicy.load(shippedPolicyDirectory)).usesShippedMatcher, true, 'policies/model.conf is the shipped model');
  t.match((await GatewayPolicy.load(shippedPolicyDirectory)).summary(), { matcher: 'shipped (JavaScript)' }, 'the load log says so');

  const sameModel: { name: string; model: string }[] = [
    { name: 'without comments', model: shippedModel.split('\n').filter((line) => !line.startsWith('#')).join('\n') },
    {
      name: 'the matcher on one line, spaced differently',
      model: withMatcher('m=(p.act==r.act||p.act=="*")&&(p.scope==r.scope||p.scope=="*")&&roleMatch(r.roles,p.sub)&&pathMatch(r.obj,p.obj,r.project,r.user)'),
    },
    { name: 'extra spaces and tabs', model: withMatcher(SHIPPED_MATCHER.replaceAll(' && ', '  &&\t').replace('roleMatch(', 'roleMatch (')) },
    { name: 'definitions spaced differently', model: shippedModel.replace('r = roles, scope, project, user, obj, act', 'r = roles,scope,  project, user,obj, act') },
    { name: 'CRLF line ends', model: shippedModel.replaceAll('\n', '\r\n') },
  ];
  for (const { name, model } of sameModel) {
    t.not(model, shippedModel, `${name}: the fixture changes the text`);
    t.equal((await load(model)).usesShippedMatcher, true, `${name}: still the shipped model`);
  }

  const otherModels: { name: string; model: string }[] = [
    { name: 'one more pair of parentheses', model: CASBIN_REFERENCE_MODEL },
    { name: 'terms reordered', model: withMatcher('m = roleMatch(r.roles, p.sub) && (p.act == r.act || p.act == "*") && (p.scope == r.scope || p.scope == "*") && pathMatch(r.obj, p.obj, r.project, r.user)') },
    { name: "a space inside a string literal", model: withMatcher(SHIPPED_MATCHER.replace('p.act == "*"', 'p.act == " *"')) },
    { name: 'no method wildcard', model: withMatcher(SHIPPED_MATCHER.replace('(p.act == r.act || p.act == "*")', 'p.act == r.act')) },
    { name: 'an extra term', model: withMatcher(`${SHIPPED_MATCHER} && r.user != "u-blocked"`) },
    { name: 'arguments swapped', model: withMatcher(SHIPPED_MATCHER.replace('r.project, r.user', 'r.user, r.project')) },
  ];
  for (const { name, model } of otherModels) {
    const policy = await load(model);
    t.equal(policy.usesShippedMatcher, false, `${name}: a custom model, evaluated by Casbin`);
    t.match(policy.summary(), { matcher: 'custom (Casbin)' }, `${name}: the load log says so`);
  }
});

t.test('a custom model decides as its own matcher says, not as the shipped one would', async (t) => {
  const rules = ruleFile('p, member, project, /v1/{project_id}/things, *, allow', 'p, member, project, /v1/{project_id}/things, GET, allow', 'p, *, *, /v1/*/open, GET, allow');
  const shipped = await GatewayPolicy.load(policyDirectory(t, { 'demo.csv': rules }));
  const strictMethod = await GatewayPolicy.load(
    policyDirectory(t, { 'demo.csv': rules, 'model.conf': withMatcher(SHIPPED_MATCHER.replace('(p.act == r.act || p.act == "*")', 'p.act == r.act')) }),
  );
  const blockedUser = await GatewayPolicy.load(policyDirectory(t, { 'demo.csv': rules, 'model.conf': withMatcher(`${SHIPPED_MATCHER} && r.user != "u-blocked"`) }));
  t.equal(shipped.usesShippedMatcher, true);
  t.equal(strictMethod.usesShippedMatcher, false);
  t.equal(blockedUser.usesShippedMatcher, false);

  const member = { service: 'demo', roles: ['member'], scope: 'project' as const, projectId: 'p-1', userId: 'u-1', path: '/v1/p-1/things' };
  t.same(shipped.decide({ ...member, method: 'DELETE' }), { allowed: true, reason: 'allowed', rule: 'p, member, project, /v1/{project_id}/things, *, allow', source: 'demo.csv', line: 2 }, "shipped: the '*' method line allows DELETE");
  t.same(strictMethod.decide({ ...member, method: 'DELETE' }), { allowed: false, reason: 'no rule allows' }, "custom: '*' is only a method named '*'");
  t.same(
    strictMethod.explain({ ...member, method: 'GET' }),
    {
      allowed: true,
      reason: 'allowed',
      rule: 'p, member, project, /v1/{project_id}/things, GET, allow',
      source: 'demo.csv',
      line: 3,
      matches: [{ rule: 'p, member, project, /v1/{project_id}/things, GET, allow', source: 'demo.csv', line: 3, effect: 'allow' }],
    },
    'custom: explain lists only what its matcher matched',
  );

  const open = { service: 'demo', roles: [], scope: 'domain' as const, method: 'GET', path: '/v1/x/open' };
  t.equal(shipped.decide({ ...open, userId: 'u-blocked' }).allowed, true, 'shipped: every user');
  t.equal(blockedUser.decide({ ...open, userId: 'u-blocked' }).allowed, false, 'custom: the matcher reads r.user itself');
  t.equal(blockedUser.decide({ ...open, userId: 'u-1' }).allowed, true, 'custom: other users still allowed');
});

/**
 * Loads `files` twice, once with the shipped model (JavaScript) and once with the reference model
 * (Casbin), and compares explain() and decide() for every request.
 */
async function compareWithCasbin(
  t: Assertions,
  files: Record<string, string>,
  requests: readonly PolicyRequest[],
): Promise<{ allowed: number; deniedByRule: number; noRule: number; matched: number }> {
  const javascript = await GatewayPolicy.load(policyDirectory(t, files));
  const javascriptUncached = await GatewayPolicy.load(policyDirectory(t, files), { decisionCacheSize: 0 });
  const reference = await GatewayPolicy.load(policyDirectory(t, { ...files, 'model.conf': CASBIN_REFERENCE_MODEL }), { decisionCacheSize: 0 });
  t.equal(javascript.usesShippedMatcher, true, 'evaluated in JavaScript');
  t.equal(reference.usesShippedMatcher, false, 'the reference is evaluated by Casbin');

  const mismatches: { request: PolicyRequest; javascript: unknown; casbin: unknown }[] = [];
  const counts = { allowed: 0, deniedByRule: 0, noRule: 0, matched: 0 };
  for (const request of requests) {
    const expected = reference.explain(request);
    const got = javascript.explain(request);
    if (JSON.stringify(got) !== JSON.stringify(expected)) mismatches.push({ request, javascript: got, casbin: expected });
    const { matches: _matches, ...expectedDecision } = expected;
    // decide() twice on the cached instance: the second answer may come from the cache.
    for (const decided of [javascriptUncached.decide(request), javascript.decide(request), javascript.decide(request), reference.decide(request)]) {
      if (JSON.stringify(decided) !== JSON.stringify(expectedDecision)) mismatches.push({ request, javascript: decided, casbin: expectedDecision });
    }
    if (expected.reason === 'allowed') counts.allowed++;
    else if (expected.reason === 'denied by rule') counts.deniedByRule++;
    else counts.noRule++;
    counts.matched += expected.matches.length;
  }
  t.same(mismatches.slice(0, 3), [], `JavaScript and Casbin agree on ${requests.length} requests (${mismatches.length} mismatches)`);
  return counts;
}

t.test('the JavaScript evaluation decides as Casbin does: shipped policies', async (t) => {
  const random = randomSource(7);
  const files: Record<string, string> = {};
  const requests: PolicyRequest[] = [];
  for (const entry of fs.readdirSync(shippedPolicyDirectory).filter((name) => name.endsWith('.csv'))) {
    const text = fs.readFileSync(path.join(shippedPolicyDirectory, entry), 'utf8');
    files[entry] = text;
    const templates = templatesOf(text);
    for (let n = 0; n < 3_000; n++) requests.push(generatedRequest(random, entry.slice(0, -'.csv'.length), templates));
  }
  const counts = await compareWithCasbin(t, files, requests);
  t.ok(counts.allowed > 300 && counts.deniedByRule > 50 && counts.noRule > 300, `every outcome exercised: ${JSON.stringify(counts)}`);
});

t.test('the JavaScript evaluation decides as Casbin does: generated rules', async (t) => {
  for (const seed of [1, 2, 3]) {
    const random = randomSource(seed);
    const rules = generatedRules(random, 400);
    const text = ruleFile(...rules);
    const templates = templatesOf(text);
    const requests = Array.from({ length: 4_000 }, () => generatedRequest(random, 'demo', templates));
    const counts = await compareWithCasbin(t, { 'demo.csv': text }, requests);
    t.ok(counts.allowed > 200 && counts.deniedByRule > 200 && counts.noRule > 200, `seed ${seed}: every outcome exercised: ${JSON.stringify(counts)}`);
    t.ok(counts.matched > requests.length, `seed ${seed}: requests often match several lines (${counts.matched} matches)`);
  }
});

t.test('the JavaScript evaluation decides as Casbin does: many lines on one template', async (t) => {
  const rules = ['p, admin, *, /**, *, allow'];
  for (let team = 0; team < 100; team++) rules.push(`p, team-${team}, ${team % 3 ? 'project' : '*'}, /v2/{project_id}/shared, ${team % 4 ? 'GET' : '*'}, ${team % 10 === 9 ? 'deny' : 'allow'}`);
  const requests: PolicyRequest[] = [];
  for (let n = 0; n < 2_000; n++) {
    const roles = [`team-${n % 100}`, `team-${(n * 7) % 100}`, ...(n % 5 ? [] : ['admin'])];
    const scope = (['project', 'domain', 'system'] as const)[n % 3]!;
    const request: PolicyRequest = { service: 'demo', roles, scope, userId: 'u-1', method: ['GET', 'POST', 'DELETE'][n % 3]!, path: `/v2/${n % 2 ? 'p-1' : 'p-2'}/shared` };
    if (scope === 'project') request.projectId = 'p-1';
    requests.push(request);
  }
  const counts = await compareWithCasbin(t, { 'demo.csv': ruleFile(...rules) }, requests);
  t.ok(counts.allowed > 100 && counts.deniedByRule > 50 && counts.noRule > 100, `every outcome exercised: ${JSON.stringify(counts)}`);
});
