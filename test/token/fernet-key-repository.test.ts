import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { FernetKeys, InvalidFernetTokenError } from '../../src/token/fernet.ts';
import { FernetKeyRepository, FernetKeyRepositoryError } from '../../src/token/fernet-key-repository.ts';
import { waitFor } from '../helpers/processes.ts';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A fresh directory under the system temp dir, removed when the test ends. */
function temporaryDirectory(t: Teardown): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'fernet-keys-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  return directory;
}

function keyNames(directory: string): string[] {
  return fs.readdirSync(directory).sort((a, b) => Number(a) - Number(b));
}

function readKey(directory: string, name: string): Buffer {
  return Buffer.from(fs.readFileSync(path.join(directory, name), 'utf8'), 'base64url');
}

function keyText(): string {
  return randomBytes(32).toString('base64url') + '=';
}

t.test('setup creates a staged key 0 and a primary key 1 in Keystone format', async (t) => {
  const directory = path.join(temporaryDirectory(t), 'nested', 'fernet-keys');
  const repository = new FernetKeyRepository(directory, 3);
  t.equal(repository.directory, directory);
  t.equal(repository.exists(), false);
  repository.setup();
  t.equal(repository.exists(), true);
  t.strictSame(keyNames(directory), ['0', '1']);
  t.equal(fs.statSync(directory).mode & 0o777, 0o700);
  for (const name of ['0', '1']) {
    const text = fs.readFileSync(path.join(directory, name), 'utf8');
    t.match(text, /^[A-Za-z0-9_-]{43}=$/, `key ${name} is 44 characters, no newline`);
    t.equal(Buffer.from(text, 'base64url').length, 32);
    t.equal(fs.statSync(path.join(directory, name)).mode & 0o777, 0o600);
  }
  t.not(fs.readFileSync(path.join(directory, '0'), 'utf8'), fs.readFileSync(path.join(directory, '1'), 'utf8'));

  const keys = repository.load();
  t.equal(keys.length, 2);
  t.same(keys[0], readKey(directory, '1'), 'primary first');
  t.same(keys[1], readKey(directory, '0'), 'staged last');
});

t.test('setup leaves an existing repository alone', async (t) => {
  const directory = temporaryDirectory(t);
  const repository = new FernetKeyRepository(directory, 3);
  repository.setup();
  const before = repository.load();
  repository.setup();
  t.strictSame(keyNames(directory), ['0', '1']);
  t.same(repository.load(), before);
});

t.test('rotate promotes the staged key and keeps max_active_keys files', async (t) => {
  const directory = temporaryDirectory(t);
  const repository = new FernetKeyRepository(directory, 3);
  repository.setup();
  const staged = readKey(directory, '0');
  const primary = readKey(directory, '1');

  repository.rotate();
  t.strictSame(keyNames(directory), ['0', '1', '2']);
  t.same(readKey(directory, '2'), staged, 'the old staged key is the new primary');
  t.same(readKey(directory, '1'), primary, 'the old primary is now a secondary');
  t.notSame(readKey(directory, '0'), staged, 'a fresh staged key');
  t.same(repository.load()[0], staged);
  t.equal(fs.statSync(path.join(directory, '0')).mode & 0o777, 0o600);

  for (let rotation = 3; rotation <= 8; rotation++) {
    const nextPrimary = readKey(directory, '0');
    repository.rotate();
    t.strictSame(keyNames(directory), ['0', String(rotation - 1), String(rotation)], `after rotation to ${rotation}`);
    t.same(readKey(directory, String(rotation)), nextPrimary);
  }
});

t.test('rotation respects other max_active_keys values, as Keystone does', async (t) => {
  for (const [maxActiveKeys, expected] of [
    [5, ['0', '1', '2', '3', '4']],
    [2, ['0', '4']],
    // Keystone's purge leaves only the staged key (which then encrypts) when max_active_keys is 1.
    [1, ['0']],
  ] as const) {
    const directory = temporaryDirectory(t);
    const repository = new FernetKeyRepository(directory, maxActiveKeys);
    repository.setup();
    for (let rotation = 0; rotation < 3; rotation++) repository.rotate();
    t.strictSame(keyNames(directory), expected, `max_active_keys ${maxActiveKeys}`);
    t.equal(repository.load().length, expected.length);
  }
  t.throws(() => new FernetKeyRepository('/nowhere', 0), RangeError);
  t.throws(() => new FernetKeyRepository('/nowhere', 2.5), RangeError);
});

t.test('tokens survive one rotation and expire with their key', async (t) => {
  const directory = temporaryDirectory(t);
  const repository = new FernetKeyRepository(directory, 3);
  repository.setup();
  const plaintext = Buffer.from('payload');
  const beforeRotation = new FernetKeys(repository.load()).encrypt(plaintext, 100);
  // Another node may already have promoted key 0: its tokens must validate here too.
  const fromStagedKey = new FernetKeys([readKey(directory, '0')]).encrypt(plaintext, 100);
  t.same(new FernetKeys(repository.load()).decrypt(fromStagedKey).plaintext, plaintext);

  repository.rotate();
  const afterOne = new FernetKeys(repository.load());
  t.same(afterOne.decrypt(beforeRotation).plaintext, plaintext, 'secondary key still decrypts');
  t.same(afterOne.decrypt(fromStagedKey).plaintext, plaintext, 'new primary decrypts');
  const fromNewPrimary = afterOne.encrypt(plaintext, 200);
  t.same(new FernetKeys([readKey(directory, '2')]).decrypt(fromNewPrimary).plaintext, plaintext, 'encrypts with the highest key');

  repository.rotate();
  const afterTwo = new FernetKeys(repository.load());
  t.throws(() => afterTwo.decrypt(beforeRotation), InvalidFernetTokenError, 'key 1 was rotated out');
  t.same(afterTwo.decrypt(fromNewPrimary).plaintext, plaintext);
});

t.test('non-integer names, empty files and directories are ignored; whitespace is trimmed', async (t) => {
  const directory = temporaryDirectory(t);
  const [primary, secondary, staged] = [keyText(), keyText(), keyText()];
  fs.writeFileSync(path.join(directory, '12'), `${primary}\n`);
  fs.writeFileSync(path.join(directory, '3'), `  ${secondary}\r\n`);
  fs.writeFileSync(path.join(directory, '0'), staged);
  fs.writeFileSync(path.join(directory, '0.tmp'), 'half-written');
  fs.writeFileSync(path.join(directory, 'README'), 'not a key');
  fs.writeFileSync(path.join(directory, '-1'), 'not a key');
  fs.writeFileSync(path.join(directory, '13'), '');
  fs.writeFileSync(path.join(directory, '14'), ' \n');
  fs.mkdirSync(path.join(directory, '15'));

  const repository = new FernetKeyRepository(directory, 3);
  t.equal(repository.exists(), true);
  const keys = repository.load();
  t.same(
    keys.map((key) => key.toString('base64url') + '='),
    [primary, secondary, staged],
  );

  repository.rotate();
  t.same(readKey(directory, '13'), Buffer.from(staged, 'base64url'), 'the next number after the highest real key');
  t.equal(fs.existsSync(path.join(directory, '12')), true);
  t.equal(fs.existsSync(path.join(directory, '3')), false, 'the oldest secondary was purged');
  t.equal(fs.existsSync(path.join(directory, '0.tmp')), false);
});

t.test('a missing or empty repository, or a malformed key, is a clear error', async (t) => {
  const directory = temporaryDirectory(t);
  const repository = new FernetKeyRepository(directory, 3);
  t.equal(repository.exists(), false);
  const empty = t.throws(() => repository.load(), FernetKeyRepositoryError) as Error;
  t.match(empty.message, directory);
  t.equal(empty.name, 'FernetKeyRepositoryError');
  t.throws(() => repository.rotate(), FernetKeyRepositoryError);

  fs.writeFileSync(path.join(directory, '1'), '');
  fs.writeFileSync(path.join(directory, 'notes'), keyText());
  t.throws(() => repository.load(), FernetKeyRepositoryError, 'only empty and non-key files');

  const missing = new FernetKeyRepository(path.join(directory, 'absent'), 3);
  t.equal(missing.exists(), false);
  t.match((t.throws(() => missing.load(), FernetKeyRepositoryError) as Error).message, path.join(directory, 'absent'));

  for (const bad of ['too-short', randomBytes(16).toString('base64url') + '==', randomBytes(32).toString('base64url'), `${keyText()}extra`]) {
    fs.writeFileSync(path.join(directory, '2'), bad);
    const error = t.throws(() => repository.load(), FernetKeyRepositoryError, JSON.stringify(bad)) as Error;
    t.match(error.message, path.join(directory, '2'));
    t.equal(repository.exists(), false);
  }
  // setup must never overwrite keys, even unusable ones.
  repository.setup();
  t.equal(fs.readFileSync(path.join(directory, '2'), 'utf8').endsWith('extra'), true);
});

t.test('rotate needs a staged key', async (t) => {
  const directory = temporaryDirectory(t);
  fs.writeFileSync(path.join(directory, '1'), keyText());
  const repository = new FernetKeyRepository(directory, 3);
  t.throws(() => repository.rotate(), FernetKeyRepositoryError);
  t.strictSame(keyNames(directory), ['1']);
});

t.test('watch reports changes, debounced, until stopped', async (t) => {
  const directory = temporaryDirectory(t);
  const repository = new FernetKeyRepository(directory, 3);
  repository.setup();
  let calls = 0;
  const stop = repository.watch(() => calls++);
  t.teardown(stop);

  repository.rotate();
  // The watcher keeps no event loop alive by design; waitFor's timer does while we wait.
  await waitFor(async () => calls > 0, 'the watcher to report the rotation', 2_000);
  // Bounded waits from here on: they check that a notification does NOT come, and nothing else
  // happens that could be waited for. Longer than the debounce, so a second one would show.
  await new Promise((resolve) => setTimeout(resolve, 150));
  t.equal(calls, 1, 'one rotation (several file events) is one notification');
  t.equal(repository.load().length, 3);

  stop();
  repository.rotate();
  await new Promise((resolve) => setTimeout(resolve, 150));
  t.equal(calls, 1, 'no notification after stop');
});
