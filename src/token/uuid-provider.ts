import { NotFoundError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { Store } from '../store/database.ts';
import { TokenEntity, type Json } from '../store/entities.ts';
import type { TokenPayload } from './fernet-payload.ts';
import type { DecodedToken, TokenProvider } from './token-provider.ts';

/**
 * Keystone's old uuid provider: the token is a random id and its payload a database row. Kept for
 * deployments migrating from it; every validation of an uncached token costs a query.
 */
export class UuidTokenProvider implements TokenProvider {
  readonly name = 'uuid';
  /** No keys: tokens are rows. */
  readonly keysReady = true;
  /** UUID tokens are database rows: no keys to agree on. */
  readonly keyFingerprints = undefined;

  constructor(private readonly store: Store) {}

  start(): void {}
  stop(): void {}
  onReload(): void {}

  async issue(payload: TokenPayload, issuedAtSeconds: number): Promise<string> {
    const id = newId();
    // One row, outside store.transaction(): issuing a token changes nothing caches depend on.
    const em = this.store.reader();
    em.create(TokenEntity, {
      id,
      payload: payload as unknown as Json,
      issuedAt: new Date(issuedAtSeconds * 1000),
      expiresAt: new Date(Math.floor(payload.expiresAt) * 1000),
    });
    await em.flush();
    return id;
  }

  async decode(token: string): Promise<DecodedToken> {
    if (!/^[0-9a-f]{32}$/.test(token)) throw NotFoundError.tokenNotValidated();
    const row = await this.store.reader().findOne(TokenEntity, { id: token });
    if (!row) throw NotFoundError.tokenNotValidated();
    return { payload: row.payload as unknown as TokenPayload, issuedAt: Math.floor(row.issuedAt.getTime() / 1000) };
  }
}
