import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store } from '../../src/store/database.ts';
import { DatabaseKeyStore } from '../../src/token/database-key-store.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { manage } from '../helpers/manage.ts';

// Its own file: each CLI run is a process that loads the application (several seconds each).
t.test('reencrypt_keys: reads with KEY_ENCRYPTION_KEY_PREVIOUS, writes with the new KEY_ENCRYPTION_KEY', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-reencrypt-'));
  let store: Store | undefined;
  t.teardown(async () => {
    await store?.close();
    await database.drop();
    fs.rmSync(directory, { recursive: true, force: true });
  });
  const kek = randomBytes(32).toString('base64url');
  const environment = { DATABASE_URL: database.url!, DATA_DIR: directory, LOG_LEVEL: 'silent', KEY_ENCRYPTION_KEY: kek };
  for (const command of ['fernet_setup', 'jws_setup']) {
    const result = await manage([command], environment);
    t.equal(result.code, 0, result.stderr);
  }
  store = await Store.open({ databaseUrl: database.url, poolSize: 1 });
  const oldKeys = new DatabaseKeyStore(store, Buffer.from(kek, 'base64url'));
  const fernetBefore = await oldKeys.read('fernet');
  const jwsBefore = await oldKeys.read('jws');

  const newKek = randomBytes(32).toString('base64');
  const withoutPrevious = await manage(['reencrypt_keys'], { ...environment, KEY_ENCRYPTION_KEY: newKek });
  t.equal(withoutPrevious.code, 1, 'the new key alone cannot read the keys');
  t.match(withoutPrevious.stderr, /do not decrypt with KEY_ENCRYPTION_KEY/);
  t.same(await oldKeys.read('fernet'), fernetBefore, 'nothing was changed by the failed run');

  const reencrypted = await manage(['reencrypt_keys'], { ...environment, KEY_ENCRYPTION_KEY: newKek, KEY_ENCRYPTION_KEY_PREVIOUS: kek });
  t.equal(reencrypted.code, 0, reencrypted.stderr);
  t.match(reencrypted.stdout, new RegExp(`re-encrypted ${fernetBefore.keys.length} fernet keys under KEY_ENCRYPTION_KEY\\nre-encrypted ${jwsBefore.keys.length} jws keys`));
  const newKeys = new DatabaseKeyStore(store, Buffer.from(newKek, 'base64'));
  t.same(await newKeys.read('fernet'), fernetBefore, 'the same fernet keys (and generation) under the new key');
  t.same(await newKeys.read('jws'), jwsBefore, 'the same jws keys under the new key');
  await t.rejects(oldKeys.read('fernet'), /do not decrypt/, 'and no longer under the old one');
});
