import t from 'tap';
import { Store } from '../../src/store/database.ts';
import { createTestDatabase } from '../helpers/database.ts';

// GET /v3/users and /v3/projects read keyset pages in (name, id) order (src/store/keyset.ts): with the
// list-order indexes, a page is an index range read, not a sort of the whole table per page.

t.test('a keyset page of users or projects is read in index order, without sorting the table', async (t) => {
  const database = await createTestDatabase();
  const store = await Store.open({ databaseUrl: database.url });
  t.teardown(async () => {
    await store.close();
    await database.drop();
  });
  await store.migrate();
  const planOf = (sql: string) =>
    store.transaction(async (em) => {
      // On a few rows any plan is a scan and a sort: ask what the indexes allow (a sort still
      // appears, at a prohibitive cost, when no index gives the order).
      for (const setting of ['enable_seqscan', 'enable_bitmapscan', 'enable_sort']) await em.execute(`set local ${setting} = off`);
      const rows = (await em.execute(`explain ${sql}`)) as { 'QUERY PLAN': string }[];
      return rows.map((row) => row['QUERY PLAN']).join('\n');
    });
  for (const [table, index] of [
    ['identity_user', 'user_by_name'],
    ['project', 'project_by_name'],
  ] as const) {
    const first = await planOf(`select * from ${table} order by name asc, id asc limit 1000`);
    t.match(first, new RegExp(`Index Scan using ${index}`), `${table}: the first page reads ${index}`);
    t.notMatch(first, /Sort/, `${table}: the first page is not sorted`);
    const next = await planOf(`select * from ${table} where (name, id) > ('m', 'x') order by name asc, id asc limit 1000`);
    t.match(next, new RegExp(`Index (Only )?Scan using ${index}`), `${table}: a later page seeks ${index}`);
    t.notMatch(next, /Sort/, `${table}: a later page is not sorted`);
  }
});
