import type { EntitySchema, FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from './database.ts';

/** How plain rows are read: their order, and at most how many. */
export interface PlainRowsOptions {
  orderBy: Record<string, 'asc' | 'desc'>;
  limit?: number | undefined;
}

/**
 * The rows matching `where` as plain objects (property names, values converted as for an entity:
 * dates, JSON, booleans), read in `em`'s transaction when it has one, but not managed: no unit of
 * work registers them, no identity map holds them, and a flush never looks at them.
 *
 * For lists, whose rows are only read: a managed entity costs ~6 KB of bookkeeping garbage per row
 * (registration, identity map, hydration; bench/README.md, "A worker's memory on Node 26"), which
 * a long list's pages promoted into the old generation. A row read here cannot be changed or
 * removed through `em`; read it with `em.find` for that.
 */
export function plainRows<Row extends object>(
  em: EntityManager,
  // any: defineEntity's schemas carry a second type parameter of their own.
  entity: EntitySchema<Row, any>,
  where: FilterQuery<Row>,
  options: PlainRowsOptions,
): Promise<Row[]> {
  const query = em.createQueryBuilder(entity).select('*').where(where).orderBy(options.orderBy);
  if (options.limit !== undefined) query.limit(options.limit);
  return query.execute('all') as Promise<Row[]>;
}
