import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startNodeFlags } from '../../bench/processes.ts';
import { builtService, runsBuiltService } from './build.ts';
import { ROOT } from './processes.ts';

t.test('builtService: the bundle npm start runs, with its flags, built once per source tree', async (t) => {
  const built = await builtService();
  t.equal(await builtService(), built, 'one build per process');
  const main = built.service.at(-1)!;
  t.same(built.service.slice(0, -1), startNodeFlags(), "npm start's node flags");
  t.match(path.relative(ROOT, main), /^\.test-build-[0-9a-f]{16}\/main\.js$/, 'in the checkout, one level below it (policies/ resolve from there)');
  t.equal(path.dirname(built.manage[0]!), path.dirname(main), 'the CLI beside it');
  t.ok(fs.existsSync(main) && fs.existsSync(built.manage[0]!));
  // It runs: the CLI's usage, from the bundle.
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [...built.manage, '--help'], { cwd: ROOT });
  t.match(stdout + stderr, /Usage: npm run manage -- <command>/);
  t.ok(runsBuiltService(['node', ...built.service].join('\0')), "a service's command line is recognized");
  t.notOk(runsBuiltService(['node', ...built.manage].join('\0')), "the CLI's is not");
  t.notOk(runsBuiltService(['node', '--import=tsx', 'src/main.ts'].join('\0')));
});
