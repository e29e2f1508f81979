import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { eventually } from '../helpers/keystone-client.ts';
import { buildApplication } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { waitFor } from '../helpers/processes.ts';

t.test('healthz and readyz answer without a token', async (t) => {
  const { request } = await startTestApp(t);

  const health = await request({ method: 'GET', url: '/healthz' });
  t.equal(health.statusCode, 200);
  t.same(health.json(), { status: 'ok' });
  const ready = await request({ method: 'GET', url: '/readyz' });
  t.equal(ready.statusCode, 200);
  t.same(ready.json(), { status: 'ok', checks: { database: 'ok', token_keys: 'ok', key_agreement: 'ok', gateway_policy: 'ok', identity_policy: 'ok' } });
  t.equal((await request({ method: 'HEAD', url: '/readyz' })).statusCode, 200);
  t.equal((await request({ method: 'POST', url: '/healthz' })).statusCode, 405);
});

t.test('readyz is 503 naming the database once the database is gone; healthz stays 200', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-health-'));
  const config = loadConfig({ DATABASE_URL: database.url!, DATA_DIR: directory, LOG_LEVEL: 'silent', PASSWORD_HASH_ROUNDS: '4' });
  const app = await buildApplication(config, { logger: false });
  t.teardown(async () => {
    await app.close();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });

  t.equal((await app.server.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  await database.drop(); // terminates the pool's connections; reconnecting finds no database

  // Readiness follows the health probe (every second): not ready within two probe intervals.
  let ready = await app.server.inject({ method: 'GET', url: '/readyz' });
  t.ok(await eventually(async () => (ready = await app.server.inject({ method: 'GET', url: '/readyz' })).statusCode === 503, 3000, 20), 'not ready');
  t.same(ready.json(), { error: { code: 503, title: 'Service Unavailable', message: 'The service is not ready: database.' } });
  t.notMatch(ready.body, database.url!.split('/').pop()!, 'the cause (naming the database) stays in the log');
  t.equal((await app.server.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'alive all the same');
});

/** Sends `head` on a new connection now; `finish` later completes the request and reads the answer. */
async function partialRequest(port: number, head: string): Promise<{ finish(rest: string): Promise<string> }> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(head);
  return {
    async finish(rest) {
      socket.write(rest);
      await ended;
      return received;
    },
  };
}

t.test('on shutdown, requests already under way finish, and readyz answers 503 meanwhile', async (t) => {
  const testApp = await startTestApp(t);
  const { app } = testApp;
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.server.address() as net.AddressInfo;
  // Identity segments, never a service's: also under the /identity mount, on the real server.
  for (const url of ['/healthz', '/readyz', '/identity/healthz', '/identity/readyz']) {
    t.equal((await fetch(`http://127.0.0.1:${port}${url}`)).status, 200, url);
  }

  const accepted: net.Socket[] = [];
  app.server.server.on('connection', (socket: net.Socket) => accepted.push(socket));
  const body = JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } } } });
  const loginHead = `POST /v3/auth/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`;
  const probeHead = 'GET /readyz HTTP/1.1\r\nHost: x\r\n';
  const login = await partialRequest(port, loginHead);
  const probe = await partialRequest(port, probeHead);
  // Both requests have begun on the server: it has read (and so parsed) every byte sent on both
  // connections. A connection whose first bytes are still unread counts as idle and would be closed.
  const sent = Buffer.byteLength(loginHead) + Buffer.byteLength(probeHead);
  await waitFor(async () => accepted.length === 2 && accepted[0]!.bytesRead + accepted[1]!.bytesRead === sent, 'the server to read both partial requests', 5_000);

  const closed = testApp.close();
  await waitFor(async () => !app.server.server.listening, 'the server to stop listening', 5_000);
  const refused = await new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => resolve(false)).once('error', () => resolve(true));
  });
  t.ok(refused, 'no new connections once shutdown begins');

  const readiness = await probe.finish('\r\n');
  t.match(readiness, /^HTTP\/1\.1 503 /);
  t.match(readiness, /connection: close/i);
  t.match(readiness, /"message":"The service is not ready: shutting down\."/);

  const finishedAt = Date.now();
  const issued = await login.finish(body.slice(10));
  t.match(issued, /^HTTP\/1\.1 201 /, 'the in-flight login completes');
  t.match(issued, /x-subject-token: gAAAA/i);
  await closed;
  t.ok(Date.now() - finishedAt < 5000, 'its connection is closed once answered, not kept for the keep-alive timeout');
});
