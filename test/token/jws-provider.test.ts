import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { JwsKeyRepository } from '../../src/token/jws-key-repository.ts';
import { JwsTokenProvider } from '../../src/token/jws-provider.ts';
import type { JwsKeys, JwsKeySource } from '../../src/token/key-source.ts';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

t.test('a reload that read the keys before a rotation never replaces the keys a later reload loaded', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-jws-provider-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  const files = new JwsKeyRepository(directory, 2);
  // The files, except that one load answers only when released: it read the keys of its moment,
  // and takes longer than the reload after it (as a loaded machine or a database can make it).
  let slow: { started: () => void; release: () => void } | undefined;
  let loads = 0;
  const source: JwsKeySource = {
    description: files.description,
    exists: () => files.exists(),
    setup: () => files.setup(),
    rotate: () => files.rotate(),
    watch: () => () => undefined,
    load: () => {
      loads += 1;
      const keys = files.load();
      const held = slow;
      if (!held) return keys;
      slow = undefined;
      return new Promise<JwsKeys>((resolve) => {
        held.release = () => resolve(keys);
        held.started();
      });
    },
  };
  const provider = new JwsTokenProvider(source, silent);
  await provider.start();

  let started: () => void = () => undefined;
  const loadStarted = new Promise<void>((resolve) => (started = resolve));
  const held = { started, release: () => undefined };
  slow = held;
  const early = provider.reload();
  await loadStarted;
  // Two rotations: the key the early reload saw is no longer published (two active keys at most).
  await files.rotate();
  await files.rotate();
  const loadsBefore = loads;
  const later = provider.reload();
  // Were reloads not kept in order, the later one would read the keys now and finish first: it is
  // let finish, then the early one answers with the keys of before the rotations.
  if (loads > loadsBefore) await later;
  held.release();
  await Promise.all([early, later]);

  const reference = new JwsTokenProvider(files, silent);
  await reference.start();
  reference.stop();
  t.equal(reference.jwks().keys.length, 2);
  t.same(provider.jwks(), reference.jwks(), 'the keys of the files as they are now');
});
