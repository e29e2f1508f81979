import t from 'tap';
import type { CatalogEntry } from '../../src/catalog/catalog-service.ts';
import type { AuditInitiator, AuditReason } from '../../src/events/audit.ts';
import { AuthenticationError, ServiceError, TooManyRequestsError, ValidationError } from '../../src/support/errors.ts';
import { issueToken, type TokenIssueServices } from '../../src/token/issue-token.ts';
import { parseTokenRequest, type AuthRequest, type TokenRequest } from '../../src/token/token-request.ts';
import type { TokenContext } from '../../src/token/token-service.ts';

// The token-issue use case with fake services: what runs in which order, what is audited, and the
// checked request the token service receives.

const INITIATOR: AuditInitiator = { address: '192.0.2.7', agent: 'test' };
const CATALOG: CatalogEntry[] = [];

function tokenFor(scope: TokenContext['scope']): TokenContext {
  return {
    id: 'token-id',
    methods: ['password'],
    user: { id: 'u1', name: 'alice', domainId: 'default', domainName: 'Default', passwordExpiresAt: null },
    scope,
    roles: [],
    auditIds: ['audit'],
    issuedAt: 0,
    expiresAt: 3600_000,
  };
}
const PROJECT_SCOPE: TokenContext['scope'] = {
  type: 'project',
  project: { id: 'p1', name: 'demo', domainId: 'default', domainName: 'Default', isDomain: false },
};

/** Fake services recording every call, in order. */
function fakes(options: { authenticate?: (request: TokenRequest) => Promise<TokenContext>; throttle?: () => Promise<void> } = {}) {
  const calls: string[] = [];
  const audited: { outcome: string; initiator: AuditInitiator; reason?: AuditReason | undefined }[] = [];
  const authenticated: TokenRequest[] = [];
  const throttled: { address: string; request: AuthRequest }[] = [];
  const services: TokenIssueServices = {
    loginThrottle: {
      beginLogin: async (address, request) => {
        calls.push('throttle');
        throttled.push({ address, request });
        await options.throttle?.();
        return { succeeded: async () => void calls.push('succeeded') };
      },
    },
    tokens: {
      authenticate: async (request) => {
        calls.push('authenticate');
        authenticated.push(request);
        return (options.authenticate ?? (async () => tokenFor(PROJECT_SCOPE)))(request);
      },
    },
    audit: { authenticate: (outcome, initiator, reason) => void audited.push({ outcome, initiator, reason }) },
    clientCatalog: {
      catalog: async (substitutions) => {
        calls.push(`catalog ${substitutions.projectId ?? '-'} ${substitutions.userId ?? '-'}`);
        return CATALOG;
      },
    },
  };
  return { services, calls, audited, authenticated, throttled };
}

const byName: AuthRequest = {
  methods: ['password'],
  password: { user: { name: 'alice', domain: { name: 'Default' }, password: 'secret' } },
  scope: { project: { name: 'demo', domain: { id: 'default' } } },
};

t.test('a token is issued: throttle, authenticate the checked request, succeed, audit, catalog', async (t) => {
  const { services, calls, audited, authenticated, throttled } = fakes();
  const issued = await issueToken(services, { request: byName, initiator: INITIATOR, withCatalog: true });
  t.equal(issued.token.id, 'token-id');
  t.equal(issued.catalog, CATALOG);
  t.same(calls, ['throttle', 'authenticate', 'succeeded', 'catalog p1 u1']);
  t.same(throttled, [{ address: '192.0.2.7', request: byName }], 'the throttle counts the request as sent');
  t.same(authenticated, [
    {
      method: 'user',
      methods: ['password'],
      password: { user: { name: 'alice', domainName: 'Default' }, password: 'secret' },
      scope: { type: 'project', project: { name: 'demo', domain: { id: 'default' } } },
    },
  ]);
  t.same(audited, [{ outcome: 'success', initiator: { ...INITIATOR, userId: 'u1', userName: 'alice' }, reason: undefined }]);
});

t.test('no catalog when none is asked for, nor for an unscoped token', async (t) => {
  const without = fakes();
  t.equal((await issueToken(without.services, { request: byName, initiator: INITIATOR, withCatalog: false })).catalog, undefined);
  t.same(without.calls, ['throttle', 'authenticate', 'succeeded']);

  const unscoped = fakes({ authenticate: async () => tokenFor({ type: 'unscoped' }) });
  t.equal((await issueToken(unscoped.services, { request: byName, initiator: INITIATOR, withCatalog: true })).catalog, undefined);
  t.same(unscoped.calls, ['throttle', 'authenticate', 'succeeded']);
});

t.test('a failed authentication is audited with its real cause and the name asked for', async (t) => {
  const { services, calls, audited } = fakes({
    authenticate: async () => {
      throw AuthenticationError.because({ reason: 'Invalid password', code: 401, userId: 'u1' });
    },
  });
  await t.rejects(issueToken(services, { request: byName, initiator: INITIATOR, withCatalog: true }), AuthenticationError);
  t.same(calls, ['throttle', 'authenticate'], 'the attempt is not given back');
  t.same(audited, [
    { outcome: 'failure', initiator: { ...INITIATOR, userId: 'u1', userName: 'alice' }, reason: { reasonType: 'Invalid password', reasonCode: '401' } },
  ]);
});

t.test('the rate limits come first: a refused attempt is audited and never checked', async (t) => {
  const { services, calls, audited } = fakes({
    throttle: async () => {
      throw new TooManyRequestsError(30);
    },
  });
  const malformed: AuthRequest = { ...byName, scope: { project: { id: 'x' }, domain: { id: 'y' } } };
  await t.rejects(issueToken(services, { request: malformed, initiator: INITIATOR, withCatalog: true }), TooManyRequestsError);
  t.same(calls, ['throttle']);
  t.equal(audited.length, 1);
  t.match(audited[0], { outcome: 'failure', reason: { reasonCode: '429' } });
});

t.test('a malformed request counts against the limits, is refused with 400 and is not an authentication attempt', async (t) => {
  const { services, calls, audited } = fakes();
  const malformed: AuthRequest = { ...byName, scope: { project: { id: 'x' }, domain: { id: 'y' } } };
  await t.rejects(issueToken(services, { request: malformed, initiator: INITIATOR, withCatalog: true }), ValidationError);
  t.same(calls, ['throttle']);
  t.same(audited, []);
});

t.test('an unsupported method is a 401, audited', async (t) => {
  const { services, calls, audited } = fakes();
  const oauth1: AuthRequest = { methods: ['external'], external: {} } as AuthRequest;
  await t.rejects(issueToken(services, { request: oauth1, initiator: INITIATOR, withCatalog: true }), AuthenticationError);
  t.same(calls, ['throttle']);
  t.match(audited, [{ outcome: 'failure', reason: { reasonType: 'Attempted to authenticate with an unsupported method.', reasonCode: '401' } }]);
});

// ---- parseTokenRequest: the forms, and Keystone's answers in Keystone's order -------------------

const user = { name: 'alice', domain: { id: 'default' }, password: 'pw' };
const password = (scope?: unknown, extra: Partial<AuthRequest> = {}): AuthRequest => ({
  methods: ['password'],
  password: { user },
  ...(scope === undefined ? {} : { scope }),
  ...extra,
});

t.test('the checked forms of a token request', async (t) => {
  const scopes: [unknown, unknown][] = [
    [undefined, { type: 'default' }],
    [null, { type: 'default' }],
    [{}, { type: 'default' }],
    ['unscoped', { type: 'unscoped' }],
    [{ unscoped: {} }, { type: 'unscoped' }],
    [{ system: { all: true } }, { type: 'system' }],
    [{ domain: { id: 'd1', name: 'ignored' } }, { type: 'domain', domain: { id: 'd1' } }],
    [{ domain: { id: '', name: 'Dom' } }, { type: 'domain', domain: { name: 'Dom' } }],
    [{ project: { id: 'p1', name: 'ignored' } }, { type: 'project', project: { id: 'p1' } }],
    [{ project: { name: 'demo', domain: { name: 'Default' } } }, { type: 'project', project: { name: 'demo', domain: { name: 'Default' } } }],
  ];
  for (const [scope, expected] of scopes) {
    const parsed = parseTokenRequest(password(scope));
    t.same(parsed, { method: 'user', methods: ['password'], password: { user: { name: 'alice', domainId: 'default' }, password: 'pw' }, scope: expected }, JSON.stringify(scope));
  }
  t.same(parseTokenRequest({ methods: ['token'], token: { id: 'tok' } }), { method: 'user', methods: ['token'], token: { id: 'tok' }, scope: { type: 'default' } });
  t.same(parseTokenRequest({ methods: ['password'], password: { user: { id: 'u1', name: 'alice', password: 'pw' } } }), {
    method: 'user',
    methods: ['password'],
    password: { user: { id: 'u1' }, password: 'pw' },
    scope: { type: 'default' },
  });
  t.same(parseTokenRequest({ methods: ['password'], password: { user: { id: 'u1', password: 'pw' } }, scope: { 'OS-TRUST:trust': { id: 't1' } } }), {
    method: 'user',
    methods: ['password'],
    password: { user: { id: 'u1' }, password: 'pw' },
    scope: { type: 'trust', trustId: 't1' },
  });
  t.same(parseTokenRequest({ methods: ['application_credential'], application_credential: { id: 'ac', secret: 's' } }), {
    method: 'application_credential',
    credential: { id: 'ac' },
    secret: 's',
  });
  t.same(
    parseTokenRequest({ methods: ['application_credential'], application_credential: { name: 'ci', secret: 's', user: { name: 'alice', domain: { name: 'Default' } } } }),
    { method: 'application_credential', credential: { name: 'ci', user: { name: 'alice', domainName: 'Default' } }, secret: 's' },
  );
});

t.test("malformed requests get Keystone's answers, in its order", async (t) => {
  const expecting = (attribute: string, target: string) => `Expecting to find ${attribute} in ${target}.`;
  const cases: [string, AuthRequest, number, string][] = [
    ['no methods', { methods: [] }, 400, expecting('methods', 'identity')],
    ['no password object', { methods: ['password'] }, 400, expecting('password', 'identity')],
    ['user without id or name', { methods: ['password'], password: { user: { password: 'x' } } }, 400, 'Invalid input for field identity/password/user: id or name must be present.'],
    ['domain without id or name', { methods: ['password'], password: { user: { name: 'a', domain: {}, password: 'x' } } }, 400, 'Invalid input for field identity/password/user/domain: id or name must be present.'],
    ['unsupported before the scope', { methods: ['external'], external: {}, scope: 7 } as AuthRequest, 401, 'Attempted to authenticate with an unsupported method.'],
    ['scope of the wrong type', password(['x']), 400, expecting('system, project, domain, OS-TRUST:trust or unscoped', 'scope')],
    ['two scopes', password({ project: { id: 'x' }, domain: { id: 'y' } }), 400, expecting('system, project, domain, OS-TRUST:trust or unscoped', 'scope')],
    ['unknown scope', password({ galaxy: {} }), 400, expecting('system, project, domain, OS-TRUST:trust or unscoped', 'scope')],
    ['system not all', password({ system: { all: 'yes' } }), 400, expecting('all', 'system')],
    ['domain without id or name', password({ domain: {} }), 400, 'Invalid input for field scope/domain: id or name must be present.'],
    ['project without id or name', password({ project: { id: 5 } }), 400, 'Invalid input for field scope/project: id or name must be present.'],
    ['project by name without domain', password({ project: { name: 'p' } }), 400, expecting('domain', 'project')],
    ['project domain without id or name', password({ project: { name: 'p', domain: {} } }), 400, 'Invalid input for field scope/project/domain: id or name must be present.'],
    ['a trust without id', password({ 'OS-TRUST:trust': {} }), 400, expecting('trust_id', 'trust')],
    ['scope checked before the user', { methods: ['password'], password: {}, scope: { galaxy: {} } }, 400, expecting('system, project, domain, OS-TRUST:trust or unscoped', 'scope')],
    ['no user', { methods: ['password'], password: {} }, 400, expecting('user', 'password')],
    ['user by name without domain', { methods: ['password'], password: { user: { name: 'a', password: 'x' } } }, 400, expecting('domain', 'user')],
    ['no password', { methods: ['password'], password: { user: { id: 'a' } } }, 400, expecting('password', 'user')],
    ['token without id', { methods: ['token'], token: {} }, 400, expecting('id', 'token')],
    [
      'application credential with another method, before its own checks',
      { methods: ['application_credential', 'password'], application_credential: {}, password: { user } },
      401,
      'The request you have made requires authentication.',
    ],
    [
      'application credential with a scope',
      { methods: ['application_credential'], application_credential: { id: 'a', secret: 's' }, scope: 'unscoped' },
      401,
      'Error authenticating with application credential: Application credentials cannot request a scope.',
    ],
    ['application credential without id or name', { methods: ['application_credential'], application_credential: { secret: 's' } }, 400, 'Invalid input for field identity/application_credential: id or name must be present.'],
    ['application credential without secret', { methods: ['application_credential'], application_credential: { id: 'a' } }, 400, expecting('secret', 'application_credential')],
    ['application credential by name without user', { methods: ['application_credential'], application_credential: { name: 'a', secret: 's' } }, 400, expecting('user', 'application_credential')],
    [
      'application credential user without domain',
      { methods: ['application_credential'], application_credential: { name: 'a', secret: 's', user: { name: 'u' } } },
      400,
      expecting('domain', 'user'),
    ],
  ];
  for (const [name, request, status, message] of cases) {
    let thrown: unknown;
    try {
      parseTokenRequest(request);
    } catch (error) {
      thrown = error;
    }
    t.ok(thrown instanceof ServiceError, name);
    const error = thrown as ServiceError;
    t.equal(error instanceof ValidationError ? 400 : error instanceof AuthenticationError ? 401 : 0, status, `${name}: status`);
    t.ok(error.message.startsWith(message), `${name}: ${error.message}`);
  }
});
