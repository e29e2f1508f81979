import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { CredentialEncryption, keyHashOf } from '../../src/credential/credential-encryption.ts';
import { CredentialKeyMaintenance, UnmigratedCredentialsError } from '../../src/credential/credential-key-maintenance.ts';
import { CredentialEntity } from '../../src/store/entities.ts';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import { startTestApp } from '../helpers/app.ts';
import { debianPython } from '../helpers/debian-packages.ts';
import { manage } from '../helpers/manage.ts';

// The credential provider as Keystone's Fernet one: blobs a Keystone node (Python's cryptography)
// can read with the same key repository, key_hash as Keystone computes it, rotation and migration.

const quiet = { info: () => {}, error: () => {} };

function repository(t: { teardown(fn: () => void): void }): FernetKeyRepository {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-credential-keys-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  return new FernetKeyRepository(directory, 3);
}

t.test('blobs are Fernet tokens of the primary key, readable by Python cryptography; key_hash is SHA-1 of the key file', async (t) => {
  const keys = repository(t);
  const encryption = new CredentialEncryption(keys, quiet, () => 1_800_000_000_000);
  t.equal(await encryption.start(), 'created', 'zero setup: keys are created on first start');
  t.teardown(() => encryption.stop());
  const files = fs.readdirSync(keys.directory).sort();
  t.same(files, ['0', '1'], 'a staged and a primary key, as credential_setup leaves them');
  const primaryText = fs.readFileSync(path.join(keys.directory, '1'), 'utf8');
  t.equal(encryption.primaryKeyHash, createHash('sha1').update(primaryText).digest('hex'));
  t.equal(keyHashOf(Buffer.from(primaryText, 'base64url')), encryption.primaryKeyHash);

  const { encryptedBlob, keyHash } = encryption.encrypt('{"access": "a", "secret": "é"}');
  t.equal(keyHash, encryption.primaryKeyHash);
  t.equal(encryption.decrypt(encryptedBlob), '{"access": "a", "secret": "é"}');
  // An independent Fernet implementation (Debian's python3-cryptography) with the key file decrypts it.
  const python = debianPython(['python3-cryptography']);
  const script = 'import sys; from cryptography.fernet import Fernet; print(Fernet(sys.argv[1].encode()).decrypt(sys.argv[2].encode()).decode(), end="")';
  t.equal(execFileSync(python, ['-c', script, primaryText, encryptedBlob], { encoding: 'utf8' }), '{"access": "a", "secret": "é"}');
  // And a blob Python encrypts with the same key decrypts here.
  const fromPython = execFileSync(python, ['-c', 'import sys; from cryptography.fernet import Fernet; print(Fernet(sys.argv[1].encode()).encrypt(b"cert-blob").decode(), end="")', primaryText], { encoding: 'utf8' });
  t.equal(encryption.decrypt(fromPython), 'cert-blob');
  t.throws(() => encryption.decrypt('gAAAAABnot-a-token'), { name: 'CredentialDecryptionError' });
});

t.test('rotation waits for credential_migrate; migrated blobs survive the purge of their old key', async (t) => {
  const test = await startTestApp(t);
  const { call, app, config } = test;
  const userId = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': test.adminToken })).json().token.user.id;
  const ids: string[] = [];
  for (const blob of ['one', 'two', 'three']) ids.push((await call('POST', '/v3/credentials', { credential: { type: 'cert', blob, user_id: userId } })).json().credential.id);

  const keys = new FernetKeyRepository(config.credentialKeyRepository, 3);
  const encryption = new CredentialEncryption(keys, quiet, () => test.clock.now());
  await encryption.reload();
  const maintenance = new CredentialKeyMaintenance(app.store, encryption);
  const firstHash = encryption.primaryKeyHash;
  t.equal(await maintenance.unmigratedCount(), 0);
  await maintenance.assertRotatable();

  const before = await app.store.reader().find(CredentialEntity, {});
  keys.rotate();
  await encryption.reload();
  t.not(encryption.primaryKeyHash, firstHash);
  t.equal(await maintenance.unmigratedCount(), 3, 'every blob is under the old primary');
  await t.rejects(maintenance.assertRotatable(), UnmigratedCredentialsError);
  t.equal(await maintenance.migrate(2), 3, 'migrated in pages');
  t.equal(await maintenance.migrate(), 0, 'nothing left');
  app.store.reader().clear();
  const rows = await app.store.reader().find(CredentialEntity, {});
  t.ok(rows.every((row) => row.keyHash === encryption.primaryKeyHash));
  await maintenance.assertRotatable();

  // The next rotation purges the first key (three kept): an unmigrated blob would be lost, the
  // migrated ones still decrypt.
  keys.rotate();
  await encryption.reload();
  t.throws(() => encryption.decrypt(before[0]!.encryptedBlob), { name: 'CredentialDecryptionError' }, 'the first key is gone');
  for (const [index, id] of ids.entries()) {
    const row = rows.find((candidate) => candidate.id === id)!;
    t.equal(encryption.decrypt(row.encryptedBlob), ['one', 'two', 'three'][index]);
  }
  // The running service reads the migrated blobs.
  t.equal((await call('GET', `/v3/credentials/${ids[0]}`)).json().credential.blob, 'one');
});

t.test('manage credential_setup, credential_rotate, credential_migrate (embedded database, no credentials yet)', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-credentials-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { DATA_DIR: dataDir, LOG_LEVEL: 'silent' };
  const setup = await manage(['credential_setup'], env);
  t.equal(setup.code, 0, setup.stderr);
  t.match(setup.stdout, /created credential keys in .*credential-keys/);
  t.same(fs.readdirSync(path.join(dataDir, 'credential-keys')).sort(), ['0', '1']);
  t.match((await manage(['credential_setup'], env)).stdout, /already has keys; nothing to do/);

  const rotated = await manage(['credential_rotate'], env);
  t.equal(rotated.code, 0, rotated.stderr);
  t.same(fs.readdirSync(path.join(dataDir, 'credential-keys')).sort(), ['0', '1', '2']);
  const migrated = await manage(['credential_migrate'], env);
  t.equal(migrated.code, 0, migrated.stderr);
  t.match(migrated.stdout, /nothing to do/);
  const missing = await manage(['credential_rotate'], { ...env, CREDENTIAL_KEY_REPOSITORY: path.join(dataDir, 'none') });
  t.equal(missing.code, 1);
  t.match(missing.stderr, /has no keys: run credential_setup first/);
});

t.test('with KEY_ENCRYPTION_KEY the credential keys live in the database (no files), as token keys do', async (t) => {
  const kek = Buffer.alloc(32, 7).toString('base64');
  const test = await startTestApp(t, { KEY_ENCRYPTION_KEY: kek });
  const { call, app, config } = test;
  t.notOk(fs.existsSync(config.credentialKeyRepository), 'no key files were written');
  const rows = await app.store.reader().execute<{ number: number }[]>("select number from token_key where provider = 'credential' order by number");
  t.same(rows.map((row) => row.number), [0, 1], 'a staged and a primary credential key, encrypted in token_key');
  const fingerprints = await app.store.reader().execute<{ name: string }[]>("select name from key_fingerprint where name = 'credential'");
  t.same(fingerprints, [], 'no key agreement record for them');

  const userId = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': test.adminToken })).json().token.user.id;
  const created = (await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'in-the-database', user_id: userId } })).json().credential;
  t.equal((await call('GET', `/v3/credentials/${created.id}`)).json().credential.blob, 'in-the-database');
  const row = await app.store.reader().findOne(CredentialEntity, { id: created.id });
  t.notOk(row!.encryptedBlob.includes('in-the-database'));
});
