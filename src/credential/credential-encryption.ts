import { createHash } from 'node:crypto';
import { FernetKeys, InvalidFernetTokenError } from '../token/fernet.ts';
import type { FernetKeySource, KeySetupOutcome } from '../token/key-source.ts';

interface Logger {
  info(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** Keystone's credential key repository keeps three keys (its MAX_ACTIVE_KEYS, not configurable). */
export const CREDENTIAL_MAX_ACTIVE_KEYS = 3;

/** A blob encrypted with the primary credential key, and the hash that names that key. */
export interface EncryptedBlob {
  encryptedBlob: string;
  keyHash: string;
}

/** A stored blob decrypts with none of the credential keys (a key was purged before credential_migrate). */
export class CredentialDecryptionError extends Error {
  override name = 'CredentialDecryptionError';
}

/**
 * Keystone's hash of a Fernet key as key_hash: SHA-1 of the key's text (URL-safe base64 with its
 * padding, as the key files hold it), so rows written by either side compare.
 */
export function keyHashOf(key: Buffer): string {
  return createHash('sha1').update(key.toString('base64url') + '=', 'utf8').digest('hex');
}

/**
 * Keystone's Fernet credential provider: blobs encrypted with the primary credential key (the
 * highest numbered; 0 is staged), decrypted with any key of the repository. The keys are loaded at
 * start (created on first start when there are none, as token keys are) and again when the key
 * source changes, never per request.
 */
export class CredentialEncryption {
  private keys: FernetKeys | undefined;
  private primaryHash = '';
  private stopWatching: (() => void) | undefined;

  constructor(
    readonly source: FernetKeySource,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Loads the keys (creating them when the source has none) and follows later rotations. */
  async start(): Promise<KeySetupOutcome> {
    const outcome = await this.source.setup();
    if (outcome === 'created') this.log.info({ repository: this.source.description }, 'created new credential keys');
    await this.reload();
    this.stopWatching = this.source.watch(() => {
      this.reload().then(
        () => this.log.info({ repository: this.source.description }, 'reloaded credential keys'),
        (error: unknown) => this.log.error({ err: error, repository: this.source.description }, 'credential key reload failed; keeping the previous keys'),
      );
    });
    return outcome;
  }

  stop(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
  }

  async reload(): Promise<void> {
    const keys = await this.source.load();
    this.keys = new FernetKeys(keys);
    this.primaryHash = keyHashOf(keys[0]!);
  }

  /** key_hash of the key new blobs are encrypted with. */
  get primaryKeyHash(): string {
    this.loaded();
    return this.primaryHash;
  }

  encrypt(blob: string): EncryptedBlob {
    const token = this.loaded().encrypt(Buffer.from(blob, 'utf8'), Math.floor(this.now() / 1000));
    // Padded, as Python's cryptography writes (and insists on reading) a Fernet token.
    return { encryptedBlob: token.padEnd(Math.ceil(token.length / 4) * 4, '='), keyHash: this.primaryHash };
  }

  decrypt(encryptedBlob: string): string {
    try {
      return this.loaded().decrypt(encryptedBlob).plaintext.toString('utf8');
    } catch (error) {
      if (error instanceof InvalidFernetTokenError) {
        throw new CredentialDecryptionError('a credential blob decrypts with none of the credential keys (run credential_migrate before a rotation purges its key)');
      }
      throw error;
    }
  }

  private loaded(): FernetKeys {
    if (!this.keys) throw new Error('credential keys are not loaded');
    return this.keys;
  }
}
