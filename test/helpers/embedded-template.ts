import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../../src/store/database.ts';
import { contentKey, makeOnce, MIGRATED_SCHEMA_INPUTS, removeStale } from './made-once.ts';

// A fresh embedded database costs PGlite's initdb (over a second of CPU) plus every migration, and
// the suite opens hundreds of them. Tests start instead from a copy of one data directory that the
// real migrations brought up from empty (initdb and migrations run once per suite run and set of
// migrations, by whichever test file comes first). Store.migrate() still runs on the copy (and finds
// nothing to do). The migrations themselves, from an empty database, stay tested:
// test/store/migrations-from-empty.test.ts (PGlite and PostgreSQL), test/store/embedded.test.ts,
// test/cli/manage.test.ts (db_sync).

/**
 * Where test apps keep their data directories and embedded databases: a memory file system
 * (/dev/shm) where the machine has one, else the temporary directory. There a copy of the template
 * writes nothing to disk and PGlite's fsyncs cost nothing; on a disk, the test files tap runs at once
 * wait on each other's writeback (beside a suite run: copy, start, close and removal 320-350 ms on
 * /dev/shm, 0.8-1.7 s in /tmp on ext4).
 */
export const SCRATCH_DIRECTORY = memoryFileSystem() ?? os.tmpdir();

function memoryFileSystem(): string | undefined {
  try {
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    return fs.statSync('/dev/shm').isDirectory() ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}

let template: Promise<string> | undefined;

/** What makes the embedded template stale: what shapes any migrated database, and the PGlite build. */
export const EMBEDDED_TEMPLATE_INPUTS: readonly string[] = [...MIGRATED_SCHEMA_INPUTS, 'src/store/embedded.ts', 'node_modules/@electric-sql/pglite/package.json'];

/** The migrated template directory, made once per suite run and set of migrations (test/helpers/made-once.ts). */
function migratedTemplate(): Promise<string> {
  template ??= (async () => {
    const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
    const prefix = `kg-test-pglite-${uid}-`;
    const name = `${prefix}${contentKey(EMBEDDED_TEMPLATE_INPUTS)}`;
    const final = path.join(SCRATCH_DIRECTORY, name);
    if (fs.existsSync(path.join(final, 'PG_VERSION'))) return final;
    // Templates of other migration sets, untouched for a day (another worktree may be using a recent one).
    removeStale(SCRATCH_DIRECTORY, prefix, name, 86_400_000);
    await makeOnce(final, async (scratch) => {
      const directory = path.join(scratch, 'pglite');
      const store = await Store.open({ embeddedDirectory: directory });
      try {
        await store.migrate();
      } finally {
        await store.close();
      }
      return directory;
    });
    return final;
  })();
  return template;
}

/**
 * A new embedded database directory under `parent` (which the caller removes), already migrated:
 * a copy of the template. Not embeddedDirectoryOf(parent), so another node on the same DATA_DIR
 * still gets a database of its own, as with an in-memory one.
 */
export async function migratedEmbeddedDirectory(parent: string): Promise<string> {
  const source = await migratedTemplate();
  const target = path.join(parent, 'test-pglite');
  fs.cpSync(source, target, { recursive: true });
  copies.add(target);
  return target;
}

// The callers remove their directory at teardown; a copy (~30 MB) whose teardown never ran to its
// end (an async teardown cut short at exit, a failed close) is removed when the process exits.
const copies = new Set<string>();
process.once('exit', () => {
  for (const copy of copies) fs.rmSync(copy, { recursive: true, force: true });
});
