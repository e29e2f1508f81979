/**
 * Keyset pagination: a long list read in pages of at most `limit` rows, each page the rows after the
 * previous page's last one in the list's (total) order. No page holds a connection or a transaction
 * while the caller works on it. With an index on the order's columns a page is an index range
 * read; without one, each page scans the table once (a top-N sort), still not growing with the
 * page's position as OFFSET would.
 *
 * The pages together are the list one query would return, except for rows changed while it is
 * being read (as Keystone, which reads one list in one query, gives no snapshot across requests
 * either): a row inserted, deleted or renamed behind the reading position is missed or seen again.
 */
import { raw } from '@mikro-orm/core';

/** One column of a list's order; the columns together must order the rows totally (end with a unique key). */
export interface SortKey<Row> {
  property: keyof Row & string;
  /** The column's name in SQL (for the row comparison below). */
  column: string;
  direction: 'asc' | 'desc';
}

/** The MikroORM orderBy of the keys. */
export function orderByOf<Row>(keys: readonly SortKey<Row>[]): Record<string, 'asc' | 'desc'> {
  return Object.fromEntries(keys.map((key) => [key.property, key.direction]));
}

/**
 * The condition "after `last` in the order of `keys`": (k1 > v1) or (k1 = v1 and k2 > v2) or …,
 * with < for descending keys. The keys' values must not be null.
 *
 * The leading keys that share a direction are also compared as one SQL row value, e.g.
 * (name, id) > ($1, $2): PostgreSQL seeks an index on those columns to that position instead of
 * reading the list from its start for every page. When all keys share the direction, that
 * comparison is the whole condition.
 */
export function after<Row>(keys: readonly SortKey<Row>[], last: Row): Record<string, unknown> {
  const direction = keys[0]?.direction;
  let prefix = 0;
  while (prefix < keys.length && keys[prefix]!.direction === direction) prefix++;
  const alternatives = keys.map((key, index) => {
    const condition: Record<string, unknown> = {};
    for (const equal of keys.slice(0, index)) condition[equal.property] = last[equal.property];
    condition[key.property] = { [key.direction === 'asc' ? '$gt' : '$lt']: last[key.property] };
    return condition;
  });
  const expanded = alternatives.length === 1 ? alternatives[0]! : { $or: alternatives };
  if (prefix < 2) return expanded;
  const leading = keys.slice(0, prefix);
  const whole = prefix === keys.length;
  const operator = direction === 'asc' ? (whole ? '$gt' : '$gte') : whole ? '$lt' : '$lte';
  // A raw() key is used up by the query that renders it: a new one per call.
  const rowValue = {
    [raw((alias: string) => `(${leading.map((key) => `${alias}.${key.column}`).join(', ')})`)]: {
      [operator]: raw(`(${leading.map(() => '?').join(', ')})`, leading.map((key) => last[key.property])),
    },
  };
  return whole ? rowValue : { $and: [rowValue, expanded] };
}

/** What one page read needs: where to start (undefined: from the beginning) and how many rows. */
export interface PageRequest<Row> {
  after: Row | undefined;
  limit: number;
}

/** One page of a list; `last` is true when no page follows. */
export interface Page<T> {
  rows: T[];
  last: boolean;
}

/**
 * Reads a list page by page: `read` answers up to `limit` rows after the given one. A short page is
 * the last; a full one is followed by another read (which may come back empty). `convert` turns a
 * page of rows into what the caller wants (e.g. rows plus a lookup per page); the keyset position is
 * taken from the raw rows.
 */
export async function* pagesOf<Row, T>(
  pageSize: number,
  read: (page: PageRequest<Row>) => Promise<Row[]>,
  convert: (rows: Row[]) => Promise<T[]> | T[],
): AsyncGenerator<Page<T>, void, undefined> {
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError(`page size must be a positive integer, got ${pageSize}`);
  let position: Row | undefined;
  for (;;) {
    const rows = await read({ after: position, limit: pageSize });
    const last = rows.length < pageSize;
    yield { rows: await convert(rows), last };
    if (last) return;
    position = rows[rows.length - 1];
  }
}
