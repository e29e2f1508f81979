import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import t from 'tap';
import { buildApplication, type Application } from '../../src/app.ts';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { loadConfig } from '../../src/config.ts';
import type { ClusterMessage, EventBus } from '../../src/events/event-bus.ts';
import { Store } from '../../src/store/database.ts';
import { DatabaseFernetKeys, DatabaseJwsKeys, DatabaseKeyStore, KeyEncryptionKeyError } from '../../src/token/database-key-store.ts';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import type { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import type { JwsTokenProvider } from '../../src/token/jws-provider.ts';
import { JwsKeyRepository } from '../../src/token/jws-key-repository.ts';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { createTestDatabase, LOCAL_POSTGRES, type TestDatabase } from '../helpers/database.ts';
import { waitFor } from '../helpers/processes.ts';

const KEK = randomBytes(32);
const PEPPER = randomBytes(48).toString('base64');
const NO_RELOAD = '3600000';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A reload that should come (bus or polling) must come within this long. */
async function within<T>(promise: Promise<T>, what: string, timeoutMs = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Buses of nodes in this process: what one publishes, the others hear (as over Redis). */
class InProcessHub {
  private readonly buses = new Set<{ message(message: ClusterMessage): void }>();
  bus(): EventBus {
    const hub = this;
    let self: { message(message: ClusterMessage): void } | undefined;
    return {
      connected: true,
      publish(message) {
        for (const other of hub.buses) if (other !== self) queueMicrotask(() => other.message(message));
      },
      subscribe(handlers) {
        self = { message: (message) => handlers.message(message) };
        hub.buses.add(self);
      },
      async close() {
        if (self) hub.buses.delete(self);
      },
    };
  }
}

interface Node {
  app: Application;
  directory: string;
  /** Resolves at this node's next key reload. */
  nextReload(): Promise<void>;
  reloads: number;
  login(): Promise<string>;
  validate(token: string, caller: string): Promise<number>;
}

/** A database shared by every node of one test, and a way to start nodes on it (each with its own DATA_DIR). */
async function cluster(t: Teardown) {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const nodes: Node[] = [];
  const directories: string[] = [];
  let bootstrapped = false;
  t.teardown(async () => {
    for (const node of nodes) await node.app.close();
    await database.drop();
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });
  const environment = (directory: string, overrides: Record<string, string>) => ({
    DATABASE_URL: database.url!,
    DATA_DIR: directory,
    LOG_LEVEL: 'silent',
    PASSWORD_HASH_ROUNDS: '4',
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
    AUTH_RATE_LIMIT_PER_USER: '0',
    KEY_ENCRYPTION_KEY: KEK.toString('base64'),
    // Nodes of one deployment share the pepper as they share the keys (else the second refuses to start).
    SECRET_PEPPER: PEPPER,
    ...overrides,
  });
  const start = async (overrides: Record<string, string> = {}, eventBus?: EventBus, logger?: pino.Logger): Promise<Node> => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-db-keys-'));
    directories.push(directory);
    const config = loadConfig(environment(directory, overrides));
    const app = await buildApplication(config, { logger: logger ?? false, ...(eventBus ? { eventBus } : {}) });
    if (!bootstrapped) {
      await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: config.publicUrl });
      bootstrapped = true;
    }
    let waiting: (() => void)[] = [];
    const node: Node = {
      app,
      directory,
      reloads: 0,
      nextReload: () => new Promise<void>((resolve) => waiting.push(resolve)),
      async login() {
        const response = await app.server.inject({
          method: 'POST',
          url: '/v3/auth/tokens',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: ADMIN_PASSWORD } } } } }),
        });
        if (response.statusCode !== 201) throw new Error(`login: ${response.statusCode} ${response.body}`);
        return String(response.headers['x-subject-token']);
      },
      async validate(token, caller) {
        const response = await app.server.inject({ method: 'GET', url: '/v3/auth/tokens', headers: { 'x-auth-token': caller, 'x-subject-token': token } });
        return response.statusCode;
      },
    };
    app.tokenProvider.onReload(() => {
      node.reloads++;
      const resolved = waiting;
      waiting = [];
      for (const resolve of resolved) resolve();
    });
    nodes.push(node);
    return node;
  };
  return { database, start, environment };
}

/** A rotator outside any node (as the manage CLI is): its own connection pool, no bus. */
async function externalKeys(t: Teardown, database: TestDatabase, kek = KEK, previous: Buffer[] = []): Promise<DatabaseKeyStore> {
  const store = await Store.open({ databaseUrl: database.url, poolSize: 2 });
  t.teardown(() => store.close());
  return new DatabaseKeyStore(store, kek, previous);
}

/** The token keys' rows (the credential keys, which the same table holds, are test/credential's). */
async function rows(database: TestDatabase): Promise<{ provider: string; number: number; nonce: Buffer; ciphertext: Buffer }[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query("select provider, number, nonce, ciphertext from token_key where provider <> 'credential' order by provider, number")).rows;
  } finally {
    await client.end();
  }
}

t.test('two nodes share the database keys; a token of the new primary validates on a node that has not reloaded', async (t) => {
  const { database, start } = await cluster(t);
  const a = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  const b = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  t.notOk(fs.existsSync(path.join(a.directory, 'fernet-keys')), 'no key files written');
  t.same(
    (await rows(database)).map((row) => [row.provider, row.number]),
    [
      ['fernet', 0],
      ['fernet', 1],
    ],
    'fernet_setup in the database: staged 0 and primary 1',
  );
  const before = await a.login();
  t.equal(await b.validate(before, await b.login()), 200, "A's token validates on B: same keys");

  const reloaded = a.nextReload();
  await (a.app.tokenProvider as FernetTokenProvider).repository.rotate();
  await reloaded;
  t.equal(b.reloads, 0, 'B has not reloaded (no bus, no polling within the test)');
  const after = await a.login();
  t.equal(await b.validate(after, before), 200, "A's token from the promoted staged key validates on B before B reloads");
  t.equal(await a.validate(before, after), 200, 'the previous primary still validates on A');
});

t.test('without a bus, nodes converge by polling the key generation', async (t) => {
  const { database, start } = await cluster(t);
  const a = await start({ KEY_RELOAD_INTERVAL_MS: '50' });
  const b = await start({ KEY_RELOAD_INTERVAL_MS: '50' });
  const keys = await externalKeys(t, database);
  const rotator = new DatabaseFernetKeys(keys, 3, { reloadIntervalMs: 50 });
  const token = await a.login();

  // Two rotations behind, B could not read A's new tokens: it must have reloaded.
  for (let rotation = 1; rotation <= 2; rotation++) {
    const bothReloaded = Promise.all([a.nextReload(), b.nextReload()]);
    await rotator.rotate();
    await within(bothReloaded, `both nodes to reload after rotation ${rotation}`);
  }
  const fresh = await a.login();
  t.equal(await b.validate(fresh, fresh), 200, "B validates A's token of the primary two rotations later");
  // Keys 3, 2 and staged 0 remain (FERNET_MAX_ACTIVE_KEYS = 3): B has dropped the first primary too.
  t.equal(await b.validate(token, fresh), 404, 'the token of the first primary, rotated out on B as well');
  t.ok(a.reloads >= 2 && b.reloads >= 2);
});

t.test('over the event bus a rotation reaches the other node at once', async (t) => {
  const { start } = await cluster(t);
  const hub = new InProcessHub();
  const a = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD }, hub.bus());
  const b = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD }, hub.bus());
  const provider = a.app.tokenProvider as FernetTokenProvider;
  for (let rotation = 1; rotation <= 3; rotation++) {
    const heard = b.nextReload();
    await provider.repository.rotate();
    await within(heard, `B to hear rotation ${rotation}`);
    t.equal(b.reloads, rotation, `B reloaded after rotation ${rotation} (polling is off)`);
  }
  const fresh = await a.login();
  t.equal(await b.validate(fresh, fresh), 200, "three rotations later B validates A's new tokens");
  const readiness = await b.app.server.inject({ method: 'GET', url: '/readyz' });
  t.equal(readiness.json().checks.token_keys, 'ok');
});

t.test('the rows hold no plaintext key bytes; a wrong KEY_ENCRYPTION_KEY is refused at start', async (t) => {
  const { database, start, environment } = await cluster(t);
  const a = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  const jws = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, TOKEN_PROVIDER: 'jws' });
  t.equal(jws.app.tokenProvider.name, 'jws');
  await (a.app.tokenProvider as FernetTokenProvider).repository.rotate();
  const plaintext = await (await externalKeys(t, database)).read('fernet');
  t.equal(plaintext.keys.length, 3);
  const jwsKeys = await (jws.app.tokenProvider as JwsTokenProvider).repository.load();
  const stored = await rows(database);
  t.equal(stored.length, 5, 'three fernet and two jws rows');
  const bytes = Buffer.concat(stored.flatMap((row) => [row.nonce, row.ciphertext]));
  for (const key of plaintext.keys) {
    t.equal(bytes.indexOf(key.material), -1, `fernet key ${key.number} is not stored in clear`);
    t.equal(bytes.indexOf(Buffer.from(key.material.toString('base64url'))), -1);
    t.equal(bytes.indexOf(key.material.subarray(0, 8)), -1, 'not even a part of it');
  }
  t.equal(bytes.indexOf(Buffer.from('PRIVATE KEY')), -1, 'no PEM in clear');
  t.equal(bytes.indexOf(Buffer.from(jwsKeys.privateKey.split('\n')[1]!)), -1);

  // A third node with another KEY_ENCRYPTION_KEY refuses to start and says why, without key bytes.
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-db-keys-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  const other = randomBytes(32).toString('base64url');
  const error = (await buildApplication(loadConfig({ ...environment(directory, {}), KEY_ENCRYPTION_KEY: other }), { logger: false }).then(
    () => undefined,
    (failure: unknown) => failure,
  )) as Error | undefined;
  t.ok(error instanceof KeyEncryptionKeyError, 'start refused');
  t.match(error?.message, /KEY_ENCRYPTION_KEY/);
  t.notMatch(error?.message, other);
  for (const key of plaintext.keys) t.notMatch(error?.message, key.material.toString('base64url'));

  // A row moved to another number (or provider) does not decrypt: the number is bound in.
  const keys = await externalKeys(t, database);
  await keys.store.reader().execute("update token_key set number = 7 where provider = 'fernet' and number = 2");
  await t.rejects(keys.read('fernet'), KeyEncryptionKeyError);
});

t.test('changing KEY_ENCRYPTION_KEY: the old key stays readable as KEY_ENCRYPTION_KEY_PREVIOUS until reencrypt moves every row', async (t) => {
  const { database, start } = await cluster(t);
  const first = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, TOKEN_PROVIDER: 'jws' });
  const token = await first.login();
  const before = await rows(database);
  const plaintext = await (await externalKeys(t, database)).read('fernet');

  const newKek = randomBytes(32);
  // Step 1: every node gets the new key, the old one as previous: they still read the keys.
  const migrating = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, KEY_ENCRYPTION_KEY: newKek.toString('base64'), KEY_ENCRYPTION_KEY_PREVIOUS: KEK.toString('base64') });
  t.equal(await migrating.validate(token, token), 200, 'a node with the new key and the old one as previous validates existing tokens');

  // Step 2: reencrypt_keys.
  const reencrypting = await externalKeys(t, database, newKek, [KEK]);
  t.equal(await reencrypting.reencrypt('fernet'), plaintext.keys.length, 'every fernet key');
  t.equal(await reencrypting.reencrypt('jws'), before.filter((row) => row.provider === 'jws').length, 'every jws key pair');
  t.equal(await reencrypting.reencrypt('credential'), 2, 'and the credential keys (manage reencrypt_keys does all three)');
  const after = await rows(database);
  t.same(
    after.map((row) => [row.provider, row.number]),
    before.map((row) => [row.provider, row.number]),
    'the same keys, by provider and number',
  );
  for (const [index, row] of after.entries()) t.not(row.ciphertext.toString('hex'), before[index]!.ciphertext.toString('hex'), `${row.provider} ${row.number} was encrypted again`);

  // Step 3: the new key alone reads the same material; the old key alone no longer reads anything.
  t.same(await (await externalKeys(t, database, newKek)).read('fernet'), plaintext, 'the key material and generation are unchanged');
  await t.rejects((await externalKeys(t, database, KEK)).read('fernet'), KeyEncryptionKeyError, 'the old key alone is refused');
  await t.rejects((await externalKeys(t, database, KEK)).read('jws'), KeyEncryptionKeyError);
  const afterwards = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, KEY_ENCRYPTION_KEY: newKek.toString('base64') });
  t.equal(await afterwards.validate(token, token), 200, 'a node with only the new key validates the same tokens');
});

t.test('concurrent rotations from two callers leave a consistent key set', async (t) => {
  const { database, start } = await cluster(t);
  await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  const first = new DatabaseFernetKeys(await externalKeys(t, database), 3, { reloadIntervalMs: 1000 });
  const second = new DatabaseFernetKeys(await externalKeys(t, database), 3, { reloadIntervalMs: 1000 });
  const rotations = 6;
  await Promise.all([first, second].map(async (rotator) => {
    for (let index = 0; index < rotations; index++) await rotator.rotate();
  }));
  const keys = await externalKeys(t, database);
  const { generation, keys: stored } = await keys.read('fernet');
  t.equal(generation, String(1 + 2 * rotations), 'setup and every rotation counted once');
  t.same(
    stored.map((key) => key.number),
    [1 + 2 * rotations, 2 * rotations, 0],
    'staged 0 and the two newest primaries: each rotation numbered after the previous one',
  );
  t.equal(new Set(stored.map((key) => key.material.toString('hex'))).size, 3, 'three different keys');
  // The node's keys load fine (every ciphertext bound to its row).
  t.equal((await first.load()).length, 3);
});

t.test('readyz reports token_keys unready while the last reload failed, and ready again after', async (t) => {
  const { database, start } = await cluster(t);
  const a = await start({ KEY_RELOAD_INTERVAL_MS: '50' });
  const ready = async () => (await a.app.server.inject({ method: 'GET', url: '/readyz' })).statusCode;
  t.equal(await ready(), 200);
  const keys = await externalKeys(t, database);
  // A damaged row and a new generation: the node tries to reload, fails, keeps its keys.
  await keys.store.reader().execute("update token_key set ciphertext = '\\x00'::bytea where provider = 'fernet' and number = 1");
  await keys.store.reader().execute("update token_key_generation set generation = generation + 1 where provider = 'fernet'");
  await waitFor(async () => (await ready()) === 503, 'readyz to report the failed reload', 10_000);
  const body = (await a.app.server.inject({ method: 'GET', url: '/readyz' })).json();
  t.match(body.error.message, /token_keys/);
  const token = await a.login();
  t.equal(await a.validate(token, token), 200, 'the keys loaded before stay in use');

  await keys.store.reader().execute("delete from token_key where provider = 'fernet' and number = 1");
  await keys.store.reader().execute("update token_key_generation set generation = generation + 1 where provider = 'fernet'");
  await waitFor(async () => (await ready()) === 200, 'readyz to recover', 10_000);
  t.pass('ready again once the keys load');
});

t.test('an empty database imports the keys of FERNET_KEY_REPOSITORY once', async (t) => {
  const { database, start } = await cluster(t);
  const files = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-db-keys-files-'));
  t.teardown(() => fs.rmSync(files, { recursive: true, force: true }));
  const repository = new FernetKeyRepository(files, 3);
  repository.setup();
  repository.rotate();
  const fileKeys = repository.numberedKeys();
  await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, FERNET_KEY_REPOSITORY: files });
  const stored = await (await externalKeys(t, database)).read('fernet');
  t.same(
    stored.keys.map((key) => [key.number, key.material.toString('hex')]),
    fileKeys.map((key) => [key.number, key.key.toString('hex')]),
    'same numbers, same keys',
  );
  // Once: later changes to the files do not reach the database.
  repository.rotate();
  await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, FERNET_KEY_REPOSITORY: files });
  t.equal((await (await externalKeys(t, database)).read('fernet')).generation, stored.generation);
});

t.test('JWS keys in the database: staged pair published, rotation seen by a node that has not reloaded', async (t) => {
  const { database, start } = await cluster(t);
  const a = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, TOKEN_PROVIDER: 'jws' });
  const b = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, TOKEN_PROVIDER: 'jws' });
  const jwks = async (node: Node) => (await node.app.server.inject({ method: 'GET', url: '/v3/auth/jwks' })).json().keys as { kid: string }[];
  t.equal((await jwks(a)).length, 2, 'signing and staged public keys');
  const before = await a.login();
  const reloaded = a.nextReload();
  await (a.app.tokenProvider as JwsTokenProvider).repository.rotate();
  await reloaded;
  const after = await a.login();
  t.equal(b.reloads, 0);
  t.equal(await b.validate(after, before), 200, 'the promoted staged key verifies on B');
  t.equal((await jwks(a)).length, 3, 'JWS_MAX_ACTIVE_KEYS (3) counts the staged key');
  const rotator = new DatabaseJwsKeys(await externalKeys(t, database), 1, { reloadIntervalMs: 1000 });
  await rotator.rotate();
  t.equal((await rotator.load()).publicKeys.length, 2, 'with a maximum of 1, the signing and the staged key stay');
});

t.test('an empty database imports the JWS keys of JWS_KEY_REPOSITORY once, adding a staged pair', async (t) => {
  const { start } = await cluster(t);
  const files = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-db-keys-jws-'));
  t.teardown(() => fs.rmSync(files, { recursive: true, force: true }));
  const repository = new JwsKeyRepository(files, 3);
  await repository.setup();
  await repository.rotate();
  const fileKeys = repository.load();
  t.equal(fileKeys.publicKeys.length, 2);
  const node = await start({ KEY_RELOAD_INTERVAL_MS: NO_RELOAD, TOKEN_PROVIDER: 'jws', JWS_KEY_REPOSITORY: files });
  const loaded = await (node.app.tokenProvider as JwsTokenProvider).repository.load();
  t.equal(loaded.privateKey.trim(), fileKeys.privateKey.trim(), 'the signing key of the files still signs');
  t.equal(loaded.publicKeys.length, 3, 'both public keys and a new staged one');
  t.same(
    loaded.publicKeys.slice(0, 2).map((key) => key.pem.trim()),
    fileKeys.publicKeys.map((key) => key.pem.trim()),
    'newest first, as in the files',
  );
  t.equal(loaded.publicKeys[2]!.name, '0', 'staged last');
  t.equal((await node.app.server.inject({ method: 'GET', url: '/v3/auth/jwks' })).json().keys.length, 3);
  await node.login();
});

t.test('no log line holds key material or KEY_ENCRYPTION_KEY', async (t) => {
  const { database, start } = await cluster(t);
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) });
  const hub = new InProcessHub();
  const a = await start({ KEY_RELOAD_INTERVAL_MS: '50', LOG_LEVEL: 'trace' }, hub.bus(), logger);
  const b = await start({ KEY_RELOAD_INTERVAL_MS: '50', LOG_LEVEL: 'trace' }, hub.bus(), logger);
  for (let rotation = 0; rotation < 2; rotation++) {
    const heard = b.nextReload();
    await (a.app.tokenProvider as FernetTokenProvider).repository.rotate();
    await within(heard, 'B to reload');
  }
  const keys = await externalKeys(t, database);
  const { keys: stored } = await keys.read('fernet');
  t.equal(stored.length, 3);
  // A failed reload is logged too: with its cause, without the keys. The key is broken before the
  // generation moves: the other way round, a reload (every 50 ms) between the two statements read
  // the intact keys of the new generation, and nothing ever reloaded the broken one.
  await keys.store.reader().execute("update token_key set ciphertext = '\\x00'::bytea where provider = 'fernet' and number = 0");
  await keys.store.reader().execute("update token_key_generation set generation = generation + 1 where provider = 'fernet'");
  await waitFor(async () => lines.some((line) => line.includes('Fernet key reload failed')), 'the failed reload to be logged', 10_000);
  t.ok(lines.some((line) => line.includes('reloaded Fernet keys')), 'reloads are logged');
  const secrets = [KEK.toString('base64'), KEK.toString('base64url'), KEK.toString('hex')];
  const log = lines.join('\n');
  for (const secret of secrets) t.notOk(log.includes(secret), 'no KEY_ENCRYPTION_KEY');
  for (const key of stored) t.notOk(log.includes(key.material.toString('base64url')) || log.includes(key.material.toString('hex')), 'no key');
});

t.test('the database key store works on the embedded database (PGlite)', async (t) => {
  const testApp = await startTestApp(t, { KEY_ENCRYPTION_KEY: KEK.toString('base64'), KEY_RELOAD_INTERVAL_MS: NO_RELOAD });
  const provider = testApp.app.tokenProvider as FernetTokenProvider;
  t.equal(provider.repository.description, 'the database (KEY_ENCRYPTION_KEY)');
  t.notOk(fs.existsSync(testApp.config.fernetKeyRepository), 'no key files');
  const before = testApp.adminToken;
  await provider.repository.rotate();
  await provider.repository.rotate();
  await provider.reload();
  const after = (await testApp.login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD)).token;
  t.equal((await testApp.call('GET', '/v3/auth/tokens', undefined, after, { 'x-subject-token': after })).statusCode, 200);
  t.equal((await testApp.call('GET', '/v3/auth/tokens', undefined, after, { 'x-subject-token': before })).statusCode, 404, 'rotated out after two rotations');
});
