/**
 * npm run build — bundles src/ into dist/ with esbuild, for production (`node dist/main.js`).
 *
 * Plain node then runs JavaScript: no TypeScript transform in the process (tsx costs ~77 MB of RSS
 * per process and start-up time). Dependencies stay external (resolved from node_modules at run
 * time), the migrations are bundled (in a chunk of their own, which Store.migrate() imports when it runs),
 * and config.ts finds policies/ relative to dist/ as it does relative to src/ (both are one level
 * below the checkout). Two entry points share chunks: dist/main.js (the service) and
 * dist/manage.js (the CLI; its lazily imported modules stay lazy).
 *
 *   npm run build                      # dist/
 *   tsx scripts/build.ts --outdir DIR  # elsewhere (the memory bench builds into a temp directory)
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';

export const ROOT = path.resolve(import.meta.dirname, '..');

/** Entry points: output name → source. */
const ENTRY_POINTS = { main: 'src/main.ts', manage: 'src/cli/manage.ts' };

export interface BuildResult {
  outdir: string;
  /** Absolute path of the service's entry (what `node` runs). */
  main: string;
  /** Absolute path of the CLI's entry. */
  manage: string;
  ms: number;
}

/**
 * Bundles into `outdir` (default dist/), which is emptied first. It must be inside the checkout
 * (dependencies resolve from node_modules/), and one directory below it, as src/ is, for the default
 * POLICY_DIR and IDENTITY_POLICY_DIR to resolve (elsewhere, set them).
 */
export async function build(options: { outdir?: string; sourcemap?: boolean } = {}): Promise<BuildResult> {
  const started = performance.now();
  const outdir = path.resolve(ROOT, options.outdir ?? 'dist');
  if (!outdir.startsWith(ROOT + path.sep)) throw new Error(`build: ${outdir} must be inside the checkout (node_modules/ is found from there)`);
  rmSync(outdir, { recursive: true, force: true });
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ENTRY_POINTS,
    outdir,
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node26',
    packages: 'external',
    // Shared chunks next to the entries, not in a subdirectory: config.ts resolves policies/ from
    // its own directory's parent, wherever esbuild puts it.
    chunkNames: '[name]-[hash]',
    // For `node --enable-source-maps dist/main.js` (stack traces naming src/ files); node does not
    // read the maps unless asked.
    sourcemap: options.sourcemap ?? true,
    logLevel: 'warning',
  });
  return {
    outdir,
    main: path.join(outdir, 'main.js'),
    manage: path.join(outdir, 'manage.js'),
    ms: Math.round(performance.now() - started),
  };
}

const invokedDirectly = process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (invokedDirectly) {
  const { values } = parseArgs({ options: { outdir: { type: 'string' }, 'no-sourcemap': { type: 'boolean', default: false } } });
  build({ ...(values.outdir ? { outdir: values.outdir } : {}), sourcemap: !values['no-sourcemap'] })
    .then((result) => process.stderr.write(`build: ${path.relative(process.cwd(), result.outdir) || '.'}/{main,manage}.js in ${result.ms} ms\n`))
    .catch((error: unknown) => {
      process.stderr.write(`build failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    });
}
