import t from 'tap';
import { gatewayWorld, type World } from '../helpers/gateway.ts';
import { GATEWAY_SET, HEADER_FAMILIES, normalizedHeaderName, spellingsOf } from '../helpers/security.ts';
import { rawHeaderRequest, wsgiEnviron, type ReceivedRequest } from '../helpers/upstream.ts';

// What a service behind the gateway receives when a client forges the headers frameworks believe,
// in every spelling a server may read as the same header: generated per family (HEADER_FAMILIES),
// so a header added to a family is covered in every spelling without writing a case for it.

type Lines = [name: string, value: string][];

/** The header lines the upstream received, request id masked (it differs per request). */
function linesOf(received: ReceivedRequest): Lines {
  const lines: Lines = [];
  for (let index = 0; index < received.rawHeaders.length; index += 2) {
    const name = received.rawHeaders[index]!;
    lines.push([name, normalizedHeaderName(name) === 'x-openstack-request-id' ? 'req-…' : received.rawHeaders[index + 1]!]);
  }
  return lines;
}

/** Sends a member's GET with `headers` through the gateway; the header lines the upstream received. */
async function upstreamLines(w: World, headers: Lines): Promise<{ status: number; lines: Lines | undefined }> {
  const before = w.upstream.received.length;
  const response = await rawHeaderRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: [['X-Auth-Token', w.member], ...headers] });
  return { status: response.status, lines: w.upstream.received.length > before ? linesOf(w.upstream.received.at(-1)!) : undefined };
}

const forged = (name: string, spelling: string): [string, string] => [spelling, `forged-${normalizedHeaderName(name)}`];

t.test('identity headers spelled with underscores never reach the service (as a WSGI service reads them)', async (t) => {
  const w = await gatewayWorld(t);
  const validated = (await w.testApp.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.member })).json().token;
  const { status, lines } = await upstreamLines(w, [
    ['X_ROLES', 'admin'],
    ['X_USER_ID', 'forged-admin-id'],
    ['X_PROJECT_ID', 'forged-project'],
    ['X_IDENTITY_STATUS', 'Confirmed'],
    ['X_SERVICE_ROLES', 'service,admin'],
    ['X_AUTH_TOKEN', w.admin],
    ['x_service_token', w.admin],
  ]);
  t.equal(status, 200);
  t.same(
    lines!.filter(([name]) => name.includes('_')),
    [],
    'no header name with "_" is forwarded',
  );
  const environ = wsgiEnviron(lines!.flat());
  t.equal(environ.HTTP_X_ROLES, validated.roles.map((role: { name: string }) => role.name).join(','), "the token's roles only");
  t.equal(environ.HTTP_X_USER_ID, validated.user.id, 'one user id');
  t.equal(environ.HTTP_X_PROJECT_ID, w.projectId);
  t.equal(environ.HTTP_X_IDENTITY_STATUS, 'Confirmed');
  t.equal(environ.HTTP_X_SERVICE_ROLES, undefined, 'no service roles without a service token');
  t.equal(environ.HTTP_X_AUTH_TOKEN, w.member, 'only the token the gateway validated, for keystonemiddleware behind us');
  t.equal(environ.HTTP_X_SERVICE_TOKEN, undefined);

  // The gateway does not read them either: an admin token under X_AUTH_TOKEN is no token.
  const before = w.upstream.received.length;
  const underscored = await rawHeaderRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: [['X_AUTH_TOKEN', w.admin]] });
  t.equal(underscored.status, 401);
  t.equal(w.upstream.received.length, before, 'nothing reached the upstream');
});

t.test('forged headers of every family, in every spelling: the upstream receives exactly what it would without them', async (t) => {
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '10.0.0.0/8', MAX_HEADER_BYTES: '65536' });
  const baseline = await upstreamLines(w, []);
  t.equal(baseline.status, 200);
  // The baseline itself: the client's token and ours, nothing else (HTTP/1.1 keeps the connection
  // alive without a Connection header).
  t.same(
    baseline.lines!.map(([name]) => name).sort(),
    [
      'host',
      'x-auth-token',
      'x-forwarded-for',
      'x-forwarded-host',
      'x-forwarded-proto',
      'x-identity-status',
      'x-is-admin-project',
      'x-openstack-request-id',
      'x-project-domain-id',
      'x-project-domain-name',
      'x-project-id',
      'x-project-name',
      'x-roles',
      'x-user-domain-id',
      'x-user-domain-name',
      'x-user-id',
      'x-user-name',
    ],
  );
  t.match(Object.fromEntries(baseline.lines!), { 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'http', 'x-forwarded-host': `127.0.0.1:${w.port}` });

  for (const [family, names] of Object.entries(HEADER_FAMILIES)) {
    const spellings = names.map((name) => spellingsOf(name).map((spelling) => forged(name, spelling)));
    // Every spelling of every name at once (repeated and case-folded lines merge in Node's parser) …
    const all = await upstreamLines(w, spellings.flat());
    t.same(all, baseline, `${family}: all spellings at once`);
    // … and one spelling at a time, each name of the family in that spelling.
    for (let variant = 0; variant < spellings[0]!.length; variant++) {
      const lines = spellings.map((variants, index) => variants[variant] ?? variants[0] ?? forged(names[index]!, names[index]!));
      t.same(await upstreamLines(w, lines), baseline, `${family}: ${lines[0]![0]} …`);
    }
  }
});

t.test('behind a trusted proxy: its X-Forwarded-* are kept, every other spelling and family is still dropped', async (t) => {
  const w = await gatewayWorld(t, { TRUSTED_PROXIES: '127.0.0.0/8', MAX_HEADER_BYTES: '65536' });
  const baseline = await upstreamLines(w, []);
  t.equal(baseline.status, 200);
  const kept = new Set(GATEWAY_SET.map(normalizedHeaderName));

  for (const [family, names] of Object.entries(HEADER_FAMILIES)) {
    // The proxy's own headers in a spelling with '_' are no proxy's headers: dropped like the rest.
    const lines = names.flatMap((name) =>
      spellingsOf(name)
        .filter((spelling) => !kept.has(normalizedHeaderName(name)) || spelling.includes('_'))
        .map((spelling) => forged(name, spelling)),
    );
    t.same(await upstreamLines(w, lines), baseline, `${family}: every spelling but the trusted proxy's own`);
  }

  const believed = await upstreamLines(w, [
    ['X-FORWARDED-FOR', '203.0.113.9'],
    ['x-forwarded-proto', 'https'],
    ['X-Forwarded-Host', 'api.example.com'],
    ['X-Forwarded-Port', '8443'],
    ['X_Forwarded_For', '198.51.100.66'],
    ['x_forwarded_port', '1'],
  ]);
  const expected = baseline.lines!.map(([name, value]): [string, string] => {
    if (name === 'x-forwarded-for') return [name, '203.0.113.9, 127.0.0.1'];
    if (name === 'x-forwarded-proto') return [name, 'https'];
    if (name === 'x-forwarded-host') return [name, 'api.example.com'];
    return [name, value];
  });
  const forwardedHostAt = expected.findIndex(([name]) => name === 'x-forwarded-host');
  expected.splice(forwardedHostAt + 1, 0, ['x-forwarded-port', '8443']);
  t.same(believed, { status: 200, lines: expected }, 'the proxy’s chain extended, its scheme, host and port believed; nothing with "_"');
});

t.test('a system-scoped service token does not make the user request system-scoped', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const serviceRole = (await call('POST', '/v3/roles', { role: { name: 'service' } })).json().role;
  const serviceUser = (await call('POST', '/v3/users', { user: { name: 'gw-service', password: 'Pw-1' } })).json().user;
  t.equal((await call('PUT', `/v3/system/users/${serviceUser.id}/roles/${serviceRole.id}`)).statusCode, 204);
  const serviceToken = await login({ id: serviceUser.id }, 'Pw-1', { system: { all: true } });
  t.equal(serviceToken.status, 201);

  const { status, lines } = await upstreamLines(w, [['X-Service-Token', serviceToken.token]]);
  t.equal(status, 200);
  const received = Object.fromEntries(lines!);
  t.equal(received['x-service-roles'], 'service', 'the service token was validated and passed on');
  t.equal(received['x-project-id'], w.projectId, "the user's project scope");
  t.equal(received['openstack-system-scope'], undefined, "OpenStack-System-Scope is the user token's scope only");

  // The other way round: a system-scoped user keeps its scope whatever the service token's.
  const system = await login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { system: { all: true } });
  const before = w.upstream.received.length;
  const response = await rawHeaderRequest(w.port, {
    path: '/echo/v1/admin/x',
    headers: [
      ['X-Auth-Token', system.token],
      ['X-Service-Token', w.member],
    ],
  });
  t.equal(response.status, 200);
  t.equal(w.upstream.received.length, before + 1);
  t.match(w.upstream.received.at(-1)!.headers, { 'openstack-system-scope': 'all', 'x-service-project-id': w.projectId, 'x-service-roles': /member/ });
});

t.test('two X-Auth-Token lines (a member and an admin) are no token: 401, nothing reaches the service', async (t) => {
  const w = await gatewayWorld(t);
  for (const tokens of [
    [w.member, w.admin],
    [w.admin, w.member],
  ]) {
    const response = await rawHeaderRequest(w.port, {
      method: 'DELETE',
      path: `/echo/v1/${w.projectId}/things`,
      headers: tokens.map((token): [string, string] => ['X-Auth-Token', token]),
    });
    t.equal(response.status, 401);
    t.equal(JSON.parse(response.body).error.code, 401);
  }
  t.equal(w.upstream.received.length, 0);
});
