import { Store } from '../../src/store/database.ts';
import { createTestDatabase } from './database.ts';

/**
 * A migrated Store on a new database (embedded in memory, or a fresh PostgreSQL database when the
 * suite runs on one), closed and dropped at `t`'s teardown: services built on it without an app.
 */
export async function openTestStore(t: { teardown(fn: () => unknown): void }): Promise<Store> {
  const database = await createTestDatabase();
  const store = await Store.open({ databaseUrl: database.url, embeddedDirectory: 'memory' });
  t.teardown(async () => {
    await store.close();
    await database.drop();
  });
  await store.migrate();
  return store;
}
