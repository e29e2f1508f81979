import net from 'node:net';
import t from 'tap';
import { asSecurityResponse, FORGED_IDENTITY_HEADERS, securityCases } from '../helpers/security.ts';
import { gatewayWorld, IDENTITY_HEADER } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Requests that must not pass, and never reach the upstream.

/** Writes `text` as it is on a new connection; resolves with all that came back once it closed. */
function sendOnSocket(port: number, text: string): Promise<string> {
  return new Promise<string>((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve(data));
    socket.on('error', () => resolve(data));
  });
}

t.test('denials: policy, owner rule, tokens', async (t) => {
  const w = await gatewayWorld(t);
  const before = w.upstream.received.length;
  const denied = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(denied.status, 403);
  t.same(JSON.parse(denied.body), { error: { code: 403, title: 'Forbidden', message: 'You are not authorized to perform the requested action.' } });
  const otherProject = await rawRequest(w.port, { path: `/echo/v1/${w.otherProjectId}/things`, headers: { 'x-auth-token': w.reader } });
  t.equal(otherProject.status, 403, "the owner rule: another project's path is not the token's");
  const ownProject = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': w.reader } });
  t.equal(ownProject.status, 200);

  const unauthenticated = [
    { name: 'no token', headers: {} },
    { name: 'garbage', headers: { 'x-auth-token': 'gAAAAABgarbage' } },
    { name: 'forged headers only', headers: FORGED_IDENTITY_HEADERS },
  ];
  for (const attempt of unauthenticated) {
    const response = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: attempt.headers });
    t.equal(response.status, 401, attempt.name);
    t.equal(response.headers['www-authenticate'], 'Keystone uri="http://keystone.test:5000/v3"');
  }
  const unscoped = (await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', 'unscoped')).token;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': unscoped } })).status, 401, 'unscoped');
  const revoked = (await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } })).token;
  await w.testApp.call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': revoked });
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': revoked } })).status, 401, 'revoked');
  // Revoked after the gateway validated it (the validation cache holds it): refused from then on.
  const usedThenRevoked = (await w.testApp.login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } })).token;
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': usedThenRevoked } })).status, 200, 'forwarded while valid');
  await w.testApp.call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': usedThenRevoked });
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': usedThenRevoked } })).status, 401, 'revoked after use');
  t.equal(w.upstream.received.length, before + 2, 'only the two allowed requests reached the upstream');

  w.testApp.clock.advance(3601_000);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 401, 'expired');
  t.equal((await rawRequest(w.port, { path: '/nosuchservice/x', headers: {} })).status, 401, 'no service enumeration without a token');
});

t.test('path tricks never reach a route policy denies', async (t) => {
  const w = await gatewayWorld(t);
  const attempts = [
    '/echo/v1/public/../admin/secrets',
    '/echo/v1/public/%2e%2e/admin/secrets',
    '/echo/v1/public/%2E%2E/admin/secrets',
    '/echo/v1/public/..%2fadmin/secrets',
    '/echo/v1/public%2f..%2fadmin/secrets',
    '/echo/v1/public/..%5cadmin/secrets',
    '/echo/v1/public/..\\admin/secrets',
    '/echo/v1/public/..;/admin/secrets',
    '/echo/v1/public;/../admin/secrets',
    '/echo/v1/public/%00/../admin/secrets',
    '/echo/v1/public/%252e%252e/admin/secrets',
    '/echo//v1//admin//secrets',
    '/echo/v1/./admin/secrets',
    '/echo/v1/public/./../admin/secrets',
    '/echo/v1/ADMIN/../admin/secrets',
  ];
  for (const attempt of attempts) {
    const response = await rawRequest(w.port, { path: attempt, headers: { 'x-auth-token': w.member } });
    t.ok(response.status === 400 || response.status === 403, `${attempt} -> ${response.status}`);
  }
  t.notOk(
    w.upstream.received.some((request) => /admin/i.test(request.url)),
    `the upstream never saw an admin path: ${w.upstream.received.map((request) => request.url).join(' ')}`,
  );
  const allowed = await rawRequest(w.port, { path: '/echo/v1/public/./docs/../readme', headers: { 'x-auth-token': w.member } });
  t.equal(allowed.status, 200);
  t.equal(w.upstream.received.at(-1)!.url, '/v1/public/readme', 'the forwarded path is the one policy allowed');
  const admin = await rawRequest(w.port, { path: '/echo/v1/admin/secrets', headers: { 'x-auth-token': w.admin } });
  t.equal(admin.status, 200, 'admin reaches it by its real name');

  // An absolute-form request target can never choose the upstream.
  const absolute = await new Promise<string>((resolve) => {
    const socket = net.connect(w.port, '127.0.0.1', () => {
      socket.write(`GET http://127.0.0.1:1/echo/v1/public/x HTTP/1.1\r\nHost: evil.example\r\nX-Auth-Token: ${w.member}\r\nConnection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve(data));
  });
  t.match(absolute, /^HTTP\/1\.1 400/);
});

t.test('HTTP-level defences', async (t) => {
  const w = await gatewayWorld(t);
  const send = (text: string) => sendOnSocket(w.port, text);
  const smuggled = await send(
    `POST /echo/v1/public/x HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.member}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /echo/v1/admin/x HTTP/1.1\r\nHost: a\r\n\r\n`,
  );
  t.match(smuggled, /^HTTP\/1\.1 400/, 'Content-Length with Transfer-Encoding is refused');
  t.notOk(w.upstream.received.some((request) => request.url.includes('admin')));

  const huge = await rawRequest(w.port, { path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member, 'x-padding': 'a'.repeat(20_000) } }).catch(() => ({ status: 0, body: '', headers: {} }));
  t.equal(huge.status, 431);

  const trace = await rawRequest(w.port, { method: 'TRACE', path: '/echo/v1/public/x', headers: { 'x-auth-token': w.member } });
  t.equal(trace.status, 405);
  t.equal(JSON.parse(trace.body).error.code, 405);
  const connect = await send(`CONNECT 127.0.0.1:${w.upstream.port} HTTP/1.1\r\nHost: 127.0.0.1:${w.upstream.port}\r\nX-Auth-Token: ${w.member}\r\n\r\n`);
  t.match(connect, /^HTTP\/1\.1 405 /, 'CONNECT is answered 405, never tunnelled');
  t.match(connect, /"code":405/);
  const chunked = await send(
    `POST /echo/v1/public/x HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.member}\r\nTransfer-Encoding: chunked, identity\r\nConnection: close\r\n\r\n0\r\n\r\n`,
  );
  t.match(chunked, /^HTTP\/1\.1 400/, 'a Transfer-Encoding that does not end in chunked is refused');
});

t.test('a header name or value node could not read strictly is refused before the gateway, whatever node\'s flags say', async (t) => {
  const w = await gatewayWorld(t);
  // The gateway forwards the client's headers as node's parser read them, without testing them again
  // (src/gateway/upstream-pool.ts): that parser must be strict even under --insecure-http-parser.
  // (A property of node's server that its type declarations leave out.)
  const server = w.testApp.app.server.server as typeof w.testApp.app.server.server & { insecureHTTPParser?: boolean };
  t.equal(server.insecureHTTPParser, false, 'the server asks for strict parsing itself');
  const path = `/echo/v1/${w.projectId}/things`;
  const before = w.upstream.received.length;
  for (const line of ['X-Note: a\x01b', 'X-Note: a\x7fb', 'X-Note: a\x00b', 'X-Note: a\x1bb', 'X Note: v', 'X(Note): v', 'X-Nöte: v']) {
    const answer = await sendOnSocket(w.port, `GET ${path} HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.reader}\r\n${line}\r\nConnection: close\r\n\r\n`);
    t.match(answer, /^HTTP\/1\.1 400 /, JSON.stringify(line));
  }
  t.equal(w.upstream.received.length, before, 'none of them reached the upstream');
  const fine = await sendOnSocket(w.port, `GET ${path} HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.reader}\r\nX-Note: tab\there, UTF-8 \u00e9\r\nConnection: close\r\n\r\n`);
  t.match(fine, /^HTTP\/1\.1 200 /, 'a tab and bytes beyond ASCII are fine');
  // Byte for byte: node reads a header's bytes as Latin-1 and the gateway writes them back so.
  t.equal(w.upstream.received.at(-1)?.headers['x-note'], Buffer.from('tab\there, UTF-8 \u00e9').toString('latin1'), 'and forwarded as they came');
});

t.test('a refused request without a body keeps its connection; one with an unread body closes it', async (t) => {
  const w = await gatewayWorld(t);
  const exchange = (text: string) => sendOnSocket(w.port, text);
  // Two requests on one connection, the first refused at once (no token): both are answered, and
  // the first answer does not close the connection (nothing of its request is left unread).
  const path = `/echo/v1/${w.projectId}/things`;
  const bodyless = await exchange(`GET ${path} HTTP/1.1\r\nHost: a\r\n\r\nGET ${path} HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${w.reader}\r\nConnection: close\r\n\r\n`);
  const answers = bodyless.split(/(?=HTTP\/1\.1 \d{3} )/);
  t.equal(answers.length, 2, `two answers on one connection: ${bodyless}`);
  t.match(answers[0], /^HTTP\/1\.1 401 /);
  t.notMatch(answers[0], /\r\nconnection: close\r\n/i, 'the refusal keeps the connection');
  t.match(answers[1], /^HTTP\/1\.1 200 /, 'the next request on it is served');
  // A refused request whose body was never read: the connection closes after the answer, so the
  // body is never taken for a request.
  const body = `GET /echo/v1/admin/x HTTP/1.1\r\nHost: a\r\n\r\n`;
  const withBody = await exchange(`POST ${path} HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  t.match(withBody, /^HTTP\/1\.1 401 /);
  t.match(withBody, /\r\nconnection: close\r\n/i, 'an unread body closes the connection');
  t.equal(withBody.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, 'the body is not answered as a request');
});

t.test('application-credential access rules are enforced at the gateway', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const user = (await call('GET', '/v3/users?name=gw-member')).json().users[0];
  const session = (await login({ id: user.id }, 'Pw-1', { project: { id: w.projectId } })).token;
  const created = await call(
    'POST',
    `/v3/users/${user.id}/application_credentials`,
    { application_credential: { name: 'things-reader', access_rules: [{ service: 'echo', method: 'GET', path: '/v1/*/things' }] } },
    session,
  );
  t.equal(created.statusCode, 201);
  const credential = created.json().application_credential;
  const issued = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } } } }, null);
  t.equal(issued.statusCode, 201);
  const token = String(issued.headers['x-subject-token']);

  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } })).status, 200, 'the rule matches');
  const before = w.upstream.received.length;
  const outside = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token } });
  t.equal(outside.status, 403, 'policy would allow a member this path, the access rules do not');
  const wrongMethod = await rawRequest(w.port, { method: 'POST', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': token } });
  t.equal(wrongMethod.status, 403);
  t.equal(w.upstream.received.length, before, 'nothing outside the rules reached the upstream');

  // Unlike keystonemiddleware, a valid service token without a service role waives nothing (access-rules.test.ts).
  const withService = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token, 'x-service-token': w.admin } });
  t.equal(withService.status, 403);
  const badService = await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things/x`, headers: { 'x-auth-token': token, 'x-service-token': 'gAAAAABnope' } });
  t.equal(badService.status, 401, 'an invalid service token is refused, not ignored');
});

t.test('every gateway route refuses missing, bad and forged credentials (shared generator)', async (t) => {
  const w = await gatewayWorld(t);
  const { call, login } = w.testApp;
  const revoked = (await login({ name: 'gw-member', domain: { id: 'default' } }, 'Pw-1', { project: { id: w.projectId } })).token;
  await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': revoked });
  // A member of another project only: the owner rules give it nothing here.
  const outsider = (await call('POST', '/v3/users', { user: { name: 'gw-outsider', password: 'Pw-1' } })).json().user;
  const elsewhere = (await call('POST', '/v3/projects', { project: { name: 'gw-elsewhere' } })).json().project;
  const memberRole = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${elsewhere.id}/users/${outsider.id}/roles/${memberRole.id}`);
  const outsiderToken = (await login({ id: outsider.id }, 'Pw-1', { project: { id: elsewhere.id } })).token;
  const tokens = { member: outsiderToken, revoked, expiredOrGarbage: 'gAAAAABgarbage-token' };
  const routes = [
    { method: 'GET', url: `/echo/v1/${w.projectId}/things` },
    { method: 'POST', url: `/echo/v1/${w.projectId}/things` },
    { method: 'GET', url: `/echo/v1/${w.projectId}/things/x` },
    { method: 'DELETE', url: `/echo/v1/${w.projectId}/things/x` },
    { method: 'PUT', url: '/echo/v1/admin/secrets' },
  ];
  const send = async (route: { method: string; url: string }, headers: Record<string, string>) => {
    const body = route.method === 'POST' || route.method === 'PUT' ? '{}' : undefined;
    const response = await rawRequest(w.port, { method: route.method, path: route.url, headers: { ...headers, ...(body ? { 'content-type': 'application/json', 'content-length': '2' } : {}) }, body });
    return asSecurityResponse(response);
  };
  for (const route of routes) {
    const baseline = await send(route, { 'X-Auth-Token': outsiderToken });
    for (const securityCase of securityCases({ ...route, public: false }, tokens)) {
      const failure = securityCase.check(await send(route, securityCase.headers), baseline);
      t.notOk(failure, `${route.method} ${route.url}: ${securityCase.name}${failure ? ` — ${failure}` : ''}`);
    }
  }
  t.same(w.upstream.received, [], 'none of it reached the upstream');
});
