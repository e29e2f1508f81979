import { Redis } from 'ioredis';
import t from 'tap';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { stateCookieName, stateCookieNameOf, unquotePlus } from '../../../src/federation/oidc/websso.ts';
import { WebSsoStateSealer, type WebSsoState } from '../../../src/federation/oidc/websso-state.ts';
import { MemoryReplayCache, RedisReplayCache } from '../../../src/federation/replay-cache.ts';
import { parseCookies, ssoCallbackPage } from '../../../src/http/routes/websso.ts';
import { ManualClock } from '../../helpers/clock.ts';
import { testRedis } from '../../helpers/redis.ts';

// The parts of websso that need no provider: its settings, the sealed login state, the replay
// caches (in memory and in the real Redis), Keystone's origin decoding and its callback page.

t.test('settings: TRUSTED_DASHBOARDS, OIDC_CLIENT_ID/SECRET, OIDC_SCOPE, WEBSSO_*', async (t) => {
  const defaults = loadConfig({}).websso;
  t.strictSame(defaults, { trustedDashboards: [], stateTtlSeconds: 600, replayKeyPrefix: 'keystone-gateway:websso:', oidcClient: undefined });
  const set = loadConfig({
    TRUSTED_DASHBOARDS: ' https://Horizon.Example.ORG/Auth/WebSSO/ , HTTP://dash.example.org:8080/x?Y=Z',
    OIDC_CLIENT_ID: 'keystone',
    OIDC_CLIENT_SECRET: 's3cret',
    OIDC_SCOPE: 'openid email  groups',
    WEBSSO_STATE_TTL_SECONDS: '120',
    WEBSSO_KEY_PREFIX: 'p:',
  }).websso;
  t.strictSame(set.trustedDashboards, ['https://horizon.example.org/Auth/WebSSO/', 'http://dash.example.org:8080/x?Y=Z'], "host names lower-cased (Keystone's lower_case_hostname), paths kept");
  t.strictSame(set.oidcClient, { clientId: 'keystone', clientSecret: 's3cret', scope: 'openid email groups', userinfo: true });
  t.equal(loadConfig({ OIDC_CLIENT_ID: 'keystone', OIDC_USERINFO: 'false' }).websso.oidcClient?.userinfo, false);
  t.equal(set.stateTtlSeconds, 120);
  t.equal(set.replayKeyPrefix, 'p:');
  t.strictSame(loadConfig({ OIDC_CLIENT_ID: 'public' }).websso.oidcClient, { clientId: 'public', clientSecret: undefined, scope: 'openid profile email', userinfo: true }, 'a public client');
  for (const [env, named] of [
    [{ TRUSTED_DASHBOARDS: 'horizon.example.org' }, 'TRUSTED_DASHBOARDS'],
    [{ TRUSTED_DASHBOARDS: 'javascript:alert(1)' }, 'TRUSTED_DASHBOARDS'],
    [{ OIDC_CLIENT_SECRET: 'alone' }, 'OIDC_CLIENT_ID'],
    [{ OIDC_SCOPE: 'email profile' }, 'OIDC_SCOPE'],
    [{ OIDC_SCOPE: 'openid "quoted"' }, 'OIDC_SCOPE'],
    [{ WEBSSO_STATE_TTL_SECONDS: '5' }, 'WEBSSO_STATE_TTL_SECONDS'],
    [{ OIDC_CLIENT_ID: 'keystone', OIDC_USERINFO: 'maybe' }, 'OIDC_USERINFO'],
  ] as const) {
    t.throws(() => loadConfig(env), { message: new RegExp(named) }, `${JSON.stringify(env)} names ${named}`);
    t.throws(() => loadConfig(env), ConfigError);
  }
});

const state = (overrides: Partial<WebSsoState> = {}): WebSsoState => ({
  sid: 'a'.repeat(43),
  nonce: 'n'.repeat(43),
  verifier: 'v'.repeat(43),
  idpId: 'oidc-idp',
  protocolId: 'openid',
  issuer: 'https://idp.example.org',
  origin: 'https://horizon.example.org/auth/websso/',
  redirectUri: 'https://keystone.example.org/v3/auth/OS-FEDERATION/websso/openid/redirect',
  expiresAt: 1_800_000_000_000,
  ...overrides,
});

t.test('sealed state: any node with the same key opens it; a changed byte, another key, garbage do not', async (t) => {
  const pepper = Buffer.from('the pepper every node of the deployment shares');
  const nodeA = new WebSsoStateSealer(pepper);
  const nodeB = new WebSsoStateSealer(Buffer.from(pepper));
  const sealed = nodeA.seal(state());
  t.match(sealed, /^[A-Za-z0-9_-]+$/, 'cookie-safe');
  t.notMatch(Buffer.from(sealed, 'base64url').toString('latin1'), /nnnn|vvvv|oidc-idp/, 'nothing readable');
  t.strictSame(nodeB.open(sealed), state(), 'another node opens it');
  t.not(nodeA.seal(state()), sealed, 'a fresh IV each time');
  const bytes = Buffer.from(sealed, 'base64url');
  for (const index of [0, 12, 20, bytes.length - 1]) {
    const changed = Buffer.from(bytes);
    changed[index] = changed[index]! ^ 1;
    t.equal(nodeA.open(changed.toString('base64url')), undefined, `byte ${index} changed`);
  }
  t.equal(new WebSsoStateSealer(Buffer.from('another deployment')).open(sealed), undefined, 'another key');
  for (const garbage of ['', 'AAAA', 'not base64!', sealed.slice(0, 30), 'x'.repeat(9000)]) t.equal(nodeA.open(garbage), undefined, `garbage ${garbage.slice(0, 12)}`);
  t.throws(() => new WebSsoStateSealer(Buffer.alloc(0)));
  // Another purpose (the SAML ECP session) opens only its own values.
  const session = nodeA.sealFor('keystone-gateway saml ecp session v1', Buffer.from('{"sid":"s","expiresAt":1}'));
  t.equal(nodeB.openFor('keystone-gateway saml ecp session v1', session)?.toString(), '{"sid":"s","expiresAt":1}', 'its own purpose opens it');
  t.equal(nodeA.open(session), undefined, 'a value of another purpose is no login state, even when it parses as one');
  t.equal(nodeA.openFor('keystone-gateway saml ecp session v1', sealed), undefined, 'a login state is no value of another purpose');
});

t.test('memory replay cache: once per state within its lifetime, bounded', async (t) => {
  const clock = new ManualClock();
  const cache = new MemoryReplayCache(clock, 3);
  t.equal(await cache.claim('s1', clock.now() + 1000), true);
  t.equal(await cache.claim('s1', clock.now() + 1000), false, 'a replay');
  clock.advance(1001);
  t.equal(await cache.claim('s1', clock.now() + 1000), true, 'forgotten once expired (the sealed state has expired by then too)');
  for (const id of ['s2', 's3', 's4']) t.equal(await cache.claim(id, clock.now() + 10_000), true);
  t.equal(await cache.claim('s4', clock.now() + 10_000), false);
  t.equal(await cache.claim('s3', clock.now() + 10_000), false, 'the newest are kept when full');
});

t.test('Redis replay cache: a state used on one node is refused on another', async (t) => {
  const redis = await testRedis(t);
  if (!redis) {
    t.fail('no Redis at 127.0.0.1:6379');
    return;
  }
  const clock = new ManualClock();
  const nodeA = new RedisReplayCache(redis.redis, redis.prefix, clock);
  const nodeB = new RedisReplayCache(redis.redis, redis.prefix, clock);
  t.equal(await nodeA.claim('state-1', clock.now() + 5000), true);
  t.equal(await nodeB.claim('state-1', clock.now() + 5000), false, 'the other node sees it used');
  t.equal(await nodeA.claim('state-1', clock.now() + 5000), false);
  t.equal(await nodeB.claim('state-2', clock.now() + 5000), true);
  const ttl = await redis.redis.pttl(`${redis.prefix}state-1`);
  t.ok(ttl > 0 && ttl <= 5000, `kept only for the state's lifetime (${ttl} ms)`);
});

t.test('Redis out of reach: a websso state is claimed on this node (logged); a SAML-style cache refuses', async (t) => {
  const clock = new ManualClock();
  const broken = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  t.teardown(() => broken.disconnect());
  const warnings: string[] = [];
  const log = { warn: (_object: object, message: string) => void warnings.push(message) };
  const websso = new RedisReplayCache(broken, 'x:', clock, { fallback: 'this-node', log, message: 'websso: Redis did not answer' });
  t.equal(await websso.claim('state-1', clock.now() + 5000), true, 'first use, on this node');
  t.equal(await websso.claim('state-1', clock.now() + 5000), false, 'this node still refuses the replay');
  t.same(warnings, ['websso: Redis did not answer']);
  const strict = new RedisReplayCache(broken, 'x:', clock);
  await t.rejects(strict.claim('assertion-1', clock.now() + 5000), { name: 'ReplayCacheUnavailableError' });
  t.equal(await strict.claim('assertion-1', clock.now() + 5000).catch(() => 'refused again'), 'refused again', 'a refused claim is not kept: the retry asks Redis again');
});

t.test("Keystone's origin decoding (unquote_plus), cookies, and the callback page", async (t) => {
  t.equal(unquotePlus('https%3A%2F%2Fh.example.org%2Fa+b'), 'https://h.example.org/a b');
  t.equal(unquotePlus('https://h.example.org/%zz%41'), 'https://h.example.org/%zzA', 'a malformed escape stays');
  t.equal(unquotePlus('%E2%82%AC'), '€');
  const sid = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG';
  t.equal(stateCookieName(sid), 'ksgw_websso_abcdefghijklmnop');
  t.equal(stateCookieNameOf(sid), 'ksgw_websso_abcdefghijklmnop');
  t.equal(stateCookieNameOf('short'), undefined);
  t.equal(stateCookieNameOf(`${sid.slice(0, 42)};`), undefined);
  t.strictSame({ ...parseCookies('a=1; b=2=3;c=; a=4; =x; junk') }, { a: '1', b: '2=3', c: '' });
  const proto = parseCookies('__proto__=x; constructor=y');
  t.equal(Object.getPrototypeOf(proto), null, 'no prototype games');
  t.strictSame(Object.keys(proto), ['__proto__', 'constructor']);
  t.equal(parseCookies('')['constructor'], undefined);
  const page = ssoCallbackPage('https://h.example.org/?a="><script>alert(1)</script>&b=\'', 'tok"en<');
  t.notMatch(page, /<script>alert/);
  t.match(page, 'action="https://h.example.org/?a=&#34;&#62;&#60;script&#62;alert(1)&#60;/script&#62;&#38;b=&#39;"');
  t.match(page, 'value="tok&#34;en&#60;"');
});
