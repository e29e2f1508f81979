import type { EntityManager } from '../store/database.ts';
import {
  OAuth1AccessTokenEntity,
  OAuth1ConsumerEntity,
  OAuth1NonceEntity,
  OAuth1RequestTokenEntity,
  type OAuth1AccessTokenRow,
  type OAuth1ConsumerRow,
  type OAuth1RequestTokenRow,
} from '../store/entities.ts';

/** Storage of OAuth1 consumers, request tokens, access tokens and seen nonces. Writes are stored when they return. */
export class OAuth1Repository {
  findConsumer(em: EntityManager, id: string): Promise<OAuth1ConsumerRow | null> {
    return em.findOne(OAuth1ConsumerEntity, { id });
  }

  listConsumers(em: EntityManager): Promise<OAuth1ConsumerRow[]> {
    return em.find(OAuth1ConsumerEntity, {}, { orderBy: { id: 'asc' } });
  }

  async createConsumer(em: EntityManager, row: OAuth1ConsumerRow): Promise<OAuth1ConsumerRow> {
    const created = em.create(OAuth1ConsumerEntity, row);
    await em.flush();
    return created;
  }

  async flush(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes the consumer; its request and access tokens and nonces go with it (foreign keys). */
  async deleteConsumer(em: EntityManager, row: OAuth1ConsumerRow): Promise<void> {
    await em.nativeDelete(OAuth1RequestTokenEntity, { consumerId: row.id });
    await em.nativeDelete(OAuth1AccessTokenEntity, { consumerId: row.id });
    await em.nativeDelete(OAuth1NonceEntity, { consumerId: row.id });
    em.remove(row);
    await em.flush();
  }

  findRequestToken(em: EntityManager, id: string): Promise<OAuth1RequestTokenRow | null> {
    return em.findOne(OAuth1RequestTokenEntity, { id });
  }

  async createRequestToken(em: EntityManager, row: OAuth1RequestTokenRow): Promise<void> {
    em.create(OAuth1RequestTokenEntity, row);
    await em.flush();
  }

  /** Exchanges a request token for an access token: the request token is used up. */
  async exchangeRequestToken(em: EntityManager, requestToken: OAuth1RequestTokenRow, accessToken: OAuth1AccessTokenRow): Promise<boolean> {
    // Deleted by id first: of two concurrent exchanges only one deletes the row.
    const deleted = await em.nativeDelete(OAuth1RequestTokenEntity, { id: requestToken.id });
    if (deleted !== 1) return false;
    em.create(OAuth1AccessTokenEntity, accessToken);
    await em.flush();
    return true;
  }

  findAccessToken(em: EntityManager, id: string): Promise<OAuth1AccessTokenRow | null> {
    return em.findOne(OAuth1AccessTokenEntity, { id });
  }

  listAccessTokens(em: EntityManager, userId: string): Promise<OAuth1AccessTokenRow[]> {
    return em.find(OAuth1AccessTokenEntity, { authorizingUserId: userId }, { orderBy: { id: 'asc' } });
  }

  async deleteAccessToken(em: EntityManager, row: OAuth1AccessTokenRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }

  /**
   * Records a nonce of a consumer at a timestamp; false when it was recorded already (a replay).
   * Nonces older than `forgetBefore` (seconds) are forgotten: their timestamps are refused anyway.
   */
  async recordNonce(em: EntityManager, consumerId: string, nonce: string, timestamp: number, forgetBefore: number): Promise<boolean> {
    await em.nativeDelete(OAuth1NonceEntity, { timestamp: { $lt: forgetBefore } });
    const inserted = await em.execute(
      'insert into oauth1_nonce (consumer_id, nonce, timestamp) values (?, ?, ?) on conflict do nothing returning nonce',
      [consumerId, nonce, timestamp],
    );
    return inserted.length === 1;
  }
}
