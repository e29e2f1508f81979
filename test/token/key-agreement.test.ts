import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { buildApplication, type Application } from '../../src/app.ts';
import { bootstrap } from '../../src/cli/bootstrap.ts';
import { loadConfig } from '../../src/config.ts';
import { Store } from '../../src/store/database.ts';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import { KeyDisagreementError } from '../../src/token/key-agreement.ts';
import { ADMIN_PASSWORD } from '../helpers/app.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { manage } from '../helpers/manage.ts';
import { waitFor } from '../helpers/processes.ts';

// Nodes on one PostgreSQL database must use the same token keys and secret pepper. Without
// KEY_ENCRYPTION_KEY and SECRET_PEPPER, each DATA_DIR makes its own: a node's tokens would be 401s
// on the other and application credentials would fail the same way, with nothing in any log.

interface Teardown {
  teardown(fn: () => unknown): void;
}

interface Node {
  app: Application;
  directory: string;
  login(): Promise<string>;
  validate(token: string): Promise<number>;
  ready(): Promise<{ status: number; body: any }>;
}

/** A database for one test, and nodes on it: each its own DATA_DIR unless given one. */
async function deployment(t: Teardown) {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const nodes: Application[] = [];
  const directories: string[] = [];
  let bootstrapped = false;
  t.teardown(async () => {
    for (const app of nodes) await app.close();
    await database.drop();
    for (const directory of directories) fs.rmSync(directory, { recursive: true, force: true });
  });
  const newDirectory = () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-agree-'));
    directories.push(directory);
    return directory;
  };
  const environment = (directory: string, overrides: Record<string, string> = {}) => ({
    DATABASE_URL: database.url!,
    DATA_DIR: directory,
    LOG_LEVEL: 'silent',
    PASSWORD_HASH_ROUNDS: '4',
    AUTH_RATE_LIMIT_PER_ADDRESS: '0',
    AUTH_RATE_LIMIT_PER_USER: '0',
    KEY_RELOAD_INTERVAL_MS: '100',
    ...overrides,
  });
  const start = async (overrides: Record<string, string> = {}, directory = newDirectory()): Promise<Node> => {
    const config = loadConfig(environment(directory, overrides));
    const app = await buildApplication(config, { logger: false });
    nodes.push(app);
    if (!bootstrapped) {
      await bootstrap(app, { adminPassword: ADMIN_PASSWORD, publicUrl: config.publicUrl });
      bootstrapped = true;
    }
    return {
      app,
      directory,
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
      async validate(token) {
        return (await app.server.inject({ method: 'GET', url: '/v3/auth/tokens', headers: { 'x-auth-token': token, 'x-subject-token': token } })).statusCode;
      },
      async ready() {
        const response = await app.server.inject({ method: 'GET', url: '/readyz' });
        return { status: response.statusCode, body: response.json() };
      },
    };
  };
  /** What starting a node does: undefined when it started, else the error. */
  const refusal = async (overrides: Record<string, string> = {}, directory = newDirectory()): Promise<Error | undefined> =>
    start(overrides, directory).then(
      () => undefined,
      (error: Error) => error,
    );
  const rows = async (): Promise<Array<{ name: string; primary_fingerprint: string; staged_fingerprint: string | null; fingerprints: string }>> => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      return (await client.query('select name, primary_fingerprint, staged_fingerprint, fingerprints from key_fingerprint order by name')).rows;
    } finally {
      await client.end();
    }
  };
  return { database, start, refusal, rows, newDirectory, environment };
}

function copyDirectory(from: string, to: string): void {
  fs.rmSync(to, { recursive: true, force: true });
  fs.cpSync(from, to, { recursive: true });
}

t.test('a node with its own keys and pepper refuses to start, naming KEY_ENCRYPTION_KEY and SECRET_PEPPER', async (t) => {
  const { start, refusal, rows } = await deployment(t);
  const first = await start();
  const recorded = await rows();
  t.same(
    recorded.map((row) => row.name),
    ['fernet', 'secret_pepper'],
    'the first node recorded its key set and pepper',
  );
  // Fingerprints, never the material: neither a key nor the pepper appears in the table.
  const keys = new FernetKeyRepository(path.join(first.directory, 'fernet-keys'), 3).load();
  const pepper = fs.readFileSync(path.join(first.directory, 'secret-pepper'), 'utf8').trim();
  const stored = JSON.stringify(recorded);
  for (const key of keys) {
    t.notOk(stored.includes(key.toString('base64url')), 'no key in the table');
    t.notOk(stored.includes(key.toString('hex')), 'no key in the table (hex)');
  }
  t.notOk(stored.includes(pepper), 'no pepper in the table');
  t.equal(recorded[0]!.fingerprints.split(' ').length, keys.length, 'one fingerprint per key');

  const error = await refusal();
  t.type(error, KeyDisagreementError, 'the second node does not start');
  t.match(error?.message, /^the other nodes sharing DATABASE_URL use different fernet token keys than this node's/);
  t.match(error?.message, /SECRET_PEPPER \(application credentials/);
  t.match(error?.message, /KEY_ENCRYPTION_KEY/);
  t.same(await rows(), recorded, 'a refused node changes no record');
  t.equal(await first.validate(await first.login()), 200, 'the first node serves on');
  t.same((await first.ready()).body.checks.key_agreement, 'ok');
});

t.test('the same keys with another pepper, another keys with the same pepper: refused, naming which', async (t) => {
  const { start, refusal, newDirectory, rows } = await deployment(t);
  const pepper = randomBytes(48).toString('base64');
  const first = await start({ SECRET_PEPPER: pepper });

  const sameKeys = newDirectory();
  copyDirectory(path.join(first.directory, 'fernet-keys'), path.join(sameKeys, 'fernet-keys'));
  // Its keys are a rotation ahead (they agree, and would move the record forward).
  new FernetKeyRepository(path.join(sameKeys, 'fernet-keys'), 3).rotate();
  const recorded = await rows();
  const pepperOnly = await refusal({ SECRET_PEPPER: randomBytes(48).toString('base64') }, sameKeys);
  t.same(await rows(), recorded, 'a node refused for its pepper records nothing, not even its keys');
  t.type(pepperOnly, KeyDisagreementError);
  t.match(pepperOnly?.message, /^the other nodes sharing DATABASE_URL use a different SECRET_PEPPER \(application credentials stored by one node would fail on the other\)\. /);
  t.notMatch(pepperOnly?.message, /token keys than/);
  t.match(pepperOnly?.message, /KEY_ENCRYPTION_KEY/);

  const keysOnly = await refusal({ SECRET_PEPPER: pepper });
  t.type(keysOnly, KeyDisagreementError);
  t.match(keysOnly?.message, /^the other nodes sharing DATABASE_URL use different fernet token keys than this node's, from \S+fernet-keys \(tokens issued by one node would be refused by the other\)\. /);
  t.notMatch(keysOnly?.message, /SECRET_PEPPER \(application/);
  t.match(keysOnly?.message, /SECRET_PEPPER/);

  // Both shared (the key repository copied, as with Keystone): the node starts, tokens cross over.
  const second = await start({ SECRET_PEPPER: pepper }, sameKeys);
  t.not((await rows())[0]!.primary_fingerprint, recorded[0]!.primary_fingerprint, 'its keys, a rotation ahead, are the record now');
  t.equal(await second.validate(await first.login()), 200);
  t.equal(await first.validate(await second.login()), 200);
});

t.test('two nodes starting at once on an empty record: one starts, the other is refused', async (t) => {
  const { refusal, database } = await deployment(t);
  // Migrated first: two processes migrating one database at once is another matter (the primary does it).
  const store = await Store.open({ databaseUrl: database.url, embeddedDirectory: 'memory' });
  await store.migrate();
  await store.close();
  const outcomes = await Promise.all([refusal({ SECRET_PEPPER: randomBytes(48).toString('base64') }), refusal({ SECRET_PEPPER: randomBytes(48).toString('base64') })]);
  t.equal(outcomes.filter((outcome) => outcome === undefined).length, 1, 'one started');
  t.equal(outcomes.filter((outcome) => outcome instanceof KeyDisagreementError).length, 1, `the other was refused: ${outcomes.map(String).join(' / ')}`);
});

t.test('rotations handed from node to node (Keystone style) are followed; a node left behind is not ready, then refused', async (t) => {
  const { start, refusal, rows, newDirectory } = await deployment(t);
  const pepper = randomBytes(48).toString('base64');
  const a = await start({ SECRET_PEPPER: pepper });
  const bDirectory = newDirectory();
  copyDirectory(path.join(a.directory, 'fernet-keys'), path.join(bDirectory, 'fernet-keys'));
  const b = await start({ SECRET_PEPPER: pepper }, bDirectory);
  const primaryBefore = (await rows())[0]!.primary_fingerprint;

  // fernet_rotate on A's repository: A reloads and records its set, a rotation ahead.
  new FernetKeyRepository(path.join(a.directory, 'fernet-keys'), 3).rotate();
  await waitFor(async () => (await rows())[0]!.primary_fingerprint !== primaryBefore, 'the record to follow the rotation', 10_000);
  t.equal((await b.ready()).status, 200, 'B, one rotation behind, is ready: its tokens validate on A and A on it');
  t.equal(await b.validate(await a.login()), 200);
  t.equal(await a.validate(await b.login()), 200);
  t.equal(await refusal({ SECRET_PEPPER: pepper }, (() => {
    const behind = newDirectory();
    copyDirectory(path.join(bDirectory, 'fernet-keys'), path.join(behind, 'fernet-keys'));
    return behind;
  })()), undefined, 'a node starting with the keys of before the rotation starts');

  // A second rotation B never receives: B's keys no longer agree.
  new FernetKeyRepository(path.join(a.directory, 'fernet-keys'), 3).rotate();
  await waitFor(async () => (await b.ready()).status === 503, 'B to be reported not ready', 10_000);
  const notReady = await b.ready();
  t.same(notReady.body, { error: { code: 503, title: 'Service Unavailable', message: 'The service is not ready: key_agreement.' } });
  t.equal((await a.ready()).status, 200, 'A is ready');
  const staleDirectory = newDirectory();
  copyDirectory(path.join(bDirectory, 'fernet-keys'), path.join(staleDirectory, 'fernet-keys'));
  t.type(await refusal({ SECRET_PEPPER: pepper }, staleDirectory), KeyDisagreementError, 'a node starting with those keys is refused');

  // The operator syncs A's repository to B: B reloads and is ready again.
  for (const name of fs.readdirSync(path.join(bDirectory, 'fernet-keys'))) fs.rmSync(path.join(bDirectory, 'fernet-keys', name));
  for (const name of fs.readdirSync(path.join(a.directory, 'fernet-keys'))) {
    fs.copyFileSync(path.join(a.directory, 'fernet-keys', name), path.join(bDirectory, 'fernet-keys', name));
  }
  await waitFor(async () => (await b.ready()).status === 200, 'B to be ready again', 10_000);
  t.equal(await b.validate(await a.login()), 200);

  // Keys of its own under B's repository (a botched copy): B reloads them, records nothing, is not ready.
  const recorded = await rows();
  const foreign = newDirectory();
  new FernetKeyRepository(path.join(foreign, 'fernet-keys'), 3).setup();
  const foreignNames = fs.readdirSync(path.join(foreign, 'fernet-keys'));
  for (const name of fs.readdirSync(path.join(bDirectory, 'fernet-keys'))) {
    if (!foreignNames.includes(name)) fs.rmSync(path.join(bDirectory, 'fernet-keys', name));
  }
  for (const name of foreignNames) fs.copyFileSync(path.join(foreign, 'fernet-keys', name), path.join(bDirectory, 'fernet-keys', name));
  await waitFor(
    async () => (await b.ready()).body.error?.message === 'The service is not ready: key_agreement.' && (await a.validate(await b.login())) === 401,
    'B to reload the foreign keys and be reported not ready',
    10_000,
  );
  t.pass("B's tokens are refused by A, and B's readyz says key_agreement");
  t.same(await rows(), recorded, 'the record is still the agreed one');
});

t.test('keys in the database: rotations record themselves; a node with key files of its own is refused', async (t) => {
  const { start, refusal, rows } = await deployment(t);
  const shared = { SECRET_PEPPER: randomBytes(48).toString('base64'), KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
  const a = await start(shared);
  const before = (await rows()).find((row) => row.name === 'fernet')!;
  // Three rotations before any node reloads: the record moves with the keys, in their transaction.
  for (let rotation = 0; rotation < 3; rotation++) {
    const rotated = await manage(['fernet_rotate'], { ...shared, DATABASE_URL: a.app.config.databaseUrl!, DATA_DIR: a.directory, KEY_RELOAD_INTERVAL_MS: '100' });
    t.equal(rotated.code, 0, rotated.stderr);
  }
  const after = (await rows()).find((row) => row.name === 'fernet')!;
  t.not(after.primary_fingerprint, before.primary_fingerprint);
  t.notOk(before.fingerprints.split(' ').includes(after.primary_fingerprint), 'three rotations on, nothing of the first primary is left');
  t.equal(await refusal(shared), undefined, 'a new node on the database keys starts');
  await waitFor(async () => (await a.ready()).status === 200 && (await a.validate(await a.login())) === 200, 'A to reload', 10_000);

  const ownFiles = await refusal({ SECRET_PEPPER: shared.SECRET_PEPPER });
  t.type(ownFiles, KeyDisagreementError, 'a node without KEY_ENCRYPTION_KEY (keys of its own) is refused');
  t.match(ownFiles?.message, /different fernet token keys than this node's, from \S+fernet-keys/);
});

t.test('JWS keys of their own are refused too', async (t) => {
  const { start, refusal } = await deployment(t);
  const pepper = randomBytes(48).toString('base64');
  await start({ SECRET_PEPPER: pepper, TOKEN_PROVIDER: 'jws' });
  const error = await refusal({ SECRET_PEPPER: pepper, TOKEN_PROVIDER: 'jws' });
  t.type(error, KeyDisagreementError);
  t.match(error?.message, /different jws token keys than this node's, from \S+jws-keys/);
});

t.test('forget_key_fingerprints: keys replaced on purpose are accepted once forgotten', async (t) => {
  const { start, refusal, rows, database } = await deployment(t);
  await start();
  t.type(await refusal(), KeyDisagreementError);
  const forgotten = await manage(['forget_key_fingerprints'], { DATABASE_URL: database.url! });
  t.equal(forgotten.code, 0, forgotten.stderr);
  t.match(forgotten.stdout, /forgot the fingerprints of 2 key sets/);
  t.same(await rows(), []);
  t.equal(await refusal(), undefined, 'a node with other keys and pepper starts and is recorded');
  t.equal((await rows()).length, 2);
});
