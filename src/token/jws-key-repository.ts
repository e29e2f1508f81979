import fs from 'node:fs';
import path from 'node:path';
import { exportPKCS8, exportSPKI, generateKeyPair } from 'jose';
import type { JwsKeys, JwsKeySource, KeySetupOutcome } from './key-source.ts';

export class JwsKeyRepositoryError extends Error {
  override name = 'JwsKeyRepositoryError';
}

export type JwsKeyFiles = JwsKeys;

const PUBLIC_SUFFIX = '.pem';

/**
 * ES256 key pairs laid out as Keystone's JWS provider keeps them: `private/private.pem` signs,
 * every `public/*.pem` verifies. A rotation publishes the new public key before the new private key
 * starts signing, so no node sees a token it cannot verify.
 */
export class JwsKeyRepository implements JwsKeySource {
  constructor(
    readonly directory: string,
    readonly maxActiveKeys: number,
  ) {
    if (!Number.isInteger(maxActiveKeys) || maxActiveKeys < 1) throw new RangeError('maxActiveKeys must be an integer >= 1');
  }

  get description(): string {
    return this.directory;
  }

  private get privateFile(): string {
    return path.join(this.directory, 'private', 'private.pem');
  }

  private get publicDirectory(): string {
    return path.join(this.directory, 'public');
  }

  exists(): boolean {
    return fs.existsSync(this.privateFile) && this.publicNames().length > 0;
  }

  load(): JwsKeyFiles {
    let privateKey: string;
    try {
      privateKey = fs.readFileSync(this.privateFile, 'utf8');
    } catch {
      throw new JwsKeyRepositoryError(`no JWS signing key at ${this.privateFile}: run npm run manage -- jws_setup`);
    }
    const publicKeys = this.publicNames()
      .reverse()
      .map((name) => ({ name, pem: fs.readFileSync(path.join(this.publicDirectory, name), 'utf8') }));
    if (publicKeys.length === 0) throw new JwsKeyRepositoryError(`no JWS public keys in ${this.publicDirectory}`);
    return { privateKey, publicKeys };
  }

  async setup(): Promise<KeySetupOutcome> {
    if (this.exists()) return 'present';
    await this.rotate();
    return 'created';
  }

  /** A new key pair: public key first, then the signing key; the oldest public keys beyond the limit go. */
  async rotate(): Promise<void> {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    fs.mkdirSync(path.dirname(this.privateFile), { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.publicDirectory, { recursive: true, mode: 0o755 });
    const names = this.publicNames();
    const last = Math.max(0, ...names.map((existing) => Number.parseInt(existing, 10)).filter(Number.isFinite));
    const name = `${String(last + 1).padStart(6, '0')}${PUBLIC_SUFFIX}`;
    writeAtomically(path.join(this.publicDirectory, name), await exportSPKI(publicKey), 0o644);
    writeAtomically(this.privateFile, await exportPKCS8(privateKey), 0o600);
    const kept = [...names, name];
    while (kept.length > this.maxActiveKeys) fs.rmSync(path.join(this.publicDirectory, kept.shift()!), { force: true });
  }

  watch(onChange: () => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    const watchers: fs.FSWatcher[] = [];
    for (const directory of [path.dirname(this.privateFile), this.publicDirectory]) {
      try {
        const watcher = fs.watch(directory, () => {
          clearTimeout(timer);
          timer = setTimeout(onChange, 50);
          timer.unref();
        });
        watcher.unref();
        watchers.push(watcher);
      } catch {
        // A directory that does not exist yet has nothing to watch.
      }
    }
    return () => {
      clearTimeout(timer);
      for (const watcher of watchers) watcher.close();
    };
  }

  private publicNames(): string[] {
    try {
      return fs
        .readdirSync(this.publicDirectory)
        .filter((name) => name.endsWith(PUBLIC_SUFFIX) && !name.startsWith('.'))
        .sort();
    } catch {
      return [];
    }
  }
}

function writeAtomically(file: string, text: string, mode: number): void {
  const temporary = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(temporary, text, { mode });
  fs.renameSync(temporary, file);
}
