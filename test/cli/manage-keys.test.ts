import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import t from 'tap';
import { buildApplication, type Application } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { Store } from '../../src/store/database.ts';
import { DatabaseKeyStore } from '../../src/token/database-key-store.ts';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { startRedis, waitFor } from '../helpers/processes.ts';
import { manage } from '../helpers/manage.ts';

/** Resolves at the node's next key reload, or fails after timeoutMs. */
function nextReload(app: Application, timeoutMs = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no key reload')), timeoutMs);
    app.tokenProvider.onReload(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

t.test('fernet and jws commands on the database key store (KEY_ENCRYPTION_KEY)', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const redis = await startRedis();
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-keys-'));
  const nodes: Application[] = [];
  let store: Store | undefined;
  t.teardown(async () => {
    for (const node of nodes) await node.close();
    await store?.close();
    await redis.stop();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  const kek = randomBytes(32).toString('base64url');
  const environment = {
    DATABASE_URL: database.url!,
    DATA_DIR: directory,
    LOG_LEVEL: 'silent',
    KEY_ENCRYPTION_KEY: kek,
    FERNET_KEY_REPOSITORY: path.join(directory, 'fernet-keys'),
    JWS_KEY_REPOSITORY: path.join(directory, 'jws-keys'),
  };

  const rotateFirst = await manage(['fernet_rotate'], environment);
  t.equal(rotateFirst.code, 1);
  t.match(rotateFirst.stderr, /no fernet keys: run fernet_setup first/);

  // Keystone's files are imported into the empty database, once.
  const files = new FernetKeyRepository(environment.FERNET_KEY_REPOSITORY, 3);
  files.setup();
  const setup = await manage(['fernet_setup'], environment);
  t.equal(setup.code, 0, setup.stderr);
  t.match(setup.stdout, /imported the fernet keys of .*fernet-keys into the database/);
  t.match((await manage(['fernet_setup'], environment)).stdout, /already has fernet keys; nothing to do/);
  store = await Store.open({ databaseUrl: database.url, poolSize: 1 });
  const keys = new DatabaseKeyStore(store, Buffer.from(kek, 'base64url'));
  t.same(
    (await keys.read('fernet')).keys.map((key) => key.material.toString('hex')),
    files.load().map((key) => key.toString('hex')),
  );

  // A wrong or malformed KEY_ENCRYPTION_KEY: refused, named, no key printed.
  const wrong = await manage(['fernet_rotate'], { ...environment, KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
  t.equal(wrong.code, 1);
  t.match(wrong.stderr, /do not decrypt with KEY_ENCRYPTION_KEY/);
  for (const key of files.load()) t.notMatch(wrong.stderr + wrong.stdout, key.toString('base64url'));
  const malformed = await manage(['fernet_setup'], { ...environment, KEY_ENCRYPTION_KEY: 'too-short' });
  t.equal(malformed.code, 1);
  t.match(malformed.stderr, /KEY_ENCRYPTION_KEY must be 32 bytes/);
  t.equal((await keys.read('fernet')).generation, '1', 'nothing changed');

  // Two running nodes: one hears the command over Redis, the other (no Redis) polls. They share the
  // pepper as they share the keys (else the second refuses to start).
  const pepper = randomBytes(48).toString('base64');
  const nodeConfig = (overrides: Record<string, string>) =>
    loadConfig({ ...environment, DATA_DIR: fs.mkdtempSync(path.join(directory, 'node-')), PASSWORD_HASH_ROUNDS: '4', SECRET_PEPPER: pepper, ...overrides });
  const listening = await buildApplication(nodeConfig({ REDIS_URL: redis.url, KEY_RELOAD_INTERVAL_MS: '3600000' }), { logger: false });
  nodes.push(listening);
  const polling = await buildApplication(nodeConfig({ KEY_RELOAD_INTERVAL_MS: '100' }), { logger: false });
  nodes.push(polling);
  const probe = new Redis(redis.url);
  t.teardown(() => probe.disconnect());
  await waitFor(async () => ((await probe.pubsub('NUMSUB', 'keystone-gateway:events')) as [string, number])[1] >= 1, 'the node to subscribe', 10_000);

  const reloads = Promise.all([nextReload(listening), nextReload(polling)]);
  const rotated = await manage(['fernet_rotate'], { ...environment, REDIS_URL: redis.url });
  t.equal(rotated.code, 0, rotated.stderr);
  t.match(rotated.stdout, /rotated the fernet keys in the database/);
  t.match(rotated.stdout, /told the running services over Redis/);
  await reloads;
  t.pass('both nodes reloaded without a restart (polling is off on the Redis node)');
  const after = await keys.read('fernet');
  t.same(
    after.keys.map((key) => key.number),
    [2, 1, 0],
  );
  t.equal(after.keys[0]!.material.toString('hex'), files.load().at(-1)!.toString('hex'), 'the staged key became primary');

  const withoutRedis = await manage(['fernet_rotate'], environment);
  t.match(withoutRedis.stdout, /within KEY_RELOAD_INTERVAL_MS/);
  t.same(
    (await keys.read('fernet')).keys.map((key) => key.number),
    [3, 2, 0],
    'FERNET_MAX_ACTIVE_KEYS kept',
  );

  // JWS: no files, so new keys; a rotation adds one pair.
  const jwsSetup = await manage(['jws_setup'], environment);
  t.equal(jwsSetup.code, 0, jwsSetup.stderr);
  t.match(jwsSetup.stdout, /created jws keys in the database/);
  t.equal((await manage(['jws_rotate'], environment)).code, 0);
  t.same(
    (await keys.read('jws')).keys.map((key) => key.number),
    [2, 1, 0],
  );
  t.notOk(fs.existsSync(environment.JWS_KEY_REPOSITORY), 'no JWS files written');
});
