import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startNodeFlags } from '../../bench/processes.ts';

// Tests that run the service or its CLI as processes of their own run what ships: the esbuild bundle
// of `npm run build`, started with `npm start`'s node flags. It is also cheaper than src/ through tsx
// (a service start ~1.7 s less CPU, which the e2e files pay dozens of times). The bundle is built
// once per suite run and source tree, by whichever test file needs it first, into a directory named
// by what went into it, so a test never runs a stale build.

/** What the bundle is made of: the sources, the migrations, the build script and the dependencies. */
function sourceKey(): string {
  const hash = createHash('sha256');
  const add = (file: string) => hash.update(path.relative(ROOT, file)).update('\0').update(fs.readFileSync(file)).update('\0');
  const walk = (directory: string) => {
    for (const entry of fs.readdirSync(directory, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const file = path.join(directory, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (entry.isFile()) add(file);
    }
  };
  walk(path.join(ROOT, 'src'));
  walk(path.join(ROOT, 'migrations'));
  add(path.join(ROOT, 'scripts', 'build.ts'));
  add(path.join(ROOT, 'package-lock.json'));
  return hash.digest('hex').slice(0, 16);
}

const ROOT = path.resolve(import.meta.dirname, '../..');

// In the checkout, one level below it, as dist/ is (scripts/build.ts says why); ignored by git.
const PREFIX = '.test-build-';

/** Builds of other source trees, untouched for an hour (a suite run still using one is done by then). */
function removeStaleBuilds(current: string): void {
  for (const name of fs.readdirSync(ROOT)) {
    if (!name.startsWith(PREFIX) || name === current) continue;
    const directory = path.join(ROOT, name);
    try {
      if (Date.now() - fs.statSync(directory).mtimeMs > 3_600_000) fs.rmSync(directory, { recursive: true, force: true });
    } catch {
      // Removed meanwhile by another test file.
    }
  }
}

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
    const name = `${PREFIX}${sourceKey()}`;
    const final = path.join(ROOT, name);
    if (!(fs.existsSync(path.join(final, 'main.js')) && fs.existsSync(path.join(final, 'manage.js')))) {
      removeStaleBuilds(name);
      const building = fs.mkdtempSync(`${final}.building-`);
      try {
        // Loaded here: most test processes import this module (through processes.ts) and build nothing.
        const { build } = await import('../../scripts/build.ts');
        await build({ outdir: building });
        try {
          fs.renameSync(building, final);
        } catch (error) {
          // Another test file made it first (the same sources, the same bundle).
          const code = (error as NodeJS.ErrnoException).code;
          if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
        }
      } finally {
        fs.rmSync(building, { recursive: true, force: true });
      }
    }
    return { service: [...startNodeFlags(), path.join(final, 'main.js')], manage: [path.join(final, 'manage.js')] };
  })();
  return built;
}

/** Whether a process's command line (from /proc, NUL-separated) runs a service bundle of builtService's. */
export function runsBuiltService(commandLine: string): boolean {
  return commandLine.split('\0').some((argument) => argument.includes(`${path.sep}${PREFIX}`) && argument.endsWith(`${path.sep}main.js`));
}
