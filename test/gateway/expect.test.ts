import http from 'node:http';
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
function withExpectContinue(port: number, options: { method: string; path: string; headers?: Record<string, string>; body: string }): Promise<ExpectAnswer> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const request = http.request({
      host: '127.0.0.1',
      port,
      method: options.method,
      path: options.path,
      headers: { ...options.headers, expect: '100-continue', 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body) },
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

t.test('any other expectation: 417 with a Keystone error body', async (t) => {
  const w = await gatewayWorld(t);
  for (const path of [`/echo/v1/${w.projectId}/things`, '/v3/projects']) {
    const response = await rawRequest(w.port, { method: 'POST', path, headers: { 'x-auth-token': w.member, expect: 'something-else', 'content-type': 'application/json' }, body: '{}' });
    t.equal(response.status, 417, path);
    t.equal(response.headers['content-type'], 'application/json');
    t.same(JSON.parse(response.body), {
      error: { code: 417, title: 'Expectation Failed', message: 'The expectation in the Expect header cannot be met: only 100-continue is supported.' },
    });
  }
  t.equal(w.upstream.received.length, 0);
});
