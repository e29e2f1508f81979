import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { FernetKeySource, KeySetupOutcome } from './key-source.ts';

const KEY_NAME = /^[0-9]+$/;
const KEY_TEXT = /^[A-Za-z0-9_-]{43}=$/;
const STAGED_KEY = 0;
const TEMPORARY_KEY_NAME = '0.tmp';
const WATCH_DEBOUNCE_MS = 50;

/** The key repository is missing, empty or holds a key that is not a Fernet key. */
export class FernetKeyRepositoryError extends Error {
  override name = 'FernetKeyRepositoryError';
}

interface KeyFile {
  number: number;
  name: string;
}

/**
 * A Keystone Fernet key repository (`[fernet_tokens] key_repository`): files named 0, 1, 2, … each
 * holding one urlsafe-base64 key. 0 is staged, the highest number is primary. Same layout and rotation
 * as keystone-manage, so a repository can be shared with Keystone nodes.
 */
export class FernetKeyRepository implements FernetKeySource {
  constructor(
    readonly directory: string,
    readonly maxActiveKeys: number,
  ) {
    if (!Number.isInteger(maxActiveKeys) || maxActiveKeys < 1) {
      throw new RangeError(`max active Fernet keys must be an integer of at least 1, got ${maxActiveKeys}`);
    }
  }

  get description(): string {
    return this.directory;
  }

  /** True when load() would succeed: at least one key, and every key well-formed. */
  exists(): boolean {
    try {
      return this.load().length > 0;
    } catch {
      return false;
    }
  }

  /** Keys in Keystone's load order: primary (highest number) first, staged key 0 last. */
  load(): Buffer[] {
    return this.numberedKeys().map((entry) => entry.key);
  }

  /** The keys with their file numbers, in load order (what an import into the database needs). */
  numberedKeys(): { number: number; key: Buffer }[] {
    let files: KeyFile[];
    try {
      files = this.keyFiles();
    } catch (error) {
      throw new FernetKeyRepositoryError(`cannot read Fernet key repository ${this.directory}: ${(error as Error).message}`);
    }
    const keys: { number: number; key: Buffer }[] = [];
    for (const file of files) {
      const text = this.readKeyText(file.name);
      if (text === undefined) continue;
      if (!KEY_TEXT.test(text)) {
        throw new FernetKeyRepositoryError(`Fernet key ${path.join(this.directory, file.name)} is not 32 bytes of URL-safe base64`);
      }
      keys.push({ number: file.number, key: Buffer.from(text, 'base64url') });
    }
    if (keys.length === 0) throw new FernetKeyRepositoryError(`Fernet key repository ${this.directory} has no keys (run fernet_setup)`);
    return keys;
  }

  /** keystone-manage fernet_setup: a staged and a primary key, unless some key is already there. */
  setup(): KeySetupOutcome {
    fs.mkdirSync(this.directory, { recursive: true, mode: 0o700 });
    if (this.keyFiles().some((file) => this.readKeyText(file.name) !== undefined)) return 'present';
    fs.renameSync(this.writeTemporaryKey(), this.keyPath(String(STAGED_KEY)));
    this.rotate();
    return 'created';
  }

  /**
   * keystone-manage fernet_rotate: the staged key becomes primary, a new staged key is written, and the
   * oldest secondaries go until max_active_keys remain. The new key is complete on disk before it
   * appears under its name, so a reader never sees a partial key.
   */
  rotate(): void {
    const files = this.keyFiles().filter((file) => this.readKeyText(file.name) !== undefined);
    const staged = files.find((file) => file.number === STAGED_KEY);
    if (!staged) {
      throw new FernetKeyRepositoryError(`Fernet key repository ${this.directory} has no staged key 0 to promote (run fernet_setup)`);
    }
    const newPrimary = files[0]!.number + 1;
    const temporaryPath = this.writeTemporaryKey();
    fs.renameSync(this.keyPath(staged.name), this.keyPath(String(newPrimary)));
    fs.renameSync(temporaryPath, this.keyPath(String(STAGED_KEY)));

    // Keystone's purge: oldest non-zero keys go (with max_active_keys = 1 even the new primary).
    const activeNames = [String(newPrimary), ...files.filter((file) => file !== staged).map((file) => file.name)];
    while (activeNames.length > this.maxActiveKeys - 1) fs.rmSync(this.keyPath(activeNames.pop()!), { force: true });
  }

  /** Calls onChange (debounced) whenever the directory changes; returns a function that stops watching. */
  watch(onChange: () => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    const watcher = fs.watch(this.directory, { persistent: false }, () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        onChange();
      }, WATCH_DEBOUNCE_MS);
      timer.unref();
    });
    // A vanished directory ends the watch; the keys already loaded stay in use.
    watcher.on('error', () => watcher.close());
    return () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      watcher.close();
    };
  }

  /** Integer-named regular files, highest number first (Keystone's load order). */
  private keyFiles(): KeyFile[] {
    const files: KeyFile[] = [];
    for (const name of fs.readdirSync(this.directory)) {
      if (!KEY_NAME.test(name)) continue;
      const stats = fs.statSync(this.keyPath(name), { throwIfNoEntry: false });
      if (stats?.isFile()) files.push({ number: Number(name), name });
    }
    return files.sort((a, b) => b.number - a.number || (a.name < b.name ? -1 : 1));
  }

  /** The trimmed key text, or undefined for an empty file (Keystone skips those). */
  private readKeyText(name: string): string | undefined {
    let text: string;
    try {
      text = fs.readFileSync(this.keyPath(name), 'utf8').trim();
    } catch (error) {
      // Renamed or removed by a concurrent rotation since the directory was listed.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new FernetKeyRepositoryError(`cannot read Fernet key ${this.keyPath(name)}: ${(error as Error).message}`);
    }
    return text === '' ? undefined : text;
  }

  /** Writes a fresh key to 0.tmp (mode 0600, synced, no newline, as Keystone writes it); returns its path. */
  private writeTemporaryKey(): string {
    const keyPath = this.keyPath(TEMPORARY_KEY_NAME);
    // A stale temporary file from an interrupted rotation may have other permissions.
    fs.rmSync(keyPath, { force: true });
    const descriptor = fs.openSync(keyPath, 'wx', 0o600);
    try {
      fs.writeSync(descriptor, randomBytes(32).toString('base64url') + '=');
      fs.fsyncSync(descriptor);
    } finally {
      fs.closeSync(descriptor);
    }
    return keyPath;
  }

  private keyPath(name: string): string {
    return path.join(this.directory, name);
  }
}
