import { NotFoundError } from '../support/errors.ts';
import { FernetKeys, InvalidFernetTokenError } from './fernet.ts';
import { fernetFingerprints, type KeySetFingerprints } from './key-agreement.ts';
import type { FernetKeySource } from './key-source.ts';
import { InvalidTokenPayloadError, PayloadCodec, type ReceiptPayload, type TokenPayload } from './fernet-payload.ts';
import type { DecodedToken, TokenProvider } from './token-provider.ts';

/** Keystone's default [auth] methods, in order: the order fixes each method's bit in the token. */
// `totp` is appended, as a Keystone with MFA configures it: its bit is 64. Then the federated
// protocols that load Keystone's mapped plugin, `openid` (128) and `saml2` (256): a Keystone whose
// tokens cross with ours lists [auth] methods in this order.
export const AUTH_METHODS = ['external', 'password', 'token', 'oauth1', 'mapped', 'application_credential', 'totp', 'openid', 'saml2'];

export type { DecodedToken } from './token-provider.ts';

interface Logger {
  info(object: object, message: string): void;
  error(object: object, message: string): void;
}

/**
 * Fernet tokens as Keystone 22 makes them. Keys are read once and again only when the key source
 * changes (files on disk, or the database's key generation), so issuing and validating never touch
 * the filesystem or the database.
 */
export class FernetTokenProvider implements TokenProvider {
  readonly name = 'fernet';
  private keys: FernetKeys | undefined;
  /** Of the loaded keys. */
  keyFingerprints: KeySetFingerprints | undefined;
  private stopWatching: (() => void) | undefined;
  private readonly codec: PayloadCodec;
  /** False after a failed reload, until one succeeds (readyz). */
  private lastReloadSucceeded = false;
  /** Reloads run one after another, so a slow older one never replaces newer keys. */
  private reloads: Promise<void> = Promise.resolve();

  constructor(
    readonly repository: FernetKeySource,
    private readonly log: Logger,
    defaultDomainId = 'default',
  ) {
    this.codec = new PayloadCodec({ methods: AUTH_METHODS, defaultDomainId });
  }

  /** Loads the keys (creating them on first start) and follows later rotations. */
  async start(): Promise<void> {
    const outcome = await this.repository.setup();
    if (outcome === 'created') this.log.info({ repository: this.repository.description }, 'created new Fernet keys');
    if (outcome === 'imported') this.log.info({ repository: this.repository.description }, 'imported the Fernet keys of FERNET_KEY_REPOSITORY');
    await this.reload();
    this.stopWatching = this.repository.watch(() => {
      this.reloads = this.reloads.then(async () => {
        try {
          await this.reload();
          this.log.info({ repository: this.repository.description }, 'reloaded Fernet keys');
        } catch (error) {
          // Keep the keys we have: a half-finished rotation must not take validation down.
          this.lastReloadSucceeded = false;
          this.log.error({ err: error, repository: this.repository.description }, 'Fernet key reload failed; keeping the previous keys');
        }
      });
    });
  }

  /** Keys are loaded and the last reload worked (readyz). */
  get keysReady(): boolean {
    return this.keys !== undefined && this.lastReloadSucceeded;
  }

  stop(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
  }

  /** Synchronous for a file repository (the new keys are in use when it returns). */
  reload(): void | Promise<void> {
    const loaded = this.repository.load();
    if (loaded instanceof Promise) return loaded.then((keys) => this.use(keys));
    this.use(loaded);
  }

  private use(keys: Buffer[]): void {
    this.keys = new FernetKeys(keys);
    this.keyFingerprints = fernetFingerprints(keys);
    this.lastReloadSucceeded = true;
    // Tokens validated with a key that is now gone must not stay cached.
    for (const listener of this.reloadListeners) listener();
  }

  onReload(listener: () => void): void {
    this.reloadListeners.push(listener);
  }

  private readonly reloadListeners: (() => void)[] = [];

  issue(payload: TokenPayload, issuedAtSeconds: number): string {
    return this.activeKeys().encrypt(this.codec.encode(payload), issuedAtSeconds);
  }

  /** Throws NotFoundError with Keystone's texts for tokens that are not ours or not readable. */
  decode(token: string): DecodedToken {
    let decrypted;
    try {
      decrypted = this.activeKeys().decrypt(token);
    } catch (error) {
      if (error instanceof InvalidFernetTokenError) throw new NotFoundError('Could not recognize Fernet token');
      throw error;
    }
    try {
      return { payload: this.codec.decode(decrypted.plaintext), issuedAt: decrypted.timestampSeconds };
    } catch (error) {
      if (error instanceof InvalidTokenPayloadError) throw NotFoundError.tokenNotValidated();
      throw error;
    }
  }

  /**
   * An MFA auth receipt sealed with these keys (Keystone's [fernet_receipts] key_repository defaults
   * to the token keys' directory), without padding as Keystone sends it.
   */
  issueReceipt(receipt: ReceiptPayload, issuedAtSeconds: number): string {
    return this.activeKeys().encrypt(this.codec.encodeReceipt(receipt), issuedAtSeconds);
  }

  /** A receipt's payload and issued_at (seconds), or null when it is not one of ours. */
  decodeReceipt(receipt: string): { payload: ReceiptPayload; issuedAt: number } | null {
    try {
      const decrypted = this.activeKeys().decrypt(receipt);
      return { payload: this.codec.decodeReceipt(decrypted.plaintext), issuedAt: decrypted.timestampSeconds };
    } catch (error) {
      if (error instanceof InvalidFernetTokenError || error instanceof InvalidTokenPayloadError || error instanceof RangeError) return null;
      throw error;
    }
  }

  private activeKeys(): FernetKeys {
    if (!this.keys) throw new Error('Fernet keys are not loaded: call start() first');
    return this.keys;
  }
}
