import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { MikroORM, type Options } from '@mikro-orm/core';
import { PostgreSqlDriver, PostgreSqlKnexDialect, type EntityManager } from '@mikro-orm/postgresql';
import { allEntities } from './entities.ts';
import { startEmbeddedPostgres, type EmbeddedMemoryPool, type EmbeddedPostgres } from './embedded.ts';
import { DatabaseHealth } from './database-health.ts';
import { runningDeadline, withRunningConnectDeadline } from './connect-deadline.ts';
import { TableWriteRecorder, type TableWrites } from './table-writes.ts';
import { DatabaseUnreachableError, databaseUnreachableReason, isDatabaseBusy } from './unavailable.ts';

export type { EntityManager } from '@mikro-orm/postgresql';
export type { TableWrites, WriteKind } from './table-writes.ts';

/** After a commit: the transaction's entity manager and what it wrote (undefined: not known, assume anything). */
export type CommitListener = (transaction: EntityManager, writes?: TableWrites) => void;

/** The knex transaction under an entity manager's transaction: it reports each statement it sends. */
interface QueryEvents {
  on(event: 'query', listener: (query: { sql?: unknown }) => void): unknown;
  off(event: 'query', listener: (query: { sql?: unknown }) => void): unknown;
}

export interface StoreOptions {
  /** postgres://… to use PostgreSQL; absent to use the embedded PGlite database. */
  databaseUrl?: string | undefined;
  /** Where the embedded database lives; 'memory' keeps it in memory (tests). */
  embeddedDirectory?: string | 'memory';
  /** Memories the embedded database runs in, reused after close (a process that opens many: tests). */
  embeddedMemoryPool?: EmbeddedMemoryPool;
  poolSize?: number;
  /** Opening a connection (TCP, TLS, authentication) may take this long (PostgreSQL only). */
  connectTimeoutMs?: number;
  /** A query waits this long for a free pooled connection, then fails. */
  acquireTimeoutMs?: number;
  /** A connection that sent a query and heard nothing back for this long is dropped (PostgreSQL only). */
  queryTimeoutMs?: number;
}

/** Defaults of the StoreOptions bounds (config.ts documents them as DATABASE_*_TIMEOUT_MS). */
export const DATABASE_TIMEOUT_DEFAULTS = { connectTimeoutMs: 3000, acquireTimeoutMs: 5000, queryTimeoutMs: 5000 };

/**
 * A partition (as opposed to a server that is down) does not end TCP connections: a query sent on
 * one would wait forever. A connection that wrote a query and has read nothing since for `timeoutMs`
 * is destroyed, which fails the query and makes the pool replace the connection.
 *
 * The socket's idle timer wakes the check, but does not decide it: after the event loop was held up,
 * a write refreshes that timer from the loop's stale clock, and it fired milliseconds after a query
 * went out (measured: 19 ms after the write, 5.3 s after the last read, in a test whose client ran
 * a 3.5 s synchronous task in-process). So the time the oldest unanswered write went out is kept, and
 * only `timeoutMs` of silence since then counts; an earlier wake-up waits out the rest.
 */
function dropSilentConnection(client: unknown, timeoutMs: number, paused: () => boolean, timedOut: (reason: string) => void): void {
  // pg's Client keeps its socket (the TLS one once encrypted) on connection.stream.
  const stream = (client as { connection?: { stream?: unknown } } | undefined)?.connection?.stream;
  if (!(stream instanceof net.Socket) || timeoutMs <= 0) return;
  /** When the oldest write not followed by any read went out (performance.now()), if one did. */
  let unansweredSince: number | undefined;
  const write = stream.write;
  // pg sends every message through stream.write; this socket's own property, nobody else's.
  stream.write = function (this: net.Socket, ...args: unknown[]) {
    unansweredSince ??= performance.now();
    return (write as (...args: unknown[]) => boolean).apply(this, args);
  } as net.Socket['write'];
  stream.on('data', () => {
    unansweredSince = undefined;
  });
  const check = () => {
    // Decided after this turn's pending reads: when the event loop was held up, the timer runs
    // before the answer that arrived meanwhile is read, and a live connection would be dropped.
    setImmediate(() => {
      if (stream.destroyed || unansweredSince === undefined || paused()) return;
      const silentMs = performance.now() - unansweredSince;
      if (silentMs < timeoutMs) {
        setTimeout(check, timeoutMs - silentMs).unref();
        return;
      }
      const reason = `database read timeout: no answer from PostgreSQL in ${timeoutMs} ms`;
      timedOut(reason);
      stream.destroy(new Error(reason));
    });
  };
  stream.setTimeout(timeoutMs);
  stream.on('timeout', check);
}

/**
 * Session settings of every PostgreSQL connection. A statement waiting on a lock gets an error
 * (55P03, a 503) well within the query timeout: a busy row is no silence, so no partition. And a
 * session left idle inside a transaction (its node cut off mid-transaction) is ended by the server,
 * releasing its locks for the other nodes.
 */
function sessionTimeouts(queryTimeoutMs: number): string {
  const lockTimeoutMs = Math.max(1, Math.floor(queryTimeoutMs / 2));
  return `-c lock_timeout=${lockTimeoutMs} -c idle_in_transaction_session_timeout=${2 * queryTimeoutMs}`;
}

/** The database behind every service: an ORM, a transaction helper and the embedded server if any. */
export class Store {
  private constructor(
    readonly orm: MikroORM<PostgreSqlDriver>,
    private readonly embedded: EmbeddedPostgres | undefined,
    readonly kind: 'postgresql' | 'pglite',
    /** While set, slow answers are expected (migrations) and connections are not dropped for them. */
    private readonly slowQueries: { allowed: boolean },
    /** Whether the database can be reached (PostgreSQL; the embedded one always can). */
    readonly health: DatabaseHealth,
    private readonly probe: DatabaseProbe,
  ) {}

  static async open(options: StoreOptions): Promise<Store> {
    let embedded: EmbeddedPostgres | undefined;
    let clientUrl = options.databaseUrl;
    if (!clientUrl) {
      embedded = await startEmbeddedPostgres(options.embeddedDirectory ?? 'memory', options.embeddedMemoryPool ? { memoryPool: options.embeddedMemoryPool } : {});
      clientUrl = embedded.url;
    }
    const slowQueries = { allowed: false };
    const queryTimeoutMs = options.queryTimeoutMs ?? DATABASE_TIMEOUT_DEFAULTS.queryTimeoutMs;
    // Assigned below, once the ORM exists; the pool only calls back after that.
    let health: DatabaseHealth | undefined;
    const config: Options<PostgreSqlDriver> = {
      driver: PostgreSqlDriver,
      clientUrl,
      entities: allEntities,
      // PGlite is a single session: more than one connection would interleave transactions.
      // With PostgreSQL unreachable, a request fails within these bounds (then 503) instead of
      // waiting; connections that broke are dropped by the pool and new ones opened when it is back.
      pool: {
        min: 0,
        max: embedded ? 1 : (options.poolSize ?? 10),
        acquireTimeoutMillis: options.acquireTimeoutMs ?? DATABASE_TIMEOUT_DEFAULTS.acquireTimeoutMs,
        propagateCreateError: true,
        afterCreate: (client: unknown, done: (error: Error | null, client: unknown) => void) => {
          if (!embedded) dropSilentConnection(client, queryTimeoutMs, () => slowQueries.allowed, (reason) => health?.suspect(reason));
          done(null, client);
        },
      },
      driverOptions: embedded
        ? {}
        : {
            client: RunningDeadlinePostgresDialect,
            connection: {
              connectionTimeoutMillis: options.connectTimeoutMs ?? DATABASE_TIMEOUT_DEFAULTS.connectTimeoutMs,
              keepAlive: true,
              ...(queryTimeoutMs > 0 ? { options: sessionTimeouts(queryTimeoutMs) } : {}),
            },
          },
      // migrationsList is given by migrate(), which loads the migrations with the migrator: go
      // through migrate(), not orm.migrator (MikroORM would build one without the list).
      migrations: {
        transactional: true,
        allOrNothing: true,
        tableName: 'mikro_orm_migrations',
        snapshot: false,
        silent: true,
      },
      discovery: { warnWhenNoEntities: false },
      allowGlobalContext: false,
      forceUtcTimezone: true,
      debug: false,
    };
    let orm: MikroORM<PostgreSqlDriver>;
    try {
      orm = await MikroORM.init(config);
    } catch (error) {
      await embedded?.close();
      throw error;
    }
    // The probe runs at least every second (every query timeout when shorter) and must connect and
    // answer within that interval: an idle node is not ready at most two intervals into a
    // partition, and ready again about one interval after it (the probe under way on a dead connection
    // gives up after one, and the next starts at once).
    const probeIntervalMs = Math.min(queryTimeoutMs > 0 ? queryTimeoutMs : DATABASE_TIMEOUT_DEFAULTS.queryTimeoutMs, 1000);
    const probe = new DatabaseProbe(orm, probeIntervalMs);
    health = new DatabaseHealth((timeoutMs) => probe.run(timeoutMs), { probeIntervalMs });
    if (!embedded) {
      guardConnections(orm, health, () => slowQueries.allowed);
    }
    return new Store(orm, embedded, embedded ? 'pglite' : 'postgresql', slowQueries, health, probe);
  }

  /** Starts watching the database (PostgreSQL only: the embedded one cannot be cut off). */
  watchHealth(): void {
    if (this.kind === 'postgresql') this.health.start();
  }

  async migrate(): Promise<string[]> {
    // A migration may rewrite a big table: its statements are not held to the query timeout.
    this.slowQueries.allowed = true;
    try {
      // Loaded here, not at start: a cluster worker never migrates, and the migrator (umzug and its
      // command line) is ~4 MB of heap that would stay in every worker (bench/README.md, memory).
      const [{ Migrator }, { migrations }] = await Promise.all([import('@mikro-orm/migrations'), import('../../migrations/index.ts')]);
      this.orm.config.set('migrations', { ...this.orm.config.get('migrations'), migrationsList: migrations });
      const applied = await new Migrator(this.orm.em).up();
      return applied.map((migration) => migration.name);
    } finally {
      this.slowQueries.allowed = false;
    }
  }

  /** A fresh unit of work for reads. */
  reader(): EntityManager {
    return this.orm.em.fork({ clear: true }) as EntityManager;
  }

  /** Runs `work` in one database transaction: everything it writes lands, or nothing does. */
  async transaction<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    let transaction: EntityManager | undefined;
    let failure: { error: unknown } | undefined;
    let result: T;
    const writes = new TableWriteRecorder();
    try {
      result = await this.reader().transactional(async (em) => {
        transaction = em as EntityManager;
        // Every statement of the transaction (savepoints' too) passes here: what it wrote, for the listeners.
        const context = transaction.getTransactionContext<Partial<QueryEvents>>();
        const record = (query: { sql?: unknown }) => {
          if (typeof query.sql === 'string') writes.record(query.sql);
          else writes.unknown = true;
        };
        // Statements that cannot be heard: anything may have been written.
        if (typeof context?.on === 'function') context.on('query', record);
        else writes.unknown = true;
        try {
          const done = await work(transaction);
          // MikroORM flushes what `work` left unflushed after this callback: flushed here, its
          // statements are heard too (else a change made only in the identity map would commit
          // with no topic raised).
          await transaction.flush();
          return done;
        } catch (error) {
          failure = { error };
          throw error;
        } finally {
          context?.off?.('query', record);
        }
      });
    } catch (error) {
      // When the connection broke, the rollback's own error ("Transaction query already
      // complete") replaces the cause: callers are told the cause.
      throw failure ? failure.error : error;
    }
    for (const listener of this.commitListeners) listener(transaction!, writes);
    return result;
  }

  /**
   * Called after every committed transaction, with the entity manager the work ran in (what was
   * recorded in it, e.g. a revocation event, can be looked up by it) and the tables it wrote:
   * caches drop what they hold of those.
   */
  onCommit(listener: CommitListener): void {
    this.commitListeners.push(listener);
  }

  private readonly commitListeners: CommitListener[] = [];

  async ping(): Promise<void> {
    await this.orm.em.getConnection().execute('select 1');
  }

  async close(): Promise<void> {
    this.health.stop();
    this.probe.close();
    await this.orm.close(true);
    await this.embedded?.close();
  }
}

interface KnexClient {
  acquireConnection(): Promise<unknown>;
  acquireRawConnection(): Promise<PgConnection>;
  /** The pg module knex opens connections with (`new driver.Client(settings)`). */
  driver: { Client: Parameters<typeof withRunningConnectDeadline>[0] };
}

/**
 * knex's PostgreSQL client whose connections (the pool's, the probe's, and the one the ORM opens
 * while it starts) count their connect timeout in time the event loop ran, not wall time
 * (connect-deadline.ts says why). Given to knex as its client, so no connection is opened before
 * it applies; only this ORM's knex sees it: its driver inherits from the pg module, with another Client.
 */
class RunningDeadlinePostgresDialect extends PostgreSqlKnexDialect {
  _driver(): KnexClient['driver'] {
    const pg = (PostgreSqlKnexDialect.prototype as unknown as { _driver(): KnexClient['driver'] })._driver.call(this);
    return Object.create(pg, { Client: { value: withRunningConnectDeadline(pg.Client) } }) as KnexClient['driver'];
  }
}

interface PgConnection {
  query(sql: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): void;
  connection?: { stream?: unknown };
}

/**
 * Every pooled query and transaction asks the knex client for a connection: while the database is
 * known unreachable it is refused at once (no wait on a pool of dead ends), while the probe decides a
 * suspicion it waits for the verdict, and a connection that could not be opened sets the probe off.
 * Migrations (slow queries allowed) are left be.
 */
function guardConnections(orm: MikroORM<PostgreSqlDriver>, health: DatabaseHealth, migrating: () => boolean): void {
  const client = orm.em.getConnection().getKnex().client as KnexClient;
  const acquire = client.acquireConnection.bind(client);
  client.acquireConnection = (): Promise<unknown> => {
    const verdict = migrating() ? undefined : health.pendingVerdict;
    if (verdict) return verdict.then(() => client.acquireConnection());
    if (!health.reachable && !migrating()) return Promise.reject(new DatabaseUnreachableError());
    return acquire().catch((error: unknown) => {
      // A full pool (KnexTimeoutError) is load, not a partition.
      // Nor is a server that refuses more sessions (53300): it answered.
      const reason = databaseUnreachableReason(error);
      if (reason && (error as { name?: unknown }).name !== 'KnexTimeoutError' && !isDatabaseBusy(error)) health.suspect(reason);
      throw error;
    });
  };
}

/**
 * The health probe: `select 1` on a connection of its own (outside the pool, which may be full of
 * queries waiting out a partition), opened and answered within the probe interval, else dropped
 * (the next run opens a new one).
 */
class DatabaseProbe {
  private connection: PgConnection | undefined;
  private closed = false;

  constructor(
    private readonly orm: MikroORM<PostgreSqlDriver>,
    private readonly timeoutMs: number,
  ) {}

  async run(timeoutMs = this.timeoutMs): Promise<void> {
    if (this.closed) return;
    let cancel: (() => void) | undefined;
    let timedOut = false;
    const deadline = new Promise<never>((_resolve, reject) => {
      // Counted in time this process ran (an opening held up mid-way still has round trips to make),
      // and decided after the I/O of that loop turn: an answer that arrived meanwhile counts.
      cancel = runningDeadline(timeoutMs, () =>
        setImmediate(() => {
          timedOut = true;
          reject(new Error(`database read timeout: no answer from PostgreSQL in ${timeoutMs} ms`));
        }),
      );
    });
    deadline.catch(() => {});
    try {
      if (!this.connection) {
        const client = this.orm.em.getConnection().getKnex().client as KnexClient;
        const opening = client.acquireRawConnection().then((connection) => {
          connection.on('error', () => {});
          // Too late (or closed meanwhile): the next run opens its own.
          if (this.closed || timedOut) {
            drop(connection);
            throw new Error('probe connection opened too late');
          }
          return connection;
        });
        opening.catch(() => {});
        this.connection = await Promise.race([opening, deadline]);
      }
      const answered = this.connection.query('select 1');
      answered.catch(() => {});
      await Promise.race([answered, deadline]);
    } catch (error) {
      if (this.connection) drop(this.connection);
      this.connection = undefined;
      throw error;
    } finally {
      cancel?.();
    }
  }

  close(): void {
    this.closed = true;
    if (this.connection) drop(this.connection);
    this.connection = undefined;
  }
}

/** Ends a connection without waiting on a server that may never answer. */
function drop(connection: PgConnection): void {
  const stream = connection.connection?.stream;
  if (stream instanceof net.Socket) stream.destroy();
  else connection.end().catch(() => {});
}

/** Where the embedded database of a data directory lives. */
export function embeddedDirectoryOf(dataDir: string): string {
  return path.join(dataDir, 'pglite');
}

export function ensureDirectory(directory: string): void {
  fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
}
