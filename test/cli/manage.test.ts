import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { manage } from '../helpers/manage.ts';


const keyFiles = (directory: string) =>
  fs
    .readdirSync(directory)
    .map(Number)
    .sort((a, b) => a - b);

t.test('fernet_setup and fernet_rotate', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  const environment = { FERNET_KEY_REPOSITORY: path.join(directory, 'keys'), FERNET_MAX_ACTIVE_KEYS: '3', DATA_DIR: directory };

  const rotateFirst = await manage(['fernet_rotate'], environment);
  t.equal(rotateFirst.code, 1);
  t.match(rotateFirst.stderr, /run fernet_setup first/);

  t.equal((await manage(['fernet_setup'], environment)).code, 0);
  t.same(keyFiles(environment.FERNET_KEY_REPOSITORY), [0, 1]);
  const staged = fs.readFileSync(path.join(environment.FERNET_KEY_REPOSITORY, '0'), 'utf8');
  t.match((await manage(['fernet_setup'], environment)).stdout, /nothing to do/);

  t.equal((await manage(['fernet_rotate'], environment)).code, 0);
  t.same(keyFiles(environment.FERNET_KEY_REPOSITORY), [0, 1, 2]);
  t.equal(fs.readFileSync(path.join(environment.FERNET_KEY_REPOSITORY, '2'), 'utf8'), staged, 'the staged key became primary');
  await manage(['fernet_rotate'], environment);
  t.same(keyFiles(environment.FERNET_KEY_REPOSITORY), [0, 2, 3], 'max active keys kept');

  const unknown = await manage(['frobnicate'], environment);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown command 'frobnicate'/);
});

t.test('bootstrap and db_sync on the embedded database', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-manage-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  const environment = { DATA_DIR: directory, PASSWORD_HASH_ROUNDS: '4', LOG_LEVEL: 'silent' };
  const first = await manage(['bootstrap'], environment);
  t.equal(first.code, 0, first.stderr);
  t.match(first.stdout, /created user admin/);
  t.match(first.stdout, /Generated admin password \(shown once\): \S{24}/);
  const second = await manage(['bootstrap'], environment);
  t.match(second.stdout, /already bootstrapped/);
  t.notMatch(second.stdout, /Generated admin password/);
  t.match((await manage(['db_sync'], environment)).stdout, /up to date/);
});
