import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { build } from '../../scripts/build.ts';
import { ROOT } from '../helpers/processes.ts';

const run = promisify(execFile);

// Store.migrate() imports the migrations and the migrator when it runs, so in the bundle they are a
// chunk of their own: the bundle, not only the TypeScript, must find it and apply them.
t.test('the bundle migrates a new database (db_sync) and finds nothing to do the second time', async (t) => {
  // Inside the checkout (git-ignored scratch/): the bundle resolves its dependencies from node_modules.
  fs.mkdirSync(path.join(ROOT, 'scratch'), { recursive: true });
  const outdir = fs.mkdtempSync(path.join(ROOT, 'scratch', 'build-test-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-build-test-'));
  t.teardown(() => {
    fs.rmSync(outdir, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  await build({ outdir, sourcemap: false });
  const environment = { ...process.env, DATABASE_URL: '', TEST_DATABASE_URL: '', REDIS_URL: '', POLICY_DIR: '', DATA_DIR: dataDir };
  const dbSync = () => run(process.execPath, [path.join(outdir, 'manage.js'), 'db_sync'], { cwd: ROOT, env: environment });

  const first = await dbSync();
  t.match(first.stdout, /^applied Migration20261122000000_initial, Migration/m, 'every migration applied, the first one first');
  const second = await dbSync();
  t.match(second.stdout, /^database is up to date$/m);
});
