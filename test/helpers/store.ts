import fs from 'node:fs';
import path from 'node:path';
import { Store } from '../../src/store/database.ts';
import { createTestDatabase } from './database.ts';
import { migratedEmbeddedDirectory, SCRATCH_DIRECTORY } from './embedded-template.ts';

/**
 * A migrated Store on a new database (embedded: a copy of the migrated template, test/helpers/embedded-template.ts;
 * or a copy of a migrated PostgreSQL template when the suite runs on one, test/helpers/database.ts), closed and dropped at `t`'s teardown:
 * services built on it without an app.
 */
export async function openTestStore(t: { teardown(fn: () => unknown): void }): Promise<Store> {
  const database = await createTestDatabase(undefined, { migrated: true });
  const parent = database.url ? undefined : fs.mkdtempSync(path.join(SCRATCH_DIRECTORY, 'kg-store-'));
  const store = await Store.open({ databaseUrl: database.url, embeddedDirectory: parent ? await migratedEmbeddedDirectory(parent) : 'memory' });
  t.teardown(async () => {
    await store.close();
    await database.drop();
    if (parent) fs.rmSync(parent, { recursive: true, force: true });
  });
  await store.migrate();
  return store;
}
