import { spawnSync } from 'node:child_process';
import t from 'tap';
import { UserEntity } from '../../src/store/entities.ts';
import { acceptedPasscodes, decodeBase32Secret, passcodeMatches, totpPasscode } from '../../src/token/totp.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { ensureDebianPackages } from '../helpers/debian-packages.ts';

const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };

// RFC 6238 appendix B: the SHA1 seed "12345678901234567890", 8 digits.
const RFC_SEED = Buffer.from('12345678901234567890');
const RFC_VECTORS: [number, string][] = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
  [20000000000, '65353130'],
];
// base32 of the RFC seed (what a totp credential's blob holds), without padding.
const RFC_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

t.test('RFC 6238 test vectors (HMAC-SHA1)', async (t) => {
  for (const [time, expected] of RFC_VECTORS) t.equal(totpPasscode(RFC_SEED, time, { digits: 8 }), expected, `T = ${time}`);
  // 6 digits (Keystone's) are the last 6 of the 8.
  for (const [time, expected] of RFC_VECTORS) t.equal(totpPasscode(RFC_SEED, time), expected.slice(2), `T = ${time}, 6 digits`);
  t.same(decodeBase32Secret(RFC_SECRET), RFC_SEED);
});

t.test('base32 secrets as Keystone decodes them (padding optional, upper case, valid lengths)', async (t) => {
  t.same(decodeBase32Secret('MZXW6==='), Buffer.from('foo'), 'padded');
  t.same(decodeBase32Secret('MZXW6'), Buffer.from('foo'), 'padding optional');
  t.equal(decodeBase32Secret('mzxw6'), null, 'lower case: b32decode without casefold refuses it');
  t.equal(decodeBase32Secret('MZXW6Y1'), null, 'not in the alphabet');
  t.equal(decodeBase32Secret('MZX'), null, 'a length base32 never produces');
  t.equal(passcodeMatches(['not base32!', RFC_SECRET], totpPasscode(RFC_SEED, 59), 59, 0), true, 'a broken credential does not stop the others');
  t.equal(passcodeMatches([RFC_SECRET], 287082, 59, 0), false, 'a number is not the passcode (Keystone compares strings)');
});

t.test('window: the current step and [totp] included_previous_windows before it', async (t) => {
  const now = 1_800_000_015;
  const codes = acceptedPasscodes(RFC_SEED, now, 1);
  t.same(codes, [totpPasscode(RFC_SEED, now), totpPasscode(RFC_SEED, now - 30)]);
  t.ok(passcodeMatches([RFC_SECRET], totpPasscode(RFC_SEED, now - 30), now, 1), 'the previous step is accepted');
  t.notOk(passcodeMatches([RFC_SECRET], totpPasscode(RFC_SEED, now - 60), now, 1), 'two steps back is not');
  t.notOk(passcodeMatches([RFC_SECRET], totpPasscode(RFC_SEED, now - 30), now, 0), 'with 0 previous windows only the current step');
  t.ok(passcodeMatches([RFC_SECRET], totpPasscode(RFC_SEED, now - 60), now, 2));
  t.notOk(passcodeMatches([RFC_SECRET], totpPasscode(RFC_SEED, now + 30), now, 1), 'a future step is not');
});

t.test('agrees with an independent generator (pyotp, Debian python3-pyotp)', async (t) => {
  ensureDebianPackages(['python3-pyotp']);
  // Debian's interpreter (a python3 earlier on PATH may not see Debian's packages).
  const secrets = [RFC_SECRET, 'JBSWY3DPEHPK3PXP', 'HUSLDQ5D5CTST3JNJ6VHACTSTRVWZ7MWMHVC4KYUU7LCW6RRFMWQ'];
  const times = [0, 59, 1_700_000_000, 1_800_000_029, 2_000_000_000];
  const script = `import pyotp, json, sys
out = []
for s in ${JSON.stringify(secrets)}:
    for t in ${JSON.stringify(times)}:
        out.append(pyotp.TOTP(s).at(t))
print(json.dumps(out))`;
  const run = spawnSync('/usr/bin/python3', ['-c', script], { encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const theirs = JSON.parse(run.stdout) as string[];
  const ours = secrets.flatMap((secret) => times.map((time) => totpPasscode(decodeBase32Secret(secret)!, time)));
  t.same(ours, theirs);
  t.equal(ours.length, 15);
});

/** A user with a totp credential (blob = base32 secret), and a way to log in with a passcode. */
async function totpUser(test: TestApp, name: string, secret = RFC_SECRET) {
  const user = (await test.call('POST', '/v3/users', { user: { name, password: 'Pw-secret-1', domain_id: 'default' } })).json().user;
  const credential = await test.call('POST', '/v3/credentials', { credential: { type: 'totp', blob: secret, user_id: user.id } });
  t.equal(credential.statusCode, 201);
  const login = async (passcode: unknown, reference: Record<string, unknown> = { id: user.id }) => {
    const response = await test.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['totp'], totp: { user: { ...reference, passcode } } } } }, null);
    return { status: response.statusCode, body: response.json(), headers: response.headers };
  };
  return { user, login };
}

t.test('the totp method: by id and by name, the window, the generic 401', async (t) => {
  const test = await startTestApp(t);
  const { user, login } = await totpUser(test, 'totp-alice');
  const now = () => test.clock.now() / 1000;

  const byId = await login(totpPasscode(RFC_SEED, now()));
  t.equal(byId.status, 201);
  t.same(byId.body.token.methods, ['totp']);
  t.equal(byId.body.token.user.id, user.id);
  t.match(byId.headers['x-subject-token'], /^gAAAAA/);
  const validated = await test.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': byId.headers['x-subject-token'] as string });
  t.same(validated.json().token.methods, ['totp'], 'totp decodes from the token (bit 64)');

  t.equal((await login(totpPasscode(RFC_SEED, now()), { name: 'totp-alice', domain: { name: 'Default' } })).status, 201, 'by name');
  t.equal((await login(totpPasscode(RFC_SEED, now() - 30))).status, 201, 'the previous step');
  const old = await login(totpPasscode(RFC_SEED, now() - 60));
  t.equal(old.status, 401);
  t.same(old.body, GENERIC_401);
  t.same((await login('000000x')).body, GENERIC_401);
  t.same((await login(Number(totpPasscode(RFC_SEED, now())))).body, GENERIC_401, 'a number is refused');
  const nobody = await login(totpPasscode(RFC_SEED, now()), { id: 'nobody' });
  t.same(nobody.body, GENERIC_401, 'an unknown user: the same answer');

  // A second credential: either secret works; another user's does not.
  await test.call('POST', '/v3/credentials', { credential: { type: 'totp', blob: 'JBSWY3DPEHPK3PXP', user_id: user.id } });
  t.equal((await login(totpPasscode(decodeBase32Secret('JBSWY3DPEHPK3PXP')!, now()))).status, 201);
  const other = await totpUser(test, 'totp-bob', 'HUSLDQ5D5CTST3JNJ6VHACTSTRVWZ7MWMHVC4KYUU7LCW6RRFMWQ');
  t.equal((await other.login(totpPasscode(RFC_SEED, now()))).status, 401, "another user's secret does not log bob in");

  // Malformed requests are 400 as for Keystone's TOTPUserInfo.
  const noUser = await test.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['totp'], totp: {} } } }, null);
  t.equal(noUser.statusCode, 400);
  t.match(noUser.json().error.message, /^Expecting to find user in totp\./);
  const noDomain = await test.call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['totp'], totp: { user: { name: 'totp-alice', passcode: '1' } } } } }, null);
  t.match(noDomain.json().error.message, /^Expecting to find domain in user\./);

  // password + totp: one token with both methods, listed as Keystone decodes them.
  const both = await test.call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['password', 'totp'], password: { user: { id: user.id, password: 'Pw-secret-1' } }, totp: { user: { id: user.id, passcode: totpPasscode(RFC_SEED, now()) } } } },
  }, null);
  t.equal(both.statusCode, 201);
  t.same(both.json().token.methods, ['totp', 'password']);
  const mixed = await test.call('POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['password', 'totp'], password: { user: { id: user.id, password: 'Pw-secret-1' } }, totp: { user: { id: other.user.id, passcode: totpPasscode(decodeBase32Secret('HUSLDQ5D5CTST3JNJ6VHACTSTRVWZ7MWMHVC4KYUU7LCW6RRFMWQ')!, now()) } } } },
  }, null);
  t.equal(mixed.statusCode, 401, 'two methods for two users');
});

t.test('TOTP failures count towards the lockout; a locked account is refused; TOTP_INCLUDED_PREVIOUS_WINDOWS=0', async (t) => {
  const test = await startTestApp(t, { IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '3', IDENTITY_LOCKOUT_DURATION: '600', TOTP_INCLUDED_PREVIOUS_WINDOWS: '0' });
  const { user, login } = await totpUser(test, 'totp-locked');
  const now = () => test.clock.now() / 1000;
  const count = async () => (await test.app.store.reader().findOneOrFail(UserEntity, { id: user.id })).failedAuthCount;

  t.equal((await login(totpPasscode(RFC_SEED, now() - 30))).status, 401, 'no previous window with 0');
  t.equal(await count(), 1);
  t.equal((await login(totpPasscode(RFC_SEED, now()))).status, 201);
  t.equal(await count(), 0, 'a success resets the count');
  for (let i = 0; i < 3; i++) t.same((await login('123456')).body, GENERIC_401);
  t.equal(await count(), 3);
  t.same((await login(totpPasscode(RFC_SEED, now()))).body, GENERIC_401, 'locked: even the right passcode is refused');
  t.equal((await test.login({ id: user.id }, 'Pw-secret-1')).status, 401, 'and the right password');
  test.clock.advance(600_000);
  t.equal((await login(totpPasscode(RFC_SEED, now()))).status, 201, 'IDENTITY_LOCKOUT_DURATION later');
});

t.test('passcode guesses share the per-user rate limit with passwords; a receipt 401 uses none of it', async (t) => {
  const test = await startTestApp(t, { AUTH_RATE_LIMIT_PER_USER: '3' });
  test.clock.set(Math.ceil(test.clock.now() / 60_000) * 60_000);
  const { user, login } = await totpUser(test, 'totp-guessed');
  t.equal((await login('000001')).status, 401);
  t.equal((await login('000002', { name: 'totp-guessed', domain: { id: 'default' } })).status, 401);
  t.equal((await test.login({ id: user.id }, 'wrong')).status, 401);
  const limited = await login(totpPasscode(RFC_SEED, test.clock.now() / 1000));
  t.equal(limited.status, 429, 'the fourth attempt is not checked, whatever the method');

  const other = await totpUser(test, 'totp-receipts');
  await test.call('PATCH', `/v3/users/${other.user.id}`, { user: { options: { multi_factor_auth_rules: [['password', 'totp']] } } });
  for (let i = 0; i < 4; i++) t.equal((await test.login({ id: other.user.id }, 'Pw-secret-1')).status, 401, `receipt ${i + 1}`);
  t.equal((await other.login(totpPasscode(RFC_SEED, test.clock.now() / 1000))).status, 401, 'still a receipt, not a 429');
});
