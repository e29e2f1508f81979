import { spawnSync } from 'node:child_process';
import t from 'tap';

// Whether a prototype is in V8's fast form is visible only to V8's natives syntax, which a child node
// allows (--allow-natives-syntax) and only code V8 parses itself may use (not tsx's output): hence a
// child process and `new Function`.
const FAST = "const fast = new Function('o', 'return %HasFastProperties(o)');";
const PROTOTYPES = 'const prototypes = { String: String.prototype, Number: Number.prototype, Boolean: Boolean.prototype, Symbol: Symbol.prototype, BigInt: BigInt.prototype };';
const REPORT = 'const report = () => Object.fromEntries(Object.entries(prototypes).map(([name, prototype]) => [name, fast(prototype)]));';

function runChild(body: string): Record<string, unknown> {
  const script = [FAST, PROTOTYPES, REPORT, body].join('\n');
  const run = spawnSync(process.execPath, ['--allow-natives-syntax', '--import=tsx', '--input-type=module', '-e', script], {
    cwd: new URL('../..', import.meta.url).pathname,
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (run.status !== 0) throw new Error(`child exited ${run.status}: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

const ALL_FAST = { String: true, Number: true, Boolean: true, Symbol: true, BigInt: true };

t.test('a class extending a wrapper leaves its prototype a dictionary; restoring gives every one its fast form back', async (t) => {
  const result = runChild(`
    const { restoreFastPrimitivePrototypes } = await import('./src/support/primitive-prototypes.ts');
    const initially = report();
    class Verbatim extends String {}
    class Amount extends Number {}
    class Flag extends Boolean {}
    const slowed = report();
    restoreFastPrimitivePrototypes();
    const restored = report();
    // A primitive's method call after the restoration: the prototype stays fast.
    ''.padEnd(3).includes(' ');
    console.log(JSON.stringify({ initially, slowed, restored, after: report(), used: [Verbatim, Amount, Flag].length }));
  `);
  t.same(result.initially, ALL_FAST, 'a fresh node starts with all of them fast');
  t.same(result.slowed, { ...ALL_FAST, String: false, Number: false, Boolean: false }, 'the classes turned String, Number and Boolean into dictionaries');
  t.same(result.restored, ALL_FAST, 'restored');
  t.same(result.after, ALL_FAST, 'and they stay fast while used');
});

// The service imports ioredis, whose `class VerbatimString extends String` turned String.prototype
// into a dictionary for the life of the process: every string method call in optimised code (the
// gateway's and node's header checks) took the generic load stub.
t.test('after buildApplication the primitives prototypes are fast', async (t) => {
  const result = runChild(`
    const { startTestApp } = await import('./test/helpers/app.ts');
    const beforeBuild = report();
    const teardowns = [];
    const testApp = await startTestApp({ teardown: (fn) => teardowns.push(fn) });
    const afterBuild = report();
    const response = await testApp.request({ method: 'GET', url: '/v3' });
    await testApp.close();
    console.log(JSON.stringify({ beforeBuild, afterBuild, afterRequest: report(), status: response.statusCode }));
  `);
  t.comment(`before buildApplication (the modules evaluated): ${JSON.stringify(result.beforeBuild)}`);
  t.same(result.afterBuild, ALL_FAST, 'all fast once the application is built');
  t.equal(result.status, 200);
  t.same(result.afterRequest, ALL_FAST, 'and after it has answered');
});
