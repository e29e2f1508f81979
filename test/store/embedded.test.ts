import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store } from '../../src/store/database.ts';
import { DataDirectoryLockedError, startEmbeddedPostgres } from '../../src/store/embedded.ts';

t.test('one process per embedded database directory', async (t) => {
  const directory = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kg-lock-')), 'pglite');
  t.teardown(() => fs.rmSync(path.dirname(directory), { recursive: true, force: true }));
  const first = await startEmbeddedPostgres(directory);
  t.ok(fs.existsSync(`${directory}.lock`));
  t.equal(fs.readFileSync(`${directory}.lock`, 'utf8'), String(process.pid));

  // Another live process holds it: a clear error naming that process.
  fs.writeFileSync(`${directory}.lock`, String(process.ppid));
  await t.rejects(startEmbeddedPostgres(directory), DataDirectoryLockedError);
  await t.rejects(startEmbeddedPostgres(directory), { message: new RegExp(`in use by process ${process.ppid}`) });
  fs.writeFileSync(`${directory}.lock`, String(process.pid));
  await first.close();
  t.notOk(fs.existsSync(`${directory}.lock`), 'released on close');

  // A lock left by a dead process is taken over, and the data survives a restart.
  fs.writeFileSync(`${directory}.lock`, '999999999');
  const store = await Store.open({ embeddedDirectory: directory });
  await store.migrate();
  await store.orm.em.getConnection().execute("insert into region (id) values ('kept')");
  await store.close();
  const reopened = await Store.open({ embeddedDirectory: directory });
  t.same(await reopened.migrate(), [], 'migrations are not applied twice');
  const rows = await reopened.orm.em.getConnection().execute('select id from region');
  t.same(rows, [{ id: 'kept' }]);
  await reopened.close();
});
