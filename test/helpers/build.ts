import fs from 'node:fs';
import path from 'node:path';
import { startNodeFlags } from '../../bench/processes.ts';
import { contentKey, makeOnce, removeStale } from './made-once.ts';

// Tests that run the service or its CLI as processes of their own run what ships: the esbuild bundle
// of `npm run build`, started with `npm start`'s node flags. It is also cheaper than src/ through tsx
// (a service start ~1.7 s less CPU, which the e2e files pay dozens of times). The bundle is built
// once per suite run and source tree, by whichever test file needs it first, into a directory named
// by what went into it, so a test never runs a stale build.

// In the checkout, one level below it, as dist/ is (scripts/build.ts says why); ignored by git.
const ROOT = path.resolve(import.meta.dirname, '../..');
const PREFIX = '.test-build-';

export interface BuiltService {
  /** Node's arguments that start the service: `npm start`'s flags and the bundle. */
  service: string[];
  /** Node's arguments that run the CLI (`npm run manage -- …` without tsx). */
  manage: string[];
}

let built: Promise<BuiltService> | undefined;

/** The service and its CLI as bundled, made once (atomically: test files run in parallel). */
export function builtService(): Promise<BuiltService> {
  built ??= (async () => {
    // What the bundle is made of: the sources, the migrations, the build script and the dependencies.
    const name = `${PREFIX}${contentKey(['src', 'migrations', 'scripts/build.ts', 'package-lock.json'])}`;
    const final = path.join(ROOT, name);
    if (!(fs.existsSync(path.join(final, 'main.js')) && fs.existsSync(path.join(final, 'manage.js')))) {
      // Builds of other source trees, untouched for an hour (a suite run still using one is done by then).
      removeStale(ROOT, PREFIX, name, 3_600_000);
      await makeOnce(final, async (scratch) => {
        // Loaded here: most test processes import this module (through processes.ts) and build nothing.
        const { build } = await import('../../scripts/build.ts');
        await build({ outdir: scratch });
        return scratch;
      });
    }
    return { service: [...startNodeFlags(), path.join(final, 'main.js')], manage: [path.join(final, 'manage.js')] };
  })();
  return built;
}

/** Whether a process's command line (from /proc, NUL-separated) runs a service bundle of builtService's. */
export function runsBuiltService(commandLine: string): boolean {
  return commandLine.split('\0').some((argument) => argument.includes(`${path.sep}${PREFIX}`) && argument.endsWith(`${path.sep}main.js`));
}
