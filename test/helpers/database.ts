import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { contentKey, MIGRATED_SCHEMA_INPUTS } from './made-once.ts';

/**
 * A new database for one test file when the suite runs against PostgreSQL (TEST_DATABASE_URL or
 * DATABASE_URL points at the server): empty, or a copy of a migrated template (createTestDatabase's
 * `migrated`); undefined means "use embedded PGlite".
 */
export interface TestDatabase {
  url: string | undefined;
  drop(): Promise<void>;
}

export const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * `server` forces PostgreSQL (tests of several processes need a shared database). `migrated`: a copy
 * of a database the migrations have already run on (a template, below), for a caller that would
 * migrate it first thing (test apps, test stores); tests of what a start does to an empty database
 * leave it out.
 */
export async function createTestDatabase(
  server: string | undefined = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL,
  options: { migrated?: boolean } = {},
): Promise<TestDatabase> {
  if (!server) return { url: undefined, drop: async () => {} };
  const name = `kg_test_${randomBytes(6).toString('hex')}`;
  const template = options.migrated ? await migratedTemplate(server) : undefined;
  const admin = adminUrl(server);
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`create database ${name}${template ? ` template ${template}` : ''}`);
  } finally {
    await client.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: admin });
      await dropper.connect();
      try {
        await dropper.query(`drop database if exists ${name} with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

function adminUrl(server: string): string {
  const admin = new URL(server);
  admin.pathname = '/postgres';
  return admin.toString();
}

// Migrating a new database takes 0.3-1 s of a test app's start on PostgreSQL, and the suite starts
// hundreds; a database made from a template costs what an empty one does (~0.1 s: PostgreSQL 15
// copies the template's blocks). The template is made once per server and set of migrations, by
// whichever test file needs it first (the others wait on an advisory lock), named by what made it:
// `kg_test_template_<hash>`, never connected to once made (CREATE DATABASE … TEMPLATE needs that),
// and dropped by the next template's maker once a day old. The migrations themselves, from an empty
// database, stay tested: test/store/migrations-from-empty.test.ts, and every process test whose
// service migrates its own database at start.

const TEMPLATE_PREFIX = 'kg_test_template_';
/** pg_advisory_lock's key for making a template (any constant the suite uses for nothing else). */
const TEMPLATE_LOCK = 7_364_021_913;

const templates = new Map<string, Promise<string>>();

function migratedTemplate(server: string): Promise<string> {
  const admin = adminUrl(server);
  let template = templates.get(admin);
  if (!template) {
    template = makeTemplate(server, admin);
    templates.set(admin, template);
    // A failed attempt is not kept: the next caller tries again (and sees the error itself).
    template.catch(() => templates.delete(admin));
  }
  return template;
}

async function makeTemplate(server: string, admin: string): Promise<string> {
  const name = `${TEMPLATE_PREFIX}${contentKey(MIGRATED_SCHEMA_INPUTS)}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [TEMPLATE_LOCK]);
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (rowCount) return name;
    const building = `${name}_building`;
    // Left by a maker that died half-way.
    await client.query(`drop database if exists ${building} with (force)`);
    await client.query(`create database ${building}`);
    const url = new URL(server);
    url.pathname = `/${building}`;
    // Loaded here: a suite on the embedded database never makes one.
    const { Store } = await import('../../src/store/database.ts');
    const store = await Store.open({ databaseUrl: url.toString() });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    await client.query(`alter database ${building} rename to ${name}`);
    // No connection, autovacuum's included, can then hold up a copy.
    await client.query(`alter database ${name} with is_template true allow_connections false`);
    await client.query(`comment on database ${name} is '${new Date().toISOString()}'`);
    await dropStaleTemplates(client, name);
    return name;
  } finally {
    await client.query('select pg_advisory_unlock($1)', [TEMPLATE_LOCK]).catch(() => undefined);
    await client.end();
  }
}

/** Templates of other migration sets, made over a day ago (another checkout may use a recent one). */
async function dropStaleTemplates(client: pg.Client, current: string): Promise<void> {
  const { rows } = await client.query<{ datname: string; made: string | null }>(
    `select datname, shobj_description(oid, 'pg_database') as made from pg_database where datname like '${TEMPLATE_PREFIX}%' and datname <> $1`,
    [current],
  );
  for (const { datname, made } of rows) {
    if (datname.endsWith('_building') || !made || Date.now() - Date.parse(made) < 86_400_000) continue;
    await client.query(`alter database ${datname} with is_template false`);
    await client.query(`drop database if exists ${datname} with (force)`);
  }
}
