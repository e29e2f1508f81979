import type { EntityManager, Store } from '../store/database.ts';

/**
 * The access_epoch counter: every transaction that takes access away without recording a revocation
 * event bumps it. Such a change reaches the other nodes' caches through the commit's Redis message,
 * which is best effort; the counter is what their revocation poll reads, so a node that missed the
 * message re-reads roles within a poll interval, and the message carries the value, so a node cut
 * off from the database knows that what it last validated may grant too much.
 */
export class AccessEpoch {
  /** Transactions (their entity managers) that bumped the counter: the value they wrote. */
  private readonly bumped = new WeakMap<EntityManager, number>();

  constructor(private readonly store: Store) {}

  /** Bumps the counter in the caller's transaction. */
  async bump(em: EntityManager): Promise<void> {
    const rows = await em.execute<{ value: string | number }[]>('update access_epoch set value = value + 1 where id = 1 returning value');
    const value = Number(rows[0]?.value);
    if (Number.isSafeInteger(value)) this.bumped.set(em, value);
  }

  /** The value `transaction` wrote, if it bumped the counter. */
  bumpedIn(transaction: EntityManager): number | undefined {
    return this.bumped.get(transaction);
  }

  async read(): Promise<number> {
    const rows = await this.store.reader().execute<{ value: string | number }[]>('select value from access_epoch where id = 1');
    return Number(rows[0]?.value ?? 0);
  }
}
