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
