import fs from 'node:fs';
import path from 'node:path';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Logger } from 'pino';
import { buildApplication, type Application } from '../../src/app.ts';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { EmbeddedMemoryPool } from '../../src/store/embedded.ts';
import { SchemaCompilers } from '../../src/http/schema-compilers.ts';
import type { AssertionVerifier } from '../../src/federation/assertion.ts';
import type { DomainIdentityConfigSource } from '../../src/identity/domain-identity-config.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { ManualClock } from './clock.ts';
import { createTestDatabase } from './database.ts';
import { migratedEmbeddedDirectory, SCRATCH_DIRECTORY } from './embedded-template.ts';
import { PortTakenError, startOnFreePort } from './processes.ts';

// One pool per test process: each test app's embedded database runs in a memory an earlier, closed
// one ran in (src/store/embedded.ts says why that is most of a start). Likewise each route schema is
// compiled once per process, not once per test app (src/http/schema-compilers.ts).
const embeddedMemoryPool = new EmbeddedMemoryPool();
const schemaCompilers = new SchemaCompilers();

export const ADMIN_PASSWORD = 'admin-secret';
export const PUBLIC_URL = 'http://keystone.test:5000';

export interface TestApp {
  app: Application;
  clock: ManualClock;
  config: Config;
  /** A project-scoped admin token (admin project). */
  adminToken: string;
  request(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** JSON request with X-Auth-Token (the admin's unless `token` is given; null for none). */
  call(method: InjectOptions['method'], url: string, body?: unknown, token?: string | null, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** Password token for a user; returns the X-Subject-Token and the parsed body. */
  login(user: Record<string, unknown>, password: string, scope?: unknown): Promise<{ token: string; body: any; status: number }>;
  close(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * A bootstrapped service on a fresh database (embedded PGlite copied from a migrated template, or a PostgreSQL database copied from one
 * when TEST_DATABASE_URL/DATABASE_URL is set), a temporary key repository and a manual clock.
 */
export async function startTestApp(
  t: Teardown,
  overrides: Record<string, string> = {},
  options: {
    logger?: Logger;
    /** Forces PostgreSQL on this server (postgres://…), e.g. for tests that cut its connections. */
    databaseServer?: string;
    /** Turns the test database's URL into the one the service is given (e.g. through a TCP relay). */
    databaseUrl?: (url: string) => string;
    /** The domains with an identity back end of their own (test/helpers/domain-configs.ts). */
    domainIdentityConfigs?: DomainIdentityConfigSource;
    /** What verifies federated logins (test/helpers/federation.ts); none by default. */
    assertionVerifiers?: readonly AssertionVerifier[];
  } = {},
): Promise<TestApp> {
  const database = await createTestDatabase(options.databaseServer, { migrated: true });
  const directory = fs.mkdtempSync(path.join(SCRATCH_DIRECTORY, 'kg-test-'));
  const config = loadConfig({
    DATA_DIR: directory,
    PUBLIC_URL: PUBLIC_URL,
    PASSWORD_HASH_ROUNDS: '4',
    LOG_LEVEL: 'silent',
    // test/gateway/node-http-front*.test.ts run the gateway's suites again with node:http reading every request.
    ...(process.env.TEST_GATEWAY_REQUEST_FRONT ? { GATEWAY_REQUEST_FRONT: process.env.TEST_GATEWAY_REQUEST_FRONT } : {}),
    ...(database.url ? { DATABASE_URL: options.databaseUrl ? options.databaseUrl(database.url) : database.url } : {}),
    ...overrides,
  });
  const clock = new ManualClock(Date.now());
  let app: Application;
  try {
    app = await buildApplication(config, {
      clock,
      schemaCompilers,
      // Embedded: a copy of an already migrated database (test/helpers/embedded-template.ts).
      ...(database.url ? {} : { embeddedDirectory: await migratedEmbeddedDirectory(directory), embeddedMemoryPool }),
      logger: options.logger ?? false,
      ...(options.domainIdentityConfigs ? { domainIdentityConfigs: options.domainIdentityConfigs } : {}),
      ...(options.assertionVerifiers ? { assertionVerifiers: options.assertionVerifiers } : {}),
    });
  } catch (error) {
    await database.drop();
    throw error;
  }
  const request = (options: InjectOptions) => app.server.inject(options);
  const call: TestApp['call'] = (method, url, body, token, headers = {}) =>
    request({
      method,
      url,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token === null ? {} : { 'x-auth-token': token ?? testApp.adminToken }),
        ...headers,
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  const login: TestApp['login'] = async (user, password, scope) => {
    const auth: Record<string, unknown> = { identity: { methods: ['password'], password: { user: { ...user, password } } } };
    if (scope !== undefined) auth.scope = scope;
    const response = await request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ auth }),
    });
    return { token: String(response.headers['x-subject-token'] ?? ''), body: response.json(), status: response.statusCode };
  };

  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await app.close();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  };
  const testApp: TestApp = { app, clock, config, adminToken: '', request, call, login, close };
  t.teardown(close);
  await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: config.publicUrl });
  const admin = await login({ name: 'admin', domain: { name: 'Default' } }, ADMIN_PASSWORD, { project: { name: 'admin', domain: { name: 'Default' } } });
  if (admin.status !== 201) throw new Error(`admin login failed in test setup: ${admin.status} ${JSON.stringify(admin.body)}`);
  testApp.adminToken = admin.token;
  return testApp;
}

/**
 * startTestApp listening on 127.0.0.1 at the port its PUBLIC_URL names (`overrides` gets that URL),
 * for clients that sign or follow the service's own address. A port taken before the listen means
 * another port and a new app (startOnFreePort).
 */
export async function startListeningTestApp(
  t: Teardown,
  overrides: (base: string) => Record<string, string>,
  options: { /** Where ports come from (a test of the retry gives a taken one first). */ ports?: () => Promise<number> } = {},
): Promise<{ testApp: TestApp; base: string }> {
  return startOnFreePort(async (port) => {
    const base = `http://127.0.0.1:${port}`;
    const testApp = await startTestApp(t, overrides(base));
    try {
      await testApp.app.server.listen({ port, host: '127.0.0.1' });
      return { testApp, base };
    } catch (error) {
      await testApp.close();
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new PortTakenError(`port ${port} was taken`);
      throw error;
    }
  }, options.ports);
}

/**
 * Another node of `first`'s deployment: the same database and data directory (keys, pepper), its own
 * process state; `overrides` add settings (REDIS_URL, …). Closed at teardown.
 */
export async function startOtherNode(t: Teardown, first: TestApp, overrides: Record<string, string> = {}): Promise<Application> {
  const config = loadConfig({
    DATA_DIR: first.config.dataDir,
    ...(first.config.databaseUrl ? { DATABASE_URL: first.config.databaseUrl } : {}),
    PUBLIC_URL,
    PASSWORD_HASH_ROUNDS: '4',
    LOG_LEVEL: 'silent',
    ...overrides,
  });
  const node = await buildApplication(config, { clock: first.clock, schemaCompilers, logger: false });
  t.teardown(() => node.close());
  return node;
}
