import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { contentKey, makeOnce, MIGRATED_SCHEMA_INPUTS, removeStale } from './made-once.ts';

const scratchDirectory = (t: { teardown(fn: () => unknown): void }) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-made-once-'));
  t.teardown(() => fs.rmSync(directory, { recursive: true, force: true }));
  return directory;
};

t.test('contentKey: what the files hold, and their names; directories walked', async (t) => {
  const directory = scratchDirectory(t);
  fs.mkdirSync(path.join(directory, 'inner'));
  fs.writeFileSync(path.join(directory, 'inner', 'a'), 'one');
  fs.writeFileSync(path.join(directory, 'b'), 'two');
  const key = contentKey([directory]);
  t.match(key, /^[0-9a-f]{16}$/);
  t.equal(contentKey([directory]), key, 'the same content, the same key');
  fs.writeFileSync(path.join(directory, 'inner', 'a'), 'One');
  const changed = contentKey([directory]);
  t.not(changed, key, 'a file inside changed');
  fs.renameSync(path.join(directory, 'b'), path.join(directory, 'c'));
  t.not(contentKey([directory]), changed, 'a file renamed');
  t.equal(contentKey(['package.json']), contentKey([path.resolve(import.meta.dirname, '../../package.json')]), 'relative paths are in the checkout');
});

t.test('makeOnce: the first to finish is moved into place; the others leave nothing behind', async (t) => {
  const parent = scratchDirectory(t);
  const final = path.join(parent, 'made');
  const maker = (content: string, delayMs: number) => (scratch: string) =>
    new Promise<string>((resolve) =>
      setTimeout(() => {
        fs.writeFileSync(path.join(scratch, 'content'), content);
        resolve(scratch);
      }, delayMs),
    );
  // Both start before either is done, as two test files do.
  await Promise.all([makeOnce(final, maker('first', 10)), makeOnce(final, maker('second', 50))]);
  t.equal(fs.readFileSync(path.join(final, 'content'), 'utf8'), 'first');
  t.same(fs.readdirSync(parent), ['made'], 'no scratch directory left');
  // What make returns may be inside its scratch directory.
  const nested = path.join(parent, 'nested');
  await makeOnce(nested, async (scratch) => {
    fs.mkdirSync(path.join(scratch, 'inside'));
    fs.writeFileSync(path.join(scratch, 'inside', 'x'), 'x');
    return path.join(scratch, 'inside');
  });
  t.same(fs.readdirSync(nested), ['x']);
  t.same(fs.readdirSync(parent).sort(), ['made', 'nested']);
  // A failure is the caller's, and leaves nothing either.
  await t.rejects(makeOnce(path.join(parent, 'failed'), async () => Promise.reject(new Error('no'))), /no/);
  t.same(fs.readdirSync(parent).sort(), ['made', 'nested']);
});

t.test('removeStale: others of the prefix untouched for long enough, not the current one nor a recent one', async (t) => {
  const parent = scratchDirectory(t);
  for (const name of ['p-current', 'p-old', 'p-recent', 'other-old']) fs.mkdirSync(path.join(parent, name));
  const old = new Date(Date.now() - 7_200_000);
  for (const name of ['p-current', 'p-old', 'other-old']) fs.utimesSync(path.join(parent, name), old, old);
  removeStale(parent, 'p-', 'p-current', 3_600_000);
  t.same(fs.readdirSync(parent).sort(), ['other-old', 'p-current', 'p-recent']);
});

t.test('the templates of migrated databases are made again when the ORM’s migrator changes, not only the migrations', async (t) => {
  const { EMBEDDED_TEMPLATE_INPUTS } = await import('./embedded-template.ts');
  for (const input of MIGRATED_SCHEMA_INPUTS) t.ok(EMBEDDED_TEMPLATE_INPUTS.includes(input), `the embedded template is keyed by ${input}`);
  t.ok(MIGRATED_SCHEMA_INPUTS.includes('node_modules/@mikro-orm/migrations/package.json'), 'the migrator (it makes its own table)');
  t.ok(MIGRATED_SCHEMA_INPUTS.includes('migrations'), 'the migrations');
  for (const input of EMBEDDED_TEMPLATE_INPUTS) t.ok(fs.existsSync(path.resolve(import.meta.dirname, '../..', input)), `${input} is there to hash`);
});
