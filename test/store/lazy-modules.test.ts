import t from 'tap';
import { recordResolvedModules } from '../helpers/resolved-modules.ts';

// What a cluster worker on PostgreSQL loads is what it holds in memory for its whole life (issue 21,
// item 6): the migrator (umzug and its command line), the migrations and PGlite are loaded only by
// the process that needs them. The modules under test are imported after the recording starts.
const loaded = recordResolvedModules();
const MIGRATOR = /node_modules\/(@mikro-orm\/migrations|umzug)\/|\/migrations\/index\.ts$/;
const PGLITE = /node_modules\/@electric-sql\/pglite/;

const { Store } = await import('../../src/store/database.ts');
const { createTestDatabase, LOCAL_POSTGRES } = await import('../helpers/database.ts');

t.test('on PostgreSQL, a store that does not migrate loads neither the migrator nor PGlite', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  t.teardown(() => database.drop());
  const store = await Store.open({ databaseUrl: database.url, poolSize: 1 });
  t.teardown(() => store.close());
  await store.orm.em.getConnection().execute('select 1');
  t.same(loaded(MIGRATOR), [], 'no migrator, no migrations');
  t.same(loaded(PGLITE), [], 'no PGlite');

  t.ok((await store.migrate()).length > 0, 'migrate() applies the migrations');
  t.ok(loaded(MIGRATOR).some((url) => url.includes('@mikro-orm/migrations')), 'migrate() loaded the migrator');
  t.ok(loaded(MIGRATOR).some((url) => url.endsWith('/migrations/index.ts')), 'and the migrations');
  t.same(loaded(PGLITE), [], 'still no PGlite');
});

t.test('the embedded database loads PGlite when it starts', async (t) => {
  const store = await Store.open({ embeddedDirectory: 'memory' });
  t.teardown(() => store.close());
  t.ok(loaded(PGLITE).length > 0, 'PGlite loaded');
});
