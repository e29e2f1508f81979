import t from 'tap';
import { canonicalizeTarget } from '../../src/gateway/path.ts';

t.test('canonical forms', async (t) => {
  const cases: [string, string, string][] = [
    ['/compute/v2.1/servers', '/compute/v2.1/servers', ''],
    ['/compute//v2.1///servers', '/compute/v2.1/servers', ''],
    ['/compute/v2.1/./servers', '/compute/v2.1/servers', ''],
    ['/compute/v2.1/x/../servers', '/compute/v2.1/servers', ''],
    ['/compute/v2.1/%2e%2e/v2.1/servers', '/compute/v2.1/servers', ''],
    ['/compute/v2.1/servers/', '/compute/v2.1/servers/', ''],
    ['/compute/v2.1/servers?limit=5&name=a%2Fb', '/compute/v2.1/servers', 'limit=5&name=a%2Fb'],
    ['/Compute/V2.1', '/Compute/V2.1', ''],
    ['/', '/', ''],
    ['//evil.example/compute', '/evil.example/compute', ''],
  ];
  for (const [target, path, query] of cases) {
    const canonical = canonicalizeTarget(target);
    t.equal(canonical.path, path, target);
    t.equal(canonical.query, query, `${target} query`);
  }
  const spaced = canonicalizeTarget('/object/v1/a%20b/caf%C3%A9:x@y');
  t.same(spaced.segments, ['object', 'v1', 'a b', 'café:x@y']);
  t.equal(spaced.encodedPath, '/object/v1/a%20b/caf%C3%A9:x@y', 'forwarded exactly as decided, re-encoded');
});

t.test('refused targets', async (t) => {
  const refused = [
    'http://evil.example/compute',
    '*',
    'compute/v2.1',
    '/compute/../../etc',
    '/..',
    '/compute/%2e%2e/%2e%2e/x',
    '/compute/a%2fb',
    '/compute/a%2Fb',
    '/compute/a%5cb',
    '/compute/a\\b',
    '/compute/a;b',
    '/compute/a%3bb',
    '/compute/a%00b',
    '/compute/a\u0000b',
    '/compute/%252e%252e/x',
    '/compute/%2',
    '/compute/%zz',
    '/compute/a%0ab',
  ];
  for (const target of refused) {
    t.throws(() => canonicalizeTarget(target), { name: 'ValidationError', message: /^Invalid request path/ }, JSON.stringify(target));
  }
});

t.test('plain paths (the fast path) canonicalise exactly as their %-encoded twins (the full rule)', async (t) => {
  const alphabet = ['a', 'B', '0', '.', '..', '-', '_', '~', '!', '$', '&', "'", '(', ')', '*', '+', ',', '=', ':', '@', 'v2.1', 'x'];
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
  for (let i = 0; i < 2000; i++) {
    const parts = Array.from({ length: 1 + random(6) }, () => (random(8) === 0 ? '' : alphabet[random(alphabet.length)]!));
    const plain = `/svc/${parts.join('/')}${random(3) === 0 ? '/' : ''}`;
    // The same path with its first letter or digit %-encoded: not plain, so the full rule runs.
    const twin = plain.replace(/[A-Za-z0-9]/, (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`);
    let expected: unknown;
    let actual: unknown;
    try {
      expected = canonicalizeTarget(twin);
    } catch (error) {
      expected = (error as Error).message;
    }
    try {
      actual = canonicalizeTarget(plain);
    } catch (error) {
      actual = (error as Error).message;
    }
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      t.same(actual, expected, plain);
      return;
    }
  }
  t.pass('2000 random plain paths');
  t.same(canonicalizeTarget('/svc/a/../b/./c/?q=1'), { segments: ['svc', 'b', 'c', ''], path: '/svc/b/c/', encodedPath: '/svc/b/c/', query: 'q=1' });
  t.throws(() => canonicalizeTarget('/svc/../..'), { message: /above the root/ });
});
