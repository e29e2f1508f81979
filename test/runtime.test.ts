import { readFileSync } from 'node:fs';
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
