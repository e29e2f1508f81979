import fs from 'node:fs';
import path from 'node:path';
import { MikroORM, type Options } from '@mikro-orm/core';
import { PostgreSqlDriver, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { migrations } from '../../migrations/index.ts';
import { allEntities } from './entities.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.ts';

export type { EntityManager } from '@mikro-orm/postgresql';

export interface StoreOptions {
  /** postgres://… to use PostgreSQL; absent to use the embedded PGlite database. */
  databaseUrl?: string | undefined;
  /** Where the embedded database lives; 'memory' keeps it in memory (tests). */
  embeddedDirectory?: string | 'memory';
  poolSize?: number;
}

/** The database behind every service: an ORM, a transaction helper and the embedded server if any. */
export class Store {
  private constructor(
    readonly orm: MikroORM<PostgreSqlDriver>,
    private readonly embedded: EmbeddedPostgres | undefined,
    readonly kind: 'postgresql' | 'pglite',
  ) {}

  static async open(options: StoreOptions): Promise<Store> {
    let embedded: EmbeddedPostgres | undefined;
    let clientUrl = options.databaseUrl;
    if (!clientUrl) {
      embedded = await startEmbeddedPostgres(options.embeddedDirectory ?? 'memory');
      clientUrl = embedded.url;
    }
    const config: Options<PostgreSqlDriver> = {
      driver: PostgreSqlDriver,
      clientUrl,
      entities: allEntities,
      extensions: [Migrator],
      // PGlite is a single session: more than one connection would interleave transactions.
      pool: { min: 0, max: embedded ? 1 : (options.poolSize ?? 10), acquireTimeoutMillis: 15_000 },
      migrations: {
        migrationsList: migrations,
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
    return new Store(orm, embedded, embedded ? 'pglite' : 'postgresql');
  }

  async migrate(): Promise<string[]> {
    const applied = await this.orm.getMigrator().up();
    return applied.map((migration) => migration.name);
  }

  /** A fresh unit of work for reads. */
  reader(): EntityManager {
    return this.orm.em.fork({ clear: true }) as EntityManager;
  }

  /** Runs `work` in one database transaction: everything it writes lands, or nothing does. */
  async transaction<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    const result = await this.reader().transactional((em) => work(em as EntityManager));
    for (const listener of this.commitListeners) listener();
    return result;
  }

  /** Called after every committed transaction: caches derived from the data drop what they hold. */
  onCommit(listener: () => void): void {
    this.commitListeners.push(listener);
  }

  private readonly commitListeners: (() => void)[] = [];

  async ping(): Promise<void> {
    await this.orm.em.getConnection().execute('select 1');
  }

  async close(): Promise<void> {
    await this.orm.close(true);
    await this.embedded?.close();
  }
}

/** Where the embedded database of a data directory lives. */
export function embeddedDirectoryOf(dataDir: string): string {
  return path.join(dataDir, 'pglite');
}

export function ensureDirectory(directory: string): void {
  fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
}
