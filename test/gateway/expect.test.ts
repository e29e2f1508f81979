import http from 'node:http';
import net from 'node:net';
import pino from 'pino';
import t from 'tap';
import { gatewayWorld } from '../helpers/gateway.ts';
import { rawRequest } from '../helpers/upstream.ts';

// Expect: 100-continue asks the server whether to send the body. Answering 100 before the request
// is authenticated makes a refused client upload its body first.

interface ExpectAnswer {
  /** A 100 Continue came before the final answer. */
  continued: boolean;
  status: number;
  /** The final answer's Connection header. */
  connection: string | undefined;
  body: string;
}

/** Sends headers with Expect: 100-continue; the body only once (and if) 100 Continue arrives. */
function withExpectContinue(
  port: number,
  options: { method: string; path: string; headers?: Record<string, string>; body: string; expect?: string },
): Promise<ExpectAnswer> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const request = http.request({
      host: '127.0.0.1',
      port,
      method: options.method,
      path: options.path,
      headers: { ...options.headers, expect: options.expect ?? '100-continue', 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body) },
    });
    request.on('continue', () => {
      continued = true;
      request.end(options.body);
    });
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        // Refused without 100: the body was never sent; the request is over.
        if (!continued) request.destroy();
        resolve({ continued, status: response.statusCode ?? 0, connection: response.headers.connection, body: Buffer.concat(chunks).toString() });
      });
    });
    request.on('error', reject);
    request.flushHeaders();
  });
}

t.test('gateway: 100 Continue only once the request is authenticated and allowed', async (t) => {
  const w = await gatewayWorld(t);
  const path = `/echo/v1/${w.projectId}/things`;
  const body = '{"thing": {"name": "a"}}';

  const noToken = await withExpectContinue(w.port, { method: 'POST', path, body });
  t.same({ continued: noToken.continued, status: noToken.status }, { continued: false, status: 401 }, 'no token: 401 without 100, the body is never sent');
  t.equal(JSON.parse(noToken.body).error.code, 401);
  t.equal(noToken.connection, 'close', 'the unsent body is not waited for: the connection closes');
  const badToken = await withExpectContinue(w.port, { method: 'POST', path, headers: { 'x-auth-token': 'gAAAAABgarbage' }, body });
  t.same({ continued: badToken.continued, status: badToken.status }, { continued: false, status: 401 }, 'a bad token likewise');
  const denied = await withExpectContinue(w.port, { method: 'POST', path, headers: { 'x-auth-token': w.reader }, body });
  t.same({ continued: denied.continued, status: denied.status }, { continued: false, status: 403 }, 'denied by policy: 403 without 100');
  t.equal(denied.connection, 'close', 'the connection closes after the 403 too');
  t.equal(w.upstream.received.length, 0, 'nothing reached the upstream');

  const allowed = await withExpectContinue(w.port, { method: 'POST', path, headers: { 'x-auth-token': w.member }, body });
  t.same({ continued: allowed.continued, status: allowed.status }, { continued: true, status: 201 }, 'allowed: 100, then the upstream’s answer');
  const received = w.upstream.received.at(-1)!;
  t.equal(received.body, body, 'the body sent after 100 reached the upstream');
  t.equal(received.headers.expect, undefined, 'Expect is answered here, not forwarded');
});

t.test('identity API: 100 Continue after the token is validated; at once on public routes', async (t) => {
  const w = await gatewayWorld(t);
  const body = JSON.stringify({ project: { name: 'expect-continue' } });
  const badToken = await withExpectContinue(w.port, { method: 'POST', path: '/v3/projects', headers: { 'x-auth-token': 'gAAAAABgarbage' }, body });
  t.same({ continued: badToken.continued, status: badToken.status }, { continued: false, status: 401 });
  t.equal(badToken.connection, 'close');
  const noToken = await withExpectContinue(w.port, { method: 'POST', path: '/identity/v3/projects', body });
  t.same({ continued: noToken.continued, status: noToken.status }, { continued: false, status: 401 }, 'under /identity too');
  const created = await withExpectContinue(w.port, { method: 'POST', path: '/v3/projects', headers: { 'x-auth-token': w.admin }, body });
  t.same({ continued: created.continued, status: created.status }, { continued: true, status: 201 });
  t.equal(JSON.parse(created.body).project.name, 'expect-continue');

  const login = JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'gw-member', domain: { id: 'default' }, password: 'Pw-1' } } } } });
  const issued = await withExpectContinue(w.port, { method: 'POST', path: '/v3/auth/tokens', body: login });
  t.same({ continued: issued.continued, status: issued.status }, { continued: true, status: 201 }, 'POST /v3/auth/tokens needs no token: it continues at once');
});

t.test('any other expectation: 417 with a Keystone error body, a request id, and a log line', async (t) => {
  const lines: string[] = [];
  const w = await gatewayWorld(t, {}, { logger: pino({ level: 'info' }, { write: (line: string) => lines.push(line) }) });
  for (const path of [`/echo/v1/${w.projectId}/things`, '/v3/projects']) {
    const response = await rawRequest(w.port, {
      method: 'POST',
      path: `${path}?q=1`,
      headers: { 'x-auth-token': w.member, expect: 'something-else', 'content-type': 'application/json' },
      body: '{}',
    });
    t.equal(response.status, 417, path);
    t.equal(response.headers['content-type'], 'application/json');
    t.equal(response.headers.connection, 'close');
    t.same(JSON.parse(response.body), {
      error: { code: 417, title: 'Expectation Failed', message: 'The expectation in the Expect header cannot be met: only 100-continue is supported.' },
    });
    const requestId = response.headers['x-openstack-request-id'];
    t.match(requestId, /^req-[0-9a-f-]{36}$/);
    const logged = lines.map((line) => JSON.parse(line)).filter((entry) => entry.request_id === requestId);
    t.match(logged, [{ msg: 'expectation failed', method: 'POST', path, status: 417, expect: 'something-else' }], 'one log line, by request id');
  }
  t.equal(w.upstream.received.length, 0);
});

/** Writes `text` on a fresh connection; everything the server sent until it closed the connection. */
function exchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

/** The status lines of every response in `text` (a 100 Continue included). */
const statusLines = (text: string): string[] => text.match(/HTTP\/1\.[01] \d{3}[^\r]*/g) ?? [];

t.test('a refused Expect request whose client sent its body anyway, then a second request: one answer, the connection closes', async (t) => {
  const w = await gatewayWorld(t);
  const body = '{"thing": {"name": "early"}}';
  const second = `GET /echo/v1/${w.projectId}/things HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${w.admin}\r\n\r\n`;
  for (const [path, headers] of [
    [`/echo/v1/${w.projectId}/things`, ''],
    [`/echo/v1/${w.projectId}/things`, `X-Auth-Token: ${w.reader}\r\n`],
    ['/v3/projects', ''],
  ] as const) {
    const first = `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const answer = await exchange(w.port, first + second);
    t.same(statusLines(answer).length, 1, `${path}: exactly one response (${statusLines(answer).join(' | ')})`);
    t.match(answer, /^HTTP\/1\.1 40[13] /, 'the refusal, without 100 first');
    t.match(answer, /\r\nConnection: close\r\n/i);
  }
  t.equal(w.upstream.received.length, 0, 'neither the early body nor the second request reached the service');

  // Control: after an allowed request the second one is served on the same connection.
  const allowed = `POST /echo/v1/${w.projectId}/things HTTP/1.1\r\nHost: x\r\nX-Auth-Token: ${w.member}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  t.same(statusLines(await exchange(w.port, allowed + second.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'))), ['HTTP/1.1 201 Created', 'HTTP/1.1 200 OK']);
  t.same(w.upstream.received.map((r) => r.method), ['POST', 'GET'], 'only the control’s requests reached the service: a request queued behind a refusal never runs');
});

t.test('Expect is matched case-insensitively; anything but exactly 100-continue is 417', async (t) => {
  const w = await gatewayWorld(t);
  const path = `/echo/v1/${w.projectId}/things`;
  const body = '{"thing": {"name": "a"}}';
  const capital = await withExpectContinue(w.port, { method: 'POST', path, headers: { 'x-auth-token': w.member }, body, expect: '100-Continue' });
  t.same({ continued: capital.continued, status: capital.status }, { continued: true, status: 201 }, '100-Continue is 100-continue');
  t.equal(w.upstream.received.length, 1);

  for (const target of [path, '/v3/projects']) {
    for (const expect of ['100-continue, foo', 'foo, 100-continue', '100-continue;x=1']) {
      const refused = await withExpectContinue(w.port, { method: 'POST', path: target, headers: { 'x-auth-token': w.member }, body, expect });
      t.same({ continued: refused.continued, status: refused.status }, { continued: false, status: 417 }, `${target}: Expect: ${expect}`);
      t.equal(JSON.parse(refused.body).error.code, 417);
      t.equal(refused.connection, 'close', 'the connection closes after the 417');
    }
  }
  t.equal(w.upstream.received.length, 1, 'nothing more reached the service');
});

t.test('Expect in an HTTP/1.0 request is ignored (RFC 9110 §10.1.1): no 100, the body is read, Expect not forwarded', async (t) => {
  const w = await gatewayWorld(t);
  const body = '{"thing": {"name": "one-oh"}}';
  const answer = await exchange(
    w.port,
    `POST /echo/v1/${w.projectId}/things HTTP/1.0\r\nHost: x\r\nX-Auth-Token: ${w.member}\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  t.same(statusLines(answer), ['HTTP/1.1 201 Created']);
  t.equal(w.upstream.received.length, 1);
  t.equal(w.upstream.received[0]!.body, body);
  t.equal(w.upstream.received[0]!.headers.expect, undefined);
});

t.test('identity API: no 100 Continue on routes that do not exist (404, 405)', async (t) => {
  const w = await gatewayWorld(t);
  const body = '{"thing": {}}';
  const notFound = await withExpectContinue(w.port, { method: 'POST', path: '/v3/no-such-thing', body });
  t.same({ continued: notFound.continued, status: notFound.status, connection: notFound.connection }, { continued: false, status: 404, connection: 'close' });
  t.equal(JSON.parse(notFound.body).error.code, 404);
  const notAllowed = await withExpectContinue(w.port, { method: 'PUT', path: '/v3/projects', headers: { 'x-auth-token': w.admin }, body });
  t.same({ continued: notAllowed.continued, status: notAllowed.status, connection: notAllowed.connection }, { continued: false, status: 405, connection: 'close' });
  t.equal(JSON.parse(notAllowed.body).error.code, 405);
});
