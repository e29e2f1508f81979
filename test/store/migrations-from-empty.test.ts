import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { migrations } from '../../migrations/index.ts';
import { Store } from '../../src/store/database.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';
import { migratedEmbeddedDirectory } from '../helpers/embedded-template.ts';

// Test apps start from a copy of a migrated embedded database (test/helpers/embedded-template.ts);
// here the migrations run from an empty database, on PGlite and on PostgreSQL, and the copy is
// checked to be what they make.

const ALL = migrations.map((migration) => migration.name);

/** The schema as the catalogs describe it: tables and columns, constraints, indexes, triggers, functions. */
async function schemaOf(store: Store): Promise<Record<string, string[]>> {
  const connection = store.orm.em.getConnection();
  const rows = async (sql: string) => ((await connection.execute(sql)) as Array<{ line: string }>).map((row) => row.line);
  return {
    columns: await rows(`select table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') as line
      from information_schema.columns where table_schema = 'public' order by table_name, column_name`),
    constraints: await rows(`select conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) as line
      from pg_constraint where connamespace = 'public'::regnamespace order by 1`),
    indexes: await rows(`select indexdef as line from pg_indexes where schemaname = 'public' order by indexname`),
    triggers: await rows(`select tgrelid::regclass::text || ' ' || tgname as line from pg_trigger where not tgisinternal order by 1`),
    functions: await rows(`select proname || '(' || pg_get_function_identity_arguments(oid) || ')' as line
      from pg_proc where pronamespace = 'public'::regnamespace order by 1`),
  };
}

/** Rows the migrations write (every table but the migration log, whose timestamps differ). */
async function dataOf(store: Store): Promise<Record<string, unknown[]>> {
  const connection = store.orm.em.getConnection();
  const tables = (await connection.execute(
    `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' and table_name <> 'mikro_orm_migrations' order by 1`,
  )) as Array<{ table_name: string }>;
  const data: Record<string, unknown[]> = {};
  for (const { table_name: table } of tables) {
    const content = (await connection.execute(`select * from "${table}"`)) as unknown[];
    if (content.length) data[table] = content;
  }
  return data;
}

async function appliedNames(store: Store): Promise<string[]> {
  const rows = (await store.orm.em.getConnection().execute('select name from mikro_orm_migrations order by id')) as Array<{ name: string }>;
  return rows.map((row) => row.name);
}

t.test('the migrations bring an empty embedded database and an empty PostgreSQL database to the same schema; test apps start from that schema', async (t) => {
  const empty = await Store.open({ embeddedDirectory: 'memory' });
  t.teardown(() => empty.close());
  t.same(await empty.migrate(), ALL, 'PGlite: every migration applied, in order');
  t.same(await empty.migrate(), [], 'PGlite: nothing applied twice');
  const schema = await schemaOf(empty);
  t.ok(schema.columns!.length > 50 && schema.indexes!.length > 20, 'the catalogs describe the schema');
  const data = await dataOf(empty);
  t.same(data, { access_epoch: [{ id: 1, value: '0' }] }, 'the rows the migrations write');

  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const postgres = await Store.open({ databaseUrl: database.url, poolSize: 2 });
  t.teardown(() => postgres.close());
  t.same(await postgres.migrate(), ALL, 'PostgreSQL: every migration applied, in order');
  t.same(await postgres.migrate(), [], 'PostgreSQL: nothing applied twice');
  t.same(await schemaOf(postgres), schema, 'PostgreSQL and PGlite: the same schema');
  t.same(await dataOf(postgres), data);

  // The test apps' starting point (a copy of the template) is the freshly migrated database.
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-migrations-'));
  t.teardown(() => fs.rmSync(parent, { recursive: true, force: true }));
  const copy = await Store.open({ embeddedDirectory: await migratedEmbeddedDirectory(parent) });
  t.teardown(() => copy.close());
  t.same(await appliedNames(copy), ALL, 'the template has every migration recorded');
  t.same(await copy.migrate(), [], 'and none left to apply');
  t.same(await schemaOf(copy), schema, 'the template: the same schema as migrating from empty');
  t.same(await dataOf(copy), data, 'and the same rows');

  // On PostgreSQL, test apps start from a copy of a migrated template database (test/helpers/database.ts).
  const copied = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES, { migrated: true });
  t.teardown(() => copied.drop());
  const postgresCopy = await Store.open({ databaseUrl: copied.url, poolSize: 2 });
  t.teardown(() => postgresCopy.close());
  t.same(await appliedNames(postgresCopy), ALL, 'PostgreSQL template: every migration recorded');
  t.same(await postgresCopy.migrate(), [], 'and none left to apply');
  t.same(await schemaOf(postgresCopy), schema, 'PostgreSQL template: the same schema as migrating from empty');
  t.same(await dataOf(postgresCopy), data, 'and the same rows');
});

t.test('PostgreSQL test databases: empty unless asked for a migrated one; one template, never connected to', async (t) => {
  const server = process.env.TEST_DATABASE_URL || LOCAL_POSTGRES;
  const [first, second, empty] = [
    await createTestDatabase(server, { migrated: true }),
    await createTestDatabase(server, { migrated: true }),
    await createTestDatabase(server),
  ];
  t.teardown(async () => {
    for (const database of [first, second, empty]) await database.drop();
  });
  for (const database of [first, second]) {
    const store = await Store.open({ databaseUrl: database.url, poolSize: 1 });
    t.teardown(() => store.close());
    t.same(await appliedNames(store), ALL, `${new URL(database.url!).pathname}: migrated`);
  }
  const emptyStore = await Store.open({ databaseUrl: empty.url, poolSize: 1 });
  t.teardown(() => emptyStore.close());
  const tables = (await emptyStore.orm.em.getConnection().execute(`select count(*)::int as count from information_schema.tables where table_schema = 'public'`)) as Array<{ count: number }>;
  t.equal(tables[0]!.count, 0, 'a database not asked to be migrated is empty (tests of what a start does to one)');
  const templates = (await emptyStore.orm.em.getConnection().execute(
    `select datname, datistemplate, datallowconn from pg_database where datname like 'kg_test_template_%' and datname not like '%_building'`,
  )) as Array<{ datname: string; datistemplate: boolean; datallowconn: boolean }>;
  t.ok(templates.length >= 1, 'a template exists');
  t.ok(templates.every((template) => template.datistemplate && !template.datallowconn), 'marked a template, and closed to connections');
});
