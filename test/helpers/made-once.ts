import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// What the suite makes once and every test file then uses (the embedded template database, the
// bundle processes run): named by a hash of what went into it, made by whichever test file needs it
// first, and moved into place in one rename, since tap runs files at once.

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * What shapes a migrated database, for the templates made from it (test/helpers/embedded-template.ts,
 * test/helpers/database.ts): the migrations, the store that runs them, and the ORM's migrator, which
 * makes its own table (`mikro_orm_migrations`: its columns changed between MikroORM 6 and 7, and a
 * template another checkout made with the other one was taken as current).
 */
export const MIGRATED_SCHEMA_INPUTS: readonly string[] = ['migrations', 'src/store/database.ts', 'node_modules/@mikro-orm/migrations/package.json'];

/** A short hash of what `paths` (files, or directories walked in name order; relative ones in the checkout) hold. */
export function contentKey(paths: readonly string[]): string {
  const hash = createHash('sha256');
  const add = (file: string) => {
    if (fs.statSync(file).isDirectory()) {
      for (const name of fs.readdirSync(file).sort()) add(path.join(file, name));
    } else {
      hash.update(path.relative(ROOT, file)).update('\0').update(fs.readFileSync(file)).update('\0');
    }
  };
  for (const given of paths) add(path.resolve(ROOT, given));
  return hash.digest('hex').slice(0, 16);
}

/**
 * Makes the directory `final` unless it is there: `make` works in a new directory beside it and
 * returns what to move to `final` (that directory or one inside it). Another test file that moved
 * its own there first wins (the same inputs, the same content); what was made here is then removed.
 */
export async function makeOnce(final: string, make: (scratch: string) => Promise<string>): Promise<void> {
  const scratch = fs.mkdtempSync(`${final}.building-`);
  try {
    const made = await make(scratch);
    try {
      fs.renameSync(made, final);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Removes what is named `prefix…` in `parent`, but `current`, untouched for `maxAgeMs` (made from other inputs). */
export function removeStale(parent: string, prefix: string, current: string, maxAgeMs: number): void {
  for (const name of fs.readdirSync(parent)) {
    if (!name.startsWith(prefix) || name === current) continue;
    const directory = path.join(parent, name);
    try {
      if (Date.now() - fs.statSync(directory).mtimeMs > maxAgeMs) fs.rmSync(directory, { recursive: true, force: true });
    } catch {
      // Removed meanwhile by another test file.
    }
  }
}
