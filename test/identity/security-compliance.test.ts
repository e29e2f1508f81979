import t from 'tap';
import { PasswordEntity, UserEntity } from '../../src/store/entities.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

// Keystone's [security_compliance] options as IDENTITY_* variables: each with Keystone's statuses
// and messages, time moved on the injected clock.

const DAY = 86_400_000;
const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };

async function createUser(app: TestApp, name: string, password: string | null, options?: Record<string, unknown>) {
  const response = await app.call('POST', '/v3/users', { user: { name, password, ...(options ? { options } : {}) } });
  if (response.statusCode !== 201) throw new Error(`create ${name}: ${response.statusCode} ${response.body}`);
  return response.json().user as { id: string; password_expires_at: string | null; enabled: boolean };
}

function changePassword(app: TestApp, userId: string, original: string, password: string) {
  return app.call('POST', `/v3/users/${userId}/password`, { user: { original_password: original, password } }, null);
}

/** Keystone's naive password_expires_at for a time in milliseconds. */
function naive(milliseconds: number): string {
  return new Date(milliseconds).toISOString().replace(/\.(\d{3})Z$/, '.$1000');
}

t.test('IDENTITY_PASSWORD_REGEX and its description: every new password must match', async (t) => {
  const app = await startTestApp(t, {
    IDENTITY_PASSWORD_REGEX: '(?=.*[^a-zA-Z])(?=.*[a-zA-Z]).{8,}$',
    IDENTITY_PASSWORD_REGEX_DESCRIPTION: 'at least 8 characters, with a letter and something else.',
  });
  const expected = 'The password does not match the requirements: at least 8 characters, with a letter and something else..';
  const weakCreate = await app.call('POST', '/v3/users', { user: { name: 'weak', password: 'short1' } });
  t.equal(weakCreate.statusCode, 400);
  t.same(weakCreate.json(), { error: { code: 400, title: 'Bad Request', message: expected } });
  t.equal((await app.call('GET', '/v3/users?name=weak')).json().users.length, 0, 'nothing was created');
  const noPassword = await app.call('POST', '/v3/users', { user: { name: 'nopw', password: null } });
  t.equal(noPassword.statusCode, 400);
  t.equal(noPassword.json().error.message, 'Password validation error: Password must be a string type.');
  t.equal((await app.call('POST', '/v3/users', { user: { name: 'no-password-at-all' } })).statusCode, 201, 'no password given: nothing to check');

  const user = await createUser(app, 'strong', 'Strong-pass-1');
  const weakReset = await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'lettersonly' } });
  t.equal(weakReset.statusCode, 400);
  t.equal(weakReset.json().error.message, expected);
  app.clock.advance(60_000);
  const weakChange = await changePassword(app, user.id, 'Strong-pass-1', 'abc');
  t.equal(weakChange.statusCode, 400);
  t.equal(weakChange.json().error.message, expected);
  t.equal((await app.login({ id: user.id }, 'Strong-pass-1')).status, 201, 'the old password still works');
  t.equal((await changePassword(app, user.id, 'Strong-pass-1', 'Another-pass-2')).statusCode, 204);
  // Python's re.match: anchored at the start only.
  t.equal((await app.call('POST', '/v3/users', { user: { name: 'suffix', password: 'Abcdefg1 and more' } })).statusCode, 201);
  t.equal((await app.call('POST', '/v3/users', { user: { name: 'start', password: 'Abcdefg-' } })).statusCode, 201);
});

t.test('an unset IDENTITY_PASSWORD_REGEX_DESCRIPTION reads as Keystone formats it', async (t) => {
  const app = await startTestApp(t, { IDENTITY_PASSWORD_REGEX: '[a-z]+-' });
  const response = await app.call('POST', '/v3/users', { user: { name: 'x', password: 'no dash' } });
  t.equal(response.json().error.message, 'The password does not match the requirements: None.');
});

t.test('IDENTITY_PASSWORD_EXPIRES_DAYS: new passwords expire; ignore_password_expiry exempts', async (t) => {
  const app = await startTestApp(t, { IDENTITY_PASSWORD_EXPIRES_DAYS: '2' });
  await exemptAdmin(app, 'ignore_password_expiry');
  const created = app.clock.now();
  const user = await createUser(app, 'expiring', 'Pw-1');
  const expiresAt = Math.floor((created + 2 * DAY) / 1000) * 1000;
  t.equal(user.password_expires_at, naive(expiresAt), 'two days after it was set, in whole seconds');
  const first = await app.login({ id: user.id }, 'Pw-1');
  t.equal(first.status, 201);
  t.equal(first.body.token.user.password_expires_at, naive(expiresAt), 'the token names the expiry too');

  app.clock.set(expiresAt - 1000);
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 201, 'one second before');
  app.clock.set(expiresAt);
  const expired = await app.login({ id: user.id }, 'Pw-1');
  t.equal(expired.status, 401);
  t.same(expired.body, { error: { code: 401, title: 'Unauthorized', message: `The password is expired and needs to be changed for user: ${user.id}.` } });
  t.equal((await app.login({ id: user.id }, 'wrong')).body.error.message, GENERIC_401.error.message, 'a wrong password is not told it expired');

  // The expired password may still be used to choose a new one, which expires in turn.
  t.equal((await changePassword(app, user.id, 'Pw-1', 'Pw-2')).statusCode, 204);
  const renewed = await app.login({ id: user.id }, 'Pw-2');
  t.equal(renewed.status, 201);
  t.equal(renewed.body.token.user.password_expires_at, naive(Math.floor((expiresAt + 2 * DAY) / 1000) * 1000));

  app.adminToken = await adminToken(app);
  const exempt = await createUser(app, 'service-user', 'Pw-1', { ignore_password_expiry: true });
  t.equal(exempt.password_expires_at, null);
  app.clock.advance(30 * DAY);
  t.equal((await app.login({ id: exempt.id }, 'Pw-1')).status, 201);
  // Setting the option later exempts an already expiring password as well (checked at authentication).
  app.adminToken = await adminToken(app);
  const late = await createUser(app, 'late-exempt', 'Pw-1');
  app.clock.advance(3 * DAY);
  t.equal((await app.login({ id: late.id }, 'Pw-1')).status, 401);
  await app.call('PATCH', `/v3/users/${late.id}`, { user: { options: { ignore_password_expiry: true } } }, await adminToken(app));
  t.equal((await app.login({ id: late.id }, 'Pw-1')).status, 201);
});

/** As Keystone's documentation advises for service and admin accounts. */
async function exemptAdmin(app: TestApp, option: string): Promise<void> {
  const admin = (await app.call('GET', '/v3/users?name=admin')).json().users[0];
  const response = await app.call('PATCH', `/v3/users/${admin.id}`, { user: { options: { [option]: true } } });
  if (response.statusCode !== 200) throw new Error(`exempting admin: ${response.statusCode}`);
}

/** A fresh admin token (the one of the test setup expires when the clock moves far). */
async function adminToken(app: TestApp): Promise<string> {
  const session = await app.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret', { project: { name: 'admin', domain: { id: 'default' } } });
  if (session.status !== 201) throw new Error(`admin login: ${session.status}`);
  return session.token;
}

t.test('IDENTITY_LOCKOUT_FAILURE_ATTEMPTS and IDENTITY_LOCKOUT_DURATION', async (t) => {
  const app = await startTestApp(t, { IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '3', IDENTITY_LOCKOUT_DURATION: '600' });
  const store = app.app.store;
  const user = await createUser(app, 'target', 'Right-1');
  const count = async () => (await store.reader().findOneOrFail(UserEntity, { id: user.id })).failedAuthCount;

  // Failures are consecutive: a success starts the count again.
  for (let i = 0; i < 2; i++) t.equal((await app.login({ id: user.id }, 'wrong')).status, 401);
  t.equal(await count(), 2);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 201);
  t.equal(await count(), 0, 'a success resets the count');

  for (let i = 0; i < 3; i++) t.same((await app.login({ id: user.id }, 'wrong')).body, GENERIC_401);
  t.equal(await count(), 3);
  const locked = await app.login({ id: user.id }, 'Right-1');
  t.equal(locked.status, 401, 'locked: even the right password is refused');
  t.same(locked.body, GENERIC_401, 'with the generic body (Keystone hides "account is locked")');
  t.same((await app.login({ name: 'target', domain: { id: 'default' } }, 'Right-1')).body, GENERIC_401, 'by name too');
  const lockedChange = await changePassword(app, user.id, 'Right-1', 'New-2');
  t.same(lockedChange.json(), GENERIC_401, 'the self-service change is refused the same way');

  app.clock.advance(599_000);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 401, 'one second before the lock ends');
  app.clock.advance(1000);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 201, 'IDENTITY_LOCKOUT_DURATION later');
  t.equal(await count(), 0);

  // After a lock has run out, failures count from one again.
  for (let i = 0; i < 3; i++) await app.login({ id: user.id }, 'wrong');
  app.clock.advance(600_000);
  t.equal((await app.login({ id: user.id }, 'wrong')).status, 401);
  t.equal(await count(), 1, 'the expired lock did not carry over');

  // Wrong original passwords of the self-service change count as well.
  for (let i = 0; i < 2; i++) t.equal((await changePassword(app, user.id, 'wrong', 'New-2')).statusCode, 401);
  t.equal(await count(), 3);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 401);

  // An administrator re-enabling the user clears the lock, as in Keystone.
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } }, await adminToken(app))).statusCode, 200);
  t.equal(await count(), 0);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 201);

  const exempt = await createUser(app, 'robot', 'Right-1', { ignore_lockout_failure_attempts: true });
  for (let i = 0; i < 6; i++) await app.login({ id: exempt.id }, 'wrong');
  t.equal((await app.login({ id: exempt.id }, 'Right-1')).status, 201, 'ignore_lockout_failure_attempts: never locked');
});

t.test('without IDENTITY_LOCKOUT_FAILURE_ATTEMPTS nobody is locked and nothing is counted', async (t) => {
  const app = await startTestApp(t);
  const user = await createUser(app, 'free', 'Right-1');
  for (let i = 0; i < 8; i++) await app.login({ id: user.id }, 'wrong');
  t.equal((await app.app.store.reader().findOneOrFail(UserEntity, { id: user.id })).failedAuthCount, 0);
  t.equal((await app.login({ id: user.id }, 'Right-1')).status, 201);
});

t.test('IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE: counted in UTC days since the last login', async (t) => {
  const app = await startTestApp(t, { IDENTITY_DISABLE_USER_ACCOUNT_DAYS_INACTIVE: '3' });
  await exemptAdmin(app, 'ignore_user_inactivity');
  // Move to 23:00 UTC, so "days" are visibly calendar days and not 24-hour periods.
  const midnight = Math.ceil(app.clock.now() / DAY) * DAY;
  app.clock.set(midnight - 3_600_000);
  app.adminToken = await adminToken(app);
  const user = await createUser(app, 'sleepy', 'Pw-1');
  const exempt = await createUser(app, 'cron', 'Pw-1', { ignore_user_inactivity: true });
  t.equal(user.enabled, true);

  app.clock.set(midnight + 2 * DAY - 60_000); // two days and 22:59 later, still day +2
  const active = await app.login({ id: user.id }, 'Pw-1');
  t.equal(active.status, 201, 'day +2: still active; the login counts as activity');
  const lastActive = (await app.app.store.reader().findOneOrFail(UserEntity, { id: user.id })).lastActiveAt;
  t.equal(lastActive?.getTime(), app.clock.now());

  app.clock.set(midnight + 4 * DAY + 60_000); // day +5 since creation, day +3 since the login
  const inactive = await app.login({ id: user.id }, 'Pw-1');
  t.same(inactive.body, GENERIC_401, 'inactive: the generic 401');
  const admin = await adminToken(app);
  const shown = await app.call('GET', `/v3/users/${user.id}`, undefined, admin);
  t.equal(shown.json().user.enabled, false, 'and shown as disabled');
  t.equal((await app.app.store.reader().findOneOrFail(UserEntity, { id: user.id })).enabled, true, 'the stored flag is untouched (as in Keystone)');
  const whileInactive = await changePassword(app, user.id, 'Pw-1', 'Pw-2');
  t.equal(whileInactive.json().error.message, `The account is disabled for user: ${user.id}.`);
  t.equal((await app.login({ id: exempt.id }, 'Pw-1')).status, 201, 'ignore_user_inactivity exempts');

  const reenabled = await app.call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } }, admin);
  t.equal(reenabled.json().user.enabled, true, 're-enabling starts the count again');
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 201);
});

t.test('IDENTITY_UNIQUE_LAST_PASSWORD_COUNT: self-service changes must differ from the last N', async (t) => {
  const app = await startTestApp(t, { IDENTITY_UNIQUE_LAST_PASSWORD_COUNT: '2' });
  const user = await createUser(app, 'rotator', 'Pw-1');
  const refused =
    'The new password cannot be identical to a previous password. The total number which includes the new password must be unique is 2.';
  app.clock.advance(1000);
  const same = await changePassword(app, user.id, 'Pw-1', 'Pw-1');
  t.equal(same.statusCode, 400);
  t.same(same.json(), { error: { code: 400, title: 'Bad Request', message: refused } });
  app.clock.advance(1000);
  t.equal((await changePassword(app, user.id, 'Pw-1', 'Pw-2')).statusCode, 204);
  app.clock.advance(1000);
  t.equal((await changePassword(app, user.id, 'Pw-2', 'Pw-1')).json().error.message, refused, 'the previous one is among the last two');
  app.clock.advance(1000);
  t.equal((await changePassword(app, user.id, 'Pw-2', 'Pw-3')).statusCode, 204);
  app.clock.advance(1000);
  t.equal((await changePassword(app, user.id, 'Pw-3', 'Pw-1')).statusCode, 204, 'three passwords back is allowed again');
  t.equal((await app.login({ id: user.id }, 'Pw-1')).status, 201);

  // An administrator's reset is not checked against the history.
  app.clock.advance(1000);
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-1' } }, await adminToken(app))).statusCode, 200);
  // History is trimmed as Keystone trims it: N rows are kept, plus the new one.
  const rows = await app.app.store.reader().find(PasswordEntity, { userId: user.id });
  t.equal(rows.length, 3);
  t.equal(rows.filter((row) => row.expiresAt === null).length, 1, 'earlier passwords are marked expired');
});

t.test('IDENTITY_MINIMUM_PASSWORD_AGE: a self-chosen password is kept that many days', async (t) => {
  const app = await startTestApp(t, { IDENTITY_MINIMUM_PASSWORD_AGE: '2' });
  const user = await createUser(app, 'hasty', 'Pw-1');
  t.equal((await changePassword(app, user.id, 'Pw-1', 'Pw-2')).statusCode, 204, 'a password set by an administrator may be changed at once');
  app.clock.advance(3_600_000);
  const tooSoon = await changePassword(app, user.id, 'Pw-2', 'Pw-3');
  t.equal(tooSoon.statusCode, 400);
  t.equal(
    tooSoon.json().error.message,
    'You cannot change your password at this time due to the minimum password age. Once you change your password, it must ' +
      'be used for 2 day(s) before it can be changed. Please try again in 1 day(s) or contact your administrator to reset your password.',
  );
  app.clock.advance(DAY);
  t.match((await changePassword(app, user.id, 'Pw-2', 'Pw-3')).json().error.message, /Please try again in 0 day\(s\)/);
  app.clock.advance(DAY - 3_600_000);
  t.equal((await changePassword(app, user.id, 'Pw-2', 'Pw-3')).statusCode, 204, 'two days later');
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-4' } }, await adminToken(app))).statusCode, 200, 'an administrator is not held');
});

t.test('IDENTITY_CHANGE_PASSWORD_UPON_FIRST_USE: passwords an administrator sets start expired', async (t) => {
  const app = await startTestApp(t, { IDENTITY_CHANGE_PASSWORD_UPON_FIRST_USE: 'true' });
  const created = app.clock.now();
  const user = await createUser(app, 'newcomer', 'Initial-1');
  t.equal(user.password_expires_at, naive(created));
  const first = await app.login({ id: user.id }, 'Initial-1');
  t.equal(first.status, 401);
  t.equal(first.body.error.message, `The password is expired and needs to be changed for user: ${user.id}.`);
  app.clock.advance(60_000);
  t.equal((await changePassword(app, user.id, 'Initial-1', 'Mine-2')).statusCode, 204);
  const mine = await app.login({ id: user.id }, 'Mine-2');
  t.equal(mine.status, 201);
  t.equal(mine.body.token.user.password_expires_at, null, 'a password the user chose does not expire');

  app.clock.advance(60_000);
  const reset = await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Reset-3' } });
  t.equal(reset.json().user.password_expires_at, naive(app.clock.now()), 'an administrator reset expires at once');
  t.equal((await app.login({ id: user.id }, 'Reset-3')).status, 401);

  const exempt = await createUser(app, 'service', 'Svc-1', { ignore_change_password_upon_first_use: true });
  t.equal(exempt.password_expires_at, null);
  t.equal((await app.login({ id: exempt.id }, 'Svc-1')).status, 201);
  t.equal((await app.login({ name: 'admin', domain: { id: 'default' } }, 'admin-secret')).status, 201, "bootstrap's admin password is the operator's: not expired");
});

t.test('lock_password: no self-service change; an administrator may still reset', async (t) => {
  const app = await startTestApp(t);
  const user = await createUser(app, 'kiosk', 'Pw-1', { lock_password: true });
  const refused = await changePassword(app, user.id, 'Pw-1', 'Pw-2');
  t.equal(refused.statusCode, 400);
  t.equal(
    refused.json().error.message,
    'You cannot change your password at this time due to password policy disallowing password changes. Please contact your administrator to reset your password.',
  );
  t.equal((await changePassword(app, user.id, 'wrong', 'Pw-2')).statusCode, 401, 'the original password is checked first');
  t.equal((await app.call('PATCH', `/v3/users/${user.id}`, { user: { password: 'Pw-3' } })).statusCode, 200);
  t.equal((await app.login({ id: user.id }, 'Pw-3')).status, 201);
});
