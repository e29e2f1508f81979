import { NotFoundError } from '../errors.ts';
import { FernetKeys, InvalidFernetTokenError } from './fernet.ts';
import { FernetKeyRepository } from './fernet-key-repository.ts';
import { InvalidTokenPayloadError, PayloadCodec, type TokenPayload } from './fernet-payload.ts';
import type { DecodedToken, TokenProvider } from './token-provider.ts';

/** Keystone's default [auth] methods, in order: the order fixes each method's bit in the token. */
export const AUTH_METHODS = ['external', 'password', 'token', 'oauth1', 'mapped', 'application_credential'];

export type { DecodedToken } from './token-provider.ts';

interface Logger {
  info(object: object, message: string): void;
  error(object: object, message: string): void;
}

/**
 * Fernet tokens as Keystone 22 makes them. Keys are read once and again only when the repository
 * changes on disk, so issuing and validating never touch the filesystem.
 */
export class FernetTokenProvider implements TokenProvider {
  readonly name = 'fernet';
  private keys: FernetKeys | undefined;
  private stopWatching: (() => void) | undefined;
  private readonly codec: PayloadCodec;

  constructor(
    readonly repository: FernetKeyRepository,
    private readonly log: Logger,
    defaultDomainId = 'default',
  ) {
    this.codec = new PayloadCodec({ methods: AUTH_METHODS, defaultDomainId });
  }

  /** Loads the keys (creating a repository on first start) and follows later rotations. */
  start(): void {
    if (!this.repository.exists()) {
      this.repository.setup();
      this.log.info({ repository: this.repository.directory }, 'created a new Fernet key repository');
    }
    this.reload();
    this.stopWatching = this.repository.watch(() => {
      try {
        this.reload();
        this.log.info({ repository: this.repository.directory }, 'reloaded Fernet keys');
      } catch (error) {
        // Keep the keys we have: a half-finished rotation must not take validation down.
        this.log.error({ err: error, repository: this.repository.directory }, 'Fernet key reload failed; keeping the previous keys');
      }
    });
  }

  stop(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
  }

  reload(): void {
    this.keys = new FernetKeys(this.repository.load());
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
      if (error instanceof InvalidTokenPayloadError) throw new NotFoundError('Failed to validate token');
      throw error;
    }
  }

  private activeKeys(): FernetKeys {
    if (!this.keys) throw new Error('Fernet keys are not loaded: call start() first');
    return this.keys;
  }
}
