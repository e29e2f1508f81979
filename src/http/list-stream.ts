import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import type { Page } from '../store/keyset.ts';
import { collectionLinks } from './links.ts';

/** A `many(key, Entity)` response schema: `{"<key>": [entities], "links": {...}}`. */
interface ListSchema {
  properties: Record<string, TSchema & { items?: TSchema }>;
}

type ListBody<K extends string, E> = { [P in K]: E[] } & { links: ReturnType<typeof collectionLinks> };

/**
 * The most characters a written piece of a streamed list holds. A page's JSON in one string could
 * pass V8's large-object size (128 KiB: ~400 role assignments), and a large object still alive at
 * a young-generation collection is promoted whole: the effective role assignment list of 100k
 * grants filled the old generation with such pages, 7 mark-compacts instead of 2 (bench/README.md).
 */
export const LIST_PIECE_CHARS = 32 * 1024;

/** Serializers compiled per list schema (fastify caches its own per route context; these are shared). */
const serializers = new WeakMap<ListSchema, { item: (value: unknown) => string; links: (value: unknown) => string }>();

/**
 * Answers a Keystone collection (`{"<key>": [...], "links": {...}}`, the whole list: Keystone does
 * not paginate) that is read in pages. A list that fits in its first page is returned as the body
 * object, serialized by fastify with the route's response schema as any other. A longer one is
 * written page by page: only one page of rows and its JSON are held at a time, each page is read
 * when the client has taken the one before (backpressure), and the bytes are those fastify would
 * have produced for the whole list (each entity serialized with the same schema, in the same order,
 * then the same links). A failure after the first page can only cut the connection (the status
 * is sent), as for any streamed body; the client sees a truncated, invalid JSON body.
 *
 * `schema` must be the route's 200 response schema; `render` turns a page of rows into entities.
 */
export async function sendList<K extends string, T, E>(
  request: FastifyRequest,
  reply: FastifyReply,
  key: K,
  schema: ListSchema,
  pages: AsyncGenerator<Page<T>, void, undefined>,
  render: (rows: T[]) => E[] | Promise<E[]>,
): Promise<ListBody<K, E> | FastifyReply> {
  const links = collectionLinks(request);
  let first: Page<T> | undefined;
  try {
    first = (await pages.next()).value ?? { rows: [], last: true };
  } catch (error) {
    await pages.return(undefined);
    throw error;
  }
  const entities = await render(first.rows);
  if (first.last) return { [key]: entities, links } as ListBody<K, E>;

  let serialize = serializers.get(schema);
  if (!serialize) {
    const itemSchema = schema.properties[key]?.items;
    const linksSchema = schema.properties.links;
    if (!itemSchema || !linksSchema) throw new Error(`sendList: the response schema has no '${key}' array or links`);
    serialize = {
      item: reply.compileSerializationSchema(itemSchema as Record<string, unknown>) as (value: unknown) => string,
      links: reply.compileSerializationSchema(linksSchema as Record<string, unknown>) as (value: unknown) => string,
    };
    serializers.set(schema, serialize);
  }
  const { item, links: serializeLinks } = serialize;
  let written = 0;
  /** A page's entities as JSON, in pieces of about LIST_PIECE_CHARS. */
  function* pieces(page: E[]): Generator<string, void, undefined> {
    let text = '';
    for (const entity of page) {
      text += (written++ ? ',' : '') + item(entity);
      if (text.length >= LIST_PIECE_CHARS) {
        yield text;
        text = '';
      }
    }
    if (text) yield text;
  }
  async function* body(): AsyncGenerator<string, void, undefined> {
    try {
      yield `{${JSON.stringify(key)}:[`;
      yield* pieces(entities);
      for await (const page of pages) yield* pieces(await render(page.rows));
      yield `],"links":${serializeLinks(links)}}`;
    } catch (error) {
      request.log.error({ err: error }, 'a streamed list failed after its first page: the response is cut short');
      throw error;
    } finally {
      await pages.return(undefined);
    }
  }
  // One chunk (page) ahead at most: the next page is read while the socket sends this one.
  return reply.type('application/json; charset=utf-8').send(Readable.from(body(), { highWaterMark: 1 }));
}
