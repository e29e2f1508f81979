import t from 'tap';
import { gatewayWorld, type World } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Application-credential access rules at the gateway. Every case is also sent with each kind of
// X-Service-Token: only a token carrying a SERVICE_TOKEN_ROLES role ('service' by default) waives
// the rules; any other valid token (another user's, the same user's, an unscoped one, an admin's)
// changes nothing, and an invalid one is refused.

interface AccessRule {
  service: string;
  method: string;
  path: string;
}

interface AccessRuleCase {
  name: string;
  rules: AccessRule[];
  method: string;
  /** After /echo; {p} is the project id. */
  path: string;
  /** What the access rules say (the policy allows every case to a member). */
  rulesAllow: boolean;
}

const CASES: AccessRuleCase[] = [
  { name: 'exact path', rules: [{ service: 'echo', method: 'GET', path: '/v1/*/things' }], method: 'GET', path: '/v1/{p}/things', rulesAllow: true },
  { name: 'one level deeper than the rule', rules: [{ service: 'echo', method: 'GET', path: '/v1/*/things' }], method: 'GET', path: '/v1/{p}/things/x', rulesAllow: false },
  { name: 'method the rule does not name', rules: [{ service: 'echo', method: 'GET', path: '/v1/*/things' }], method: 'POST', path: '/v1/{p}/things', rulesAllow: false },
  { name: 'public/* matches one segment', rules: [{ service: 'echo', method: 'GET', path: '/v1/public/*' }], method: 'GET', path: '/v1/public/a', rulesAllow: true },
  { name: 'public/* does not match /public/a/b', rules: [{ service: 'echo', method: 'GET', path: '/v1/public/*' }], method: 'GET', path: '/v1/public/a/b', rulesAllow: false },
  { name: 'public/* is GET only', rules: [{ service: 'echo', method: 'GET', path: '/v1/public/*' }], method: 'DELETE', path: '/v1/public/a', rulesAllow: false },
  { name: '** matches any depth', rules: [{ service: 'echo', method: 'PUT', path: '/v1/public/**' }], method: 'PUT', path: '/v1/public/a/b/c', rulesAllow: true },
  { name: '{name} matches one segment', rules: [{ service: 'echo', method: 'GET', path: '/v1/{project_id}/things/*' }], method: 'GET', path: '/v1/{p}/things/y', rulesAllow: true },
  { name: 'a rule for another service', rules: [{ service: 'compute', method: 'GET', path: '/v1/public/*' }], method: 'GET', path: '/v1/public/a', rulesAllow: false },
];

type ServiceTokenKind = 'none' | 'service role' | "another user's project token" | "the same user's project token" | 'unscoped token' | "an admin's token" | 'invalid';

/** What the gateway answers (200: forwarded): the rules decide unless a service token with a service role comes along. */
function expectedStatus(rulesAllow: boolean, kind: ServiceTokenKind): number {
  if (kind === 'invalid') return 401;
  if (kind === 'service role') return 200;
  return rulesAllow ? 200 : 403;
}

/** One valid token of each kind, issued now (`admin`: an admin token valid now). */
async function serviceTokens(w: World, admin: string): Promise<Record<Exclude<ServiceTokenKind, 'none'>, string>> {
  const { call, login } = w.testApp;
  let serviceRole = (await call('GET', '/v3/roles?name=service', undefined, admin)).json().roles[0];
  serviceRole ??= (await call('POST', '/v3/roles', { role: { name: 'service' } }, admin)).json().role;
  let serviceProject = (await call('GET', '/v3/projects?name=gw-service', undefined, admin)).json().projects[0];
  serviceProject ??= (await call('POST', '/v3/projects', { project: { name: 'gw-service' } }, admin)).json().project;
  let nova = (await call('GET', '/v3/users?name=gw-nova', undefined, admin)).json().users[0];
  nova ??= (await call('POST', '/v3/users', { user: { name: 'gw-nova', password: 'Pw-1' } }, admin)).json().user;
  await call('PUT', `/v3/projects/${serviceProject.id}/users/${nova.id}/roles/${serviceRole.id}`, undefined, admin);
  const member = (await call('GET', '/v3/users?name=gw-member', undefined, admin)).json().users[0];
  const reader = (await call('GET', '/v3/users?name=gw-reader', undefined, admin)).json().users[0];
  return {
    'service role': (await login({ id: nova.id }, 'Pw-1', { project: { id: serviceProject.id } })).token,
    "another user's project token": (await login({ id: reader.id }, 'Pw-1', { project: { id: w.projectId } })).token,
    "the same user's project token": (await login({ id: member.id }, 'Pw-1', { project: { id: w.otherProjectId } })).token,
    'unscoped token': (await login({ id: reader.id }, 'Pw-1', 'unscoped')).token,
    "an admin's token": admin,
    invalid: 'gAAAAABnot-a-token',
  };
}

/** An application credential of gw-member on the world's project with these access rules, and its token. */
async function credentialToken(w: World, session: string, memberId: string, name: string, rules: AccessRule[]): Promise<string> {
  const { call } = w.testApp;
  const created = await call('POST', `/v3/users/${memberId}/application_credentials`, { application_credential: { name, access_rules: rules } }, session);
  if (created.statusCode !== 201) throw new Error(`credential: ${created.statusCode} ${created.body}`);
  const { id, secret } = created.json().application_credential;
  const issued = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id, secret } } } }, null);
  if (issued.statusCode !== 201) throw new Error(`credential token: ${issued.statusCode} ${issued.body}`);
  return String(issued.headers['x-subject-token']);
}

t.test('access rules hold whatever X-Service-Token comes along, unless it carries a service role', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const member = (await call('GET', '/v3/users?name=gw-member')).json().users[0];
  const session = (await login({ id: member.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  const services = await serviceTokens(w, w.admin);
  const kinds: ServiceTokenKind[] = ['none', ...(Object.keys(services) as Exclude<ServiceTokenKind, 'none'>[])];

  for (const [index, rule] of CASES.entries()) {
    const token = await credentialToken(w, session, member.id, `rules-${index}`, rule.rules);
    const path = `/echo${rule.path.replace('{p}', w.projectId)}`;
    for (const kind of kinds) {
      const headers: Record<string, string> = { 'x-auth-token': token };
      if (kind !== 'none') headers['x-service-token'] = services[kind];
      const before = w.upstream.received.length;
      const answer = await rawRequest(w.port, { method: rule.method, path, headers, ...(rule.method === 'PUT' ? { body: '{}' } : {}) });
      const expected = expectedStatus(rule.rulesAllow, kind);
      const label = `${rule.name}: ${rule.method} ${rule.path} with service token: ${kind}`;
      if (expected === 200) {
        t.ok(answer.status >= 200 && answer.status < 300, `${label}: forwarded (${answer.status})`);
        t.equal(w.upstream.received.length, before + 1, `${label}: the upstream got it`);
      } else {
        t.equal(answer.status, expected, label);
        t.equal(w.upstream.received.length, before, `${label}: nothing reached the upstream`);
      }
    }
  }
});

t.test('an expired user token passes with a service-role service token only', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login, clock } = w.testApp;
  const member = (await call('GET', '/v3/users?name=gw-member')).json().users[0];
  const session = (await login({ id: member.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  const credential = await credentialToken(w, session, member.id, 'expiring', [{ service: 'echo', method: 'GET', path: '/v1/public/*' }]);
  clock.advance(3601_000);
  const admin = (await login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { project: { name: 'admin', domain: { id: 'default' } } })).token;
  const services = await serviceTokens(w, admin);
  const path = '/echo/v1/public/a';
  for (const [name, token] of [['project token', w.member], ['application-credential token', credential]] as const) {
    t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': token } })).status, 401, `expired ${name} alone`);
    t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': token, 'x-service-token': services['service role'] } })).status, 200, `expired ${name} with a service-role token`);
    for (const kind of ["another user's project token", 'unscoped token', "an admin's token"] as const) {
      t.equal((await rawRequest(w.port, { path, headers: { 'x-auth-token': token, 'x-service-token': services[kind] } })).status, 401, `expired ${name} with ${kind}`);
    }
  }
});
