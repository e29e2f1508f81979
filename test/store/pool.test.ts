import pg from 'pg';
import t from 'tap';
import { loadConfig } from '../../src/config.ts';
import { Store } from '../../src/store/database.ts';
import { createTestDatabase, LOCAL_POSTGRES } from '../helpers/database.ts';

t.test('DATABASE_POOL_SIZE bounds the connections a process opens', async (t) => {
  const database = await createTestDatabase(process.env.TEST_DATABASE_URL || LOCAL_POSTGRES);
  const config = loadConfig({ DATABASE_URL: database.url!, DATABASE_POOL_SIZE: '1', DATABASE_ACQUIRE_TIMEOUT_MS: '300' });
  const store = await Store.open({ databaseUrl: config.databaseUrl, ...config.database });
  // Another session holds a lock, so the store's one connection waits on it.
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  t.teardown(async () => {
    await holder.end().catch(() => {});
    await store.close();
    await database.drop();
  });
  await holder.query('select pg_advisory_lock(4242)');
  const blocked = store.reader().execute('select pg_advisory_xact_lock(4242)');
  blocked.catch(() => {});

  // With a second connection allowed this would answer; with one it waits for a connection and gives up.
  await t.rejects(store.reader().execute('select 1'), /Timeout acquiring a connection/, 'no second connection is opened');

  await holder.query('select pg_advisory_unlock(4242)');
  await blocked;
  t.same(await store.reader().execute('select 1 as one'), [{ one: 1 }], 'the connection serves again once free');
});
