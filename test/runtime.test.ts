import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startNodeFlags } from '../bench/processes.ts';
import t from 'tap';

// The suite runs on the Node that package.json declares (the `node` package npm puts first on
// PATH for its scripts), not on whatever node the machine happens to have.
t.test('the suite runs on the declared Node', async (t) => {
  const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
  const minimum = /^>=(\d+)\.(\d+)/.exec(engines.node);
  t.ok(minimum, `engines.node is a lower bound: ${engines.node}`);
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  const [wantMajor, wantMinor] = [Number(minimum![1]), Number(minimum![2])];
  t.ok(major > wantMajor || (major === wantMajor && minor >= wantMinor), `node ${process.versions.node} satisfies ${engines.node}`);
  // Node 26 is the active LTS line as of 2026-10; an odd (never-LTS) line would not be.
  t.equal(major % 2, 0, 'an LTS line');
});

// Production starts node with flags (`npm start`); the container image and the benchmark must start
// it with the same ones, or what is measured and what runs in a container is not what `npm start` runs.
t.test('the container and the benchmark start node with the flags of npm start', async (t) => {
  const flags = startNodeFlags();
  t.ok(flags.includes('--min-semi-space-size=16'), `npm start keeps the young generation at its loaded size: ${flags.join(' ')}`);
  t.ok(flags.includes('--max-semi-space-size=16'), `and at Node 20's size, half of what Node 26 grows it to (32 MB per process): ${flags.join(' ')}`);
  t.ok(flags.includes('--managed-zone-memory'), `V8's compiler memory in its own pooled pages, not the threads' malloc arenas: ${flags.join(' ')}`);
  // V8 keeps freed compiler zones and heap pages 8-16 s by default: a worker's RSS peaked 7-9 MB above
  // its working set after each burst of compilation (bench/README.md, 2026-11-30, third sitting).
  t.ok(flags.includes('--memory-pool-timeout=1'), `and gives them back after 1-2 s: ${flags.join(' ')}`);
  // V8's memory reducer shrinks the heap with a compacting mark-compact when it judges the process
  // idle, and by its watchdog 100 s after a growing mark-compact whatever the load: a 47 ms pause
  // under the gateway's paced load, where an ordinary one took 5-20 (bench/README.md, 2026-12-04, fifth sitting).
  t.ok(flags.includes('--no-memory-reducer'), `and does not compact the whole heap to shrink it while serving: ${flags.join(' ')}`);
  // A V8 flag a later Node drops makes node refuse to start ("bad option"): the service would not come up.
  const run = spawnSync(process.execPath, [...flags, '-e', '0'], { encoding: 'utf8' });
  t.equal(run.status, 0, `this node starts with the flags of npm start: ${run.stderr}`);
  t.notMatch(run.stderr, /bad option/, 'and refuses none of them');
  const dockerfile = readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8');
  const cmd = /^CMD (\[.*\])$/m.exec(dockerfile);
  t.ok(cmd, 'the Dockerfile has an exec-form CMD');
  const [command, ...rest] = JSON.parse(cmd![1]!) as string[];
  t.equal(command, 'node');
  t.same(rest, [...flags, 'dist/main.js'], 'the CMD is node, the start flags and the bundle');
  t.same(startNodeFlags(JSON.stringify({ scripts: { start: 'node --a=1 --b dist/main.js --not-a-node-flag' } })), ['--a=1', '--b']);
  t.throws(() => startNodeFlags(JSON.stringify({ scripts: { start: 'node -r x dist/main.js' } })), /cannot pass on: -r/);
  t.throws(() => startNodeFlags(JSON.stringify({ scripts: { start: 'tsx src/main.ts' } })), /does not run node/);
});

// package.json leaves tap's TypeScript plugin out: its loader (ts-node, type-checking every module)
// made eight test files take 100 s instead of 60. tap applies a changed plugin list only from the run after the one
// that notices it, so without `pretest` (scripts/tap-build.ts) the first run after an install, which
// is every CI run, still loaded it into every test file.
t.test('test files run without tap\'s TypeScript loader', async (t) => {
  const loaders = process.execArgv.filter((argument) => argument.startsWith('--import') || argument.startsWith('--loader'));
  t.notOk(loaders.some((loader) => loader.includes('@tapjs/typescript')), `this test file's loaders: ${loaders.join(' ')}`);
  t.ok(loaders.some((loader) => loader === '--import=tsx'), 'tsx runs the TypeScript');
  const { scripts, tap } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string>; tap: { plugin: string[] } };
  t.ok(tap.plugin.includes('!@tapjs/typescript'), 'the plugin is left out');
  t.equal(scripts.pretest, 'node scripts/tap-build.ts', 'and tap is built without it before npm test runs');
});
