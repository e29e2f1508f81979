import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * A fresh, empty database for one test file when the suite runs against PostgreSQL
 * (TEST_DATABASE_URL or DATABASE_URL points at the server); undefined means "use embedded PGlite".
 */
export interface TestDatabase {
  url: string | undefined;
  drop(): Promise<void>;
}

export const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';

/** `server` forces PostgreSQL (tests of several processes need a shared database). */
export async function createTestDatabase(server: string | undefined = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL): Promise<TestDatabase> {
  if (!server) return { url: undefined, drop: async () => {} };
  const name = `kg_test_${randomBytes(6).toString('hex')}`;
  const admin = new URL(server);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`create database ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: admin.toString() });
      await dropper.connect();
      try {
        await dropper.query(`drop database if exists ${name} with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
