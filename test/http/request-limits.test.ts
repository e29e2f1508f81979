import net from 'node:net';
import t from 'tap';
import { startTestApp } from '../helpers/app.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Request limits of the identity API: body size (413), header size (431), timeouts, and methods
// nobody should use (TRACE, WebDAV, unknown) answered in Keystone's error shape.

t.test('identity API request limits', async (t) => {
  const app = await startTestApp(t, { BODY_LIMIT_BYTES: '4096', MAX_HEADER_BYTES: '8192', HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '20000' });
  await app.app.server.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.app.server.server.address() as net.AddressInfo).port;
  const send = (text: string) =>
    new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', () => resolve(data));
    });

  t.test('an oversized body on POST /v3/auth/tokens is 413, before any authentication', async (t) => {
    const password = 'x'.repeat(5000);
    const response = await app.request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password } } } } }),
    });
    t.equal(response.statusCode, 413);
    t.same(response.json(), { error: { code: 413, title: 'Payload Too Large', message: 'The request body is larger than this server accepts.' } });
    const small = await app.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret');
    t.equal(small.status, 201, 'a body under the limit is fine');
  });

  t.test('oversized headers are 431 in the Keystone shape', async (t) => {
    const response = await rawRequest(port, { method: 'POST', path: '/v3/auth/tokens', headers: { 'content-type': 'application/json', 'x-padding': 'a'.repeat(10_000) }, body: '{}' });
    t.equal(response.status, 431);
    t.same(JSON.parse(response.body), { error: { code: 431, title: 'Request Header Fields Too Large', message: 'Request Header Fields Too Large' } });
    t.equal((await rawRequest(port, { path: '/v3', headers: { 'x-padding': 'a'.repeat(4000) } })).status, 200, 'under the limit');
  });

  t.test('TRACE, WebDAV and unknown methods are refused', async (t) => {
    for (const method of ['TRACE', 'PROPFIND', 'OPTIONS']) {
      const answer = await send(`${method} /v3/users HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${app.adminToken}\r\nConnection: close\r\n\r\n`);
      t.match(answer, /^HTTP\/1\.1 405 /, method);
      t.match(answer, /\r\nallow: GET, HEAD, POST\r\n/i, `${method}: Allow lists the methods of the path`);
      t.match(answer, /\{"error":\{"code":405,"title":"Method Not Allowed","message":"The method is not allowed for the requested URL\."\}\}$/);
      t.notOk(answer.includes(app.adminToken), `${method}: nothing of the request is echoed`);
    }
    const unknown = await send(`BREW /v3/users HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`);
    t.match(unknown, /^HTTP\/1\.1 400 /, 'a method HTTP does not know does not parse');
    t.match(unknown, /"code":400/);
    const connect = await send(`CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n`);
    t.match(connect, /^HTTP\/1\.1 405 /, 'CONNECT');
  });

  t.test('a request with a Content-Type and no body (no Content-Length, no Transfer-Encoding) is answered as with Content-Length: 0', async (t) => {
    // Node hands such a request over with its stream already ended (optimizeEmptyRequests): the
    // body parser must not wait for an end that has been and gone.
    const subject = (await app.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret')).token;
    const head = (method: string, path: string, extra: string) =>
      `${method} ${path} HTTP/1.1\r\nHost: a\r\nX-Auth-Token: ${app.adminToken}\r\nContent-Type: application/json\r\n${extra}Connection: close\r\n\r\n`;
    const revoked = await send(head('DELETE', '/v3/auth/tokens', `X-Subject-Token: ${subject}\r\n`));
    t.match(revoked, /^HTTP\/1\.1 204 /, 'DELETE with a Content-Type and nothing after the head');
    t.equal((await rawRequest(port, { path: '/v3/auth/tokens', headers: { 'x-auth-token': app.adminToken, 'x-subject-token': subject } })).status, 404, 'and the token is revoked');
    const withoutLength = await send(head('POST', '/v3/auth/tokens', ''));
    const withZeroLength = await send(head('POST', '/v3/auth/tokens', 'Content-Length: 0\r\n'));
    t.match(withoutLength, /^HTTP\/1\.1 400 /, 'POST without a body: the missing body is a 400');
    t.equal(withoutLength.slice(withoutLength.indexOf('\r\n\r\n')), withZeroLength.slice(withZeroLength.indexOf('\r\n\r\n')), 'the same body as with Content-Length: 0');
  });

  t.test('request and header timeouts are set on the server (never "no limit")', async (t) => {
    const server = app.app.server.server;
    t.equal(server.headersTimeout, 5000);
    t.equal(server.requestTimeout, 20_000);
    t.equal(server.timeout, 0, "stalled connections are swept (src/http/stalled-connections.ts), not timed by node's per-socket timer");
    t.equal(server.keepAliveTimeout, 72_000);
  });
});
