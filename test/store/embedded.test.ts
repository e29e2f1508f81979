import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store } from '../../src/store/database.ts';
import { DataDirectoryLockedError, EmbeddedMemoryPool, startEmbeddedPostgres } from '../../src/store/embedded.ts';

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

t.test('a memory pool: the next database runs in the memory a closed one ran in, zeroed', async (t) => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-memory-pool-'));
  t.teardown(() => fs.rmSync(parent, { recursive: true, force: true }));
  const given: WebAssembly.Memory[] = [];
  const taken: WebAssembly.Memory[] = [];
  class WatchedPool extends EmbeddedMemoryPool {
    override take() {
      const memory = super.take();
      taken.push(memory);
      return memory;
    }
    override give(memory: WebAssembly.Memory) {
      given.push(memory);
      super.give(memory);
    }
  }
  const pool = new WatchedPool();

  const first = await Store.open({ embeddedDirectory: path.join(parent, 'first'), embeddedMemoryPool: pool });
  await first.migrate();
  await first.orm.em.getConnection().execute("insert into region (id) values ('only-in-the-first')");
  await first.close();
  t.equal(given.length, 1, 'the closed database gave its memory back');
  t.ok(given[0]!.buffer.byteLength > 100 << 20, `PGlite ran in it (grown to ${given[0]!.buffer.byteLength >> 20} MB from 16)`);

  const second = await Store.open({ embeddedDirectory: path.join(parent, 'second'), embeddedMemoryPool: pool });
  t.equal(taken.at(-1), given[0], 'the next database took the same memory');
  await second.migrate();
  t.same(await second.orm.em.getConnection().execute('select id from region'), [], "nothing of the first database's");
  await second.orm.em.getConnection().execute("insert into region (id) values ('second')");
  t.same(await second.orm.em.getConnection().execute('select id from region'), [{ id: 'second' }]);

  // Two open at once: the second start finds the pool empty and gets a memory of its own.
  const third = await Store.open({ embeddedDirectory: path.join(parent, 'third'), embeddedMemoryPool: pool });
  t.not(taken.at(-1), given[0], 'a database still open keeps its memory');
  await third.close();
  await second.close();
  t.equal(given.length, 3);
});

t.test('a memory taken from the pool is zeroed', async (t) => {
  const pool = new EmbeddedMemoryPool();
  const memory = pool.take();
  memory.grow(16);
  new Uint8Array(memory.buffer).fill(7);
  pool.give(memory);
  const again = pool.take();
  t.equal(again, memory);
  t.equal(new Uint8Array(again.buffer).findIndex((byte) => byte !== 0), -1, `all ${again.buffer.byteLength} bytes zero`);
  t.not(pool.take(), memory, 'an empty pool makes a new one');
});
