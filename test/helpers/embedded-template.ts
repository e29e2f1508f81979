import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Store } from '../../src/store/database.ts';
import { ROOT } from './processes.ts';

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

/** What makes a template stale: the migrations and the PGlite build. */
function templateKey(): string {
  const hash = createHash('sha256');
  const migrations = path.join(ROOT, 'migrations');
  for (const name of fs.readdirSync(migrations).sort()) {
    hash.update(name).update('\0').update(fs.readFileSync(path.join(migrations, name))).update('\0');
  }
  for (const file of ['src/store/embedded.ts', 'node_modules/@electric-sql/pglite/package.json']) {
    hash.update(fs.readFileSync(path.join(ROOT, file)));
  }
  return hash.digest('hex').slice(0, 16);
}

/** Templates of other migration sets, untouched for a day (another worktree may be using a recent one). */
function removeStaleTemplates(current: string): void {
  const prefix = current.replace(/[0-9a-f]+$/, '');
  for (const name of fs.readdirSync(SCRATCH_DIRECTORY)) {
    if (!name.startsWith(prefix) || name === current) continue;
    const directory = path.join(SCRATCH_DIRECTORY, name);
    try {
      if (Date.now() - fs.statSync(directory).mtimeMs > 86_400_000) fs.rmSync(directory, { recursive: true, force: true });
    } catch {
      // Removed meanwhile by another test file.
    }
  }
}

let template: Promise<string> | undefined;

/** The migrated template directory, made once (atomically: test files run in parallel). */
function migratedTemplate(): Promise<string> {
  template ??= (async () => {
    const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
    const final = path.join(SCRATCH_DIRECTORY, `kg-test-pglite-${uid}-${templateKey()}`);
    if (fs.existsSync(path.join(final, 'PG_VERSION'))) return final;
    removeStaleTemplates(path.basename(final));
    const building = fs.mkdtempSync(`${final}.building-`);
    const directory = path.join(building, 'pglite');
    try {
      const store = await Store.open({ embeddedDirectory: directory });
      try {
        await store.migrate();
      } finally {
        await store.close();
      }
      try {
        fs.renameSync(directory, final);
      } catch (error) {
        // Another test file made it first (same migrations, same content).
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
      }
    } finally {
      fs.rmSync(building, { recursive: true, force: true });
    }
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
