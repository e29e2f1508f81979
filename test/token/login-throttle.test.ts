import t from 'tap';
import { UserEntity } from '../../src/store/entities.ts';
import { addressKey } from '../../src/token/login-throttle.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { testRedis } from '../helpers/redis.ts';

// Brute-force resistance of POST /v3/auth/tokens (and the self-service password change): the
// lockout of IDENTITY_LOCKOUT_*, and rate limits per user name and per client address → 429.

const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };
const TOO_MANY = {
  error: {
    code: 429,
    title: 'Too Many Requests',
    message: 'Too many authentication attempts. Retry after the number of seconds given in Retry-After.',
  },
};
const WINDOW = 60_000;

function tokenRequest(app: TestApp, user: Record<string, unknown>, password: string, remoteAddress = '127.0.0.1', headers: Record<string, string> = {}) {
  return app.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    remoteAddress,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify({ auth: { identity: { methods: ['password'], password: { user: { ...user, password } } } } }),
  });
}

/** Moves the clock forward to the start of the next rate-limit window, so Retry-After values are exact. */
function toWindowStart(app: TestApp): void {
  app.clock.set(Math.ceil(app.clock.now() / WINDOW) * WINDOW);
}

t.test('a brute-force attack meets the lockout, then 429s', async (t) => {
  const app = await startTestApp(t, {
    IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '3',
    IDENTITY_LOCKOUT_DURATION: '1800',
    AUTH_RATE_LIMIT_PER_USER: '5',
    AUTH_RATE_LIMIT_WINDOW: '60',
  });
  const victim = (await app.call('POST', '/v3/users', { user: { name: 'victim', password: 'Right-1' } })).json().user;
  const bystander = (await app.call('POST', '/v3/users', { user: { name: 'bystander', password: 'Mine-1' } })).json().user;
  toWindowStart(app);
  const byName = { name: 'victim', domain: { id: 'default' } };

  const answers = [];
  for (const guess of ['guess-1', 'guess-2', 'guess-3', 'Right-1', 'guess-5']) answers.push(await tokenRequest(app, byName, guess));
  t.same(answers.map((answer) => answer.statusCode), [401, 401, 401, 401, 401]);
  for (const answer of answers) t.same(answer.json(), GENERIC_401);
  t.equal((await app.app.store.reader().findOneOrFail(UserEntity, { id: victim.id })).failedAuthCount, 3, 'locked after three (the right password did not help)');

  const limited = await tokenRequest(app, byName, 'Right-1');
  t.equal(limited.statusCode, 429, 'the sixth attempt in a minute is not even checked');
  t.same(limited.json(), TOO_MANY);
  t.equal(limited.headers['retry-after'], '72');
  t.equal((await app.login({ id: bystander.id }, 'Mine-1')).status, 201, 'other users are not affected');

  // A name that exists nowhere is limited the same way: a 429 says nothing about the account.
  const ghost = { name: 'ghost', domain: { id: 'default' } };
  const ghostAnswers = [];
  for (let i = 0; i < 6; i++) ghostAnswers.push(await tokenRequest(app, ghost, `guess-${i}`));
  t.same(ghostAnswers.map((answer) => answer.statusCode), [401, 401, 401, 401, 401, 429]);
  t.same(ghostAnswers[5]!.json(), limited.json());

  app.clock.advance(71_000);
  t.equal((await tokenRequest(app, byName, 'Right-1')).statusCode, 429, 'one second before Retry-After');
  app.clock.advance(1000);
  const stillLocked = await tokenRequest(app, byName, 'Right-1');
  t.equal(stillLocked.statusCode, 401, 'after Retry-After the attempt is checked, and the account is still locked');
  t.same(stillLocked.json(), GENERIC_401);

  app.clock.advance(1800_000);
  t.equal((await tokenRequest(app, byName, 'Right-1')).statusCode, 201, 'the lock and the window are over');
});

t.test('successful logins never use up the per-user budget; the self-service change shares it', async (t) => {
  const app = await startTestApp(t, { AUTH_RATE_LIMIT_PER_USER: '3' });
  const user = (await app.call('POST', '/v3/users', { user: { name: 'busy', password: 'Pw-1' } })).json().user;
  toWindowStart(app);
  for (let i = 0; i < 10; i++) t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 201, `login ${i + 1}`);

  const change = (original: string) =>
    app.call('POST', `/v3/users/${user.id}/password`, { user: { original_password: original, password: 'Pw-2' } }, null);
  t.equal((await app.login({ id: user.id }, 'wrong')).status, 401);
  t.equal((await change('wrong')).statusCode, 401);
  t.equal((await change('wrong')).statusCode, 401);
  const limited = await change('Pw-1');
  t.equal(limited.statusCode, 429, 'guessing through the password change counts for the same user');
  t.ok(Number(limited.headers['retry-after']) > 0);
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 429);
});

t.test('the per-user budget is one per user, however the request names it', async (t) => {
  const app = await startTestApp(t, { AUTH_RATE_LIMIT_PER_USER: '4' });
  const domain = (await app.call('POST', '/v3/domains', { domain: { name: 'Elsewhere' } })).json().domain;
  const victim = (await app.call('POST', '/v3/users', { user: { name: 'victim', domain_id: domain.id, password: 'Right-1' } })).json().user;
  toWindowStart(app);
  const spellings: Record<string, Record<string, unknown>> = {
    'by id': { id: victim.id },
    'by name and domain id': { name: 'victim', domain: { id: domain.id } },
    'by name and domain name': { name: 'victim', domain: { name: 'Elsewhere' } },
  };
  // Four failures spread over every spelling, and the self-service change (by id), use up one budget.
  t.equal((await tokenRequest(app, spellings['by id']!, 'guess-1')).statusCode, 401);
  t.equal((await tokenRequest(app, spellings['by name and domain id']!, 'guess-2')).statusCode, 401);
  t.equal((await tokenRequest(app, spellings['by name and domain name']!, 'guess-3')).statusCode, 401);
  const change = await app.call('POST', `/v3/users/${victim.id}/password`, { user: { original_password: 'guess-4', password: 'Pw-2' } }, null);
  t.equal(change.statusCode, 401);
  for (const [spelling, user] of Object.entries(spellings)) {
    const answer = await tokenRequest(app, user, 'Right-1');
    t.equal(answer.statusCode, 429, `${spelling}: the fifth guess is not checked`);
    t.same(answer.json(), TOO_MANY);
  }
  t.equal((await app.call('POST', `/v3/users/${victim.id}/password`, { user: { original_password: 'Right-1', password: 'Pw-2' } }, null)).statusCode, 429);

  // A user that does not exist: one budget per (domain id, name), whether the domain is named by id or name.
  const ghostById = { name: 'ghost', domain: { id: domain.id } };
  const ghostByName = { name: 'ghost', domain: { name: 'Elsewhere' } };
  for (const user of [ghostById, ghostByName, ghostById, ghostByName]) t.equal((await tokenRequest(app, user, 'guess')).statusCode, 401);
  t.equal((await tokenRequest(app, ghostById, 'guess')).statusCode, 429, 'unknown user, domain by id');
  t.equal((await tokenRequest(app, ghostByName, 'guess')).statusCode, 429, 'unknown user, domain by name');
  t.equal((await tokenRequest(app, { name: 'ghost', domain: { id: 'default' } }, 'guess')).statusCode, 401, 'the same name in another domain is another user');

  // An unknown domain name is counted like any other name: the 429 comes at the same point.
  const nowhere = { name: 'ghost', domain: { name: 'Nowhere' } };
  const answers = [];
  for (let i = 0; i < 5; i++) answers.push((await tokenRequest(app, nowhere, 'guess')).statusCode);
  t.same(answers, [401, 401, 401, 401, 429]);

  app.clock.advance(2 * WINDOW);
  t.equal((await tokenRequest(app, spellings['by name and domain name']!, 'Right-1')).statusCode, 201, 'the window is over');
});

t.test('per client address, with TRUSTED_PROXIES deciding whose X-Forwarded-For is believed', async (t) => {
  const app = await startTestApp(t, { AUTH_RATE_LIMIT_PER_ADDRESS: '4', TRUSTED_PROXIES: '10.0.0.0/8' });
  toWindowStart(app);
  const spray = (address: string, index: number, headers: Record<string, string> = {}) =>
    tokenRequest(app, { name: `user-${index}`, domain: { id: 'default' } }, 'password', address, headers);

  for (let i = 0; i < 4; i++) t.equal((await spray('198.51.100.7', i)).statusCode, 401);
  const limited = await spray('198.51.100.7', 99);
  t.equal(limited.statusCode, 429, 'a fifth user name from the same address');
  t.equal(limited.headers['retry-after'], '75');
  t.equal((await spray('198.51.100.7', 100, { 'x-forwarded-for': '203.0.113.1' })).statusCode, 429, 'an untrusted client cannot pick its address');

  // Behind the trusted proxy, each client is counted by the address the proxy reports.
  for (let i = 0; i < 4; i++) t.equal((await spray('10.1.2.3', i, { 'x-forwarded-for': '203.0.113.9' })).statusCode, 401);
  t.equal((await spray('10.1.2.3', 4, { 'x-forwarded-for': '203.0.113.9' })).statusCode, 429);
  t.equal((await spray('10.1.2.3', 5, { 'x-forwarded-for': '203.0.113.10' })).statusCode, 401, 'another client behind the same proxy');
  t.equal((await spray('10.1.2.3', 6, { 'x-forwarded-for': '203.0.113.9, 10.9.9.9' })).statusCode, 429, 'trusted hops are skipped');

  // IPv6 clients are counted per /64.
  for (let i = 0; i < 4; i++) await spray(`2001:db8:1:2::${i + 1}`, i);
  t.equal((await spray('2001:db8:1:2:ffff::1', 9)).statusCode, 429, 'same /64');
  t.equal((await spray('2001:db8:1:3::1', 9)).statusCode, 401, 'another /64');

  app.clock.advance(75_000);
  t.equal((await spray('198.51.100.7', 101)).statusCode, 401, 'Retry-After later');
});

t.test('client address keys', async (t) => {
  t.equal(addressKey('192.0.2.1'), '192.0.2.1');
  t.equal(addressKey('::ffff:192.0.2.1'), '192.0.2.1');
  t.equal(addressKey('2001:db8:a:b:c:d:e:f'), '2001:db8:a:b::/64');
  t.equal(addressKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(addressKey('::1'), '0:0:0:0::/64');
});

t.test('with REDIS_URL the limits hold across nodes', async (t) => {
  const redis = await testRedis(t);
  if (!redis) return t.plan(0, 'no Redis');
  const environment = {
    REDIS_URL: 'redis://127.0.0.1:6379',
    RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:`,
    AUDIT_STREAM: `${redis.prefix}audit`,
    AUTH_RATE_LIMIT_PER_USER: '3',
  };
  const nodeA = await startTestApp(t, environment);
  const nodeB = await startTestApp(t, environment);
  const now = Math.max(nodeA.clock.now(), nodeB.clock.now());
  for (const node of [nodeA, nodeB]) node.clock.set(Math.ceil(now / WINDOW) * WINDOW);
  const target = { name: 'shared-target', domain: { id: 'default' } };
  t.equal((await tokenRequest(nodeA, target, 'x')).statusCode, 401);
  t.equal((await tokenRequest(nodeB, target, 'x')).statusCode, 401);
  t.equal((await tokenRequest(nodeA, target, 'x')).statusCode, 401);
  const limited = await tokenRequest(nodeB, target, 'x');
  t.equal(limited.statusCode, 429, 'the fourth attempt, on another node');
  t.equal(limited.headers['retry-after'], '80');
  const keys = await redis.redis.keys(`${redis.prefix}ratelimit:*`);
  t.ok(keys.some((key) => key.includes('shared-target')), 'counted in Redis under the configured prefix');
});
