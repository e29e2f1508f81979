import t from 'tap';
import type { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import { totpPasscode } from '../../src/token/totp.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';

// Keystone's MFA rules (user options multi_factor_auth_rules / multi_factor_auth_enabled) and auth
// receipts (the Openstack-Auth-Receipt 401), as the live Keystone 22 answered (spec §2.8; compared
// with it in test/e2e/mfa-keystone.test.ts).

const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };
const SEED = Buffer.from('12345678901234567890');
const SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
const PASSWORD = 'Pw-secret-1';

/** A user with a role on a new project, a totp credential, and the given options. */
async function mfaUser(test: TestApp, name: string, options: Record<string, unknown>) {
  const { call } = test;
  const project = (await call('POST', '/v3/projects', { project: { name: `${name}-project`, domain_id: 'default' } })).json().project;
  const created = await call('POST', '/v3/users', { user: { name, password: PASSWORD, domain_id: 'default', options } });
  t.equal(created.statusCode, 201);
  const user = created.json().user;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${member.id}`);
  t.equal((await call('POST', '/v3/credentials', { credential: { type: 'totp', blob: SECRET, user_id: user.id } })).statusCode, 201);
  return { user, project };
}

function auth(test: TestApp, identity: Record<string, unknown>, receipt?: string, scope?: unknown) {
  return test.request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', ...(receipt !== undefined ? { 'openstack-auth-receipt': receipt } : {}) },
    payload: { auth: { identity, ...(scope ? { scope } : {}) } },
  });
}

const password = (userId: string, secret = PASSWORD) => ({ methods: ['password'], password: { user: { id: userId, password: secret } } });
const totp = (test: TestApp, userId: string) => ({ methods: ['totp'], totp: { user: { id: userId, passcode: totpPasscode(SEED, test.clock.now() / 1000) } } });

t.test('rules not satisfied: the receipt 401; completing with the missing method gives the union', async (t) => {
  const test = await startTestApp(t);
  const { user, project } = await mfaUser(test, 'mfa-alice', { multi_factor_auth_rules: [['password', 'totp']] });
  t.same((await test.call('GET', `/v3/users/${user.id}`)).json().user.options, { multi_factor_auth_rules: [['password', 'totp']] }, 'options echoed as given');

  const partial = await auth(test, password(user.id), undefined, { project: { id: project.id } });
  t.equal(partial.statusCode, 401);
  const receipt = partial.headers['openstack-auth-receipt'] as string;
  t.match(receipt, /^gAAAAA[A-Za-z0-9_-]+$/, 'a Fernet receipt, unpadded');
  t.notOk('www-authenticate' in partial.headers, 'no WWW-Authenticate on a receipt 401');
  t.match(partial.headers['content-type'], /^application\/json/);
  const issuedAt = Math.floor(test.clock.now() / 1000) * 1000;
  const time = (ms: number) => `${new Date(ms).toISOString().slice(0, -5)}.000000Z`;
  t.strictSame(partial.json(), {
    receipt: {
      methods: ['password'],
      user: { id: user.id, name: 'mfa-alice', domain: { id: 'default', name: 'Default' } },
      expires_at: time(issuedAt + 300_000),
      issued_at: time(issuedAt),
    },
    required_auth_methods: [['password', 'totp']],
  });

  // The receipt is Keystone's payload: [user id pair, methods bitmask, expires_at], no version.
  const opened = (test.app.tokenProvider as FernetTokenProvider).decodeReceipt(receipt);
  t.same(opened, { payload: { userId: user.id, methods: ['password'], expiresAt: issuedAt / 1000 + 300 }, issuedAt: issuedAt / 1000 });

  test.clock.advance(10_000);
  const done = await auth(test, totp(test, user.id), receipt, { project: { id: project.id } });
  t.equal(done.statusCode, 201);
  t.same(done.json().token.methods, ['totp', 'password'], 'the union, as Keystone decodes it');
  t.equal(done.json().token.project.id, project.id);
  const validated = await test.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': done.headers['x-subject-token'] as string });
  t.same(validated.json().token.methods, ['totp', 'password']);

  // Both methods at once need no receipt; totp alone is a receipt the other way round.
  const both = await auth(test, { methods: ['password', 'totp'], password: password(user.id).password, totp: totp(test, user.id).totp });
  t.equal(both.statusCode, 201);
  const totpOnly = await auth(test, totp(test, user.id));
  t.equal(totpOnly.statusCode, 401);
  t.same(totpOnly.json().receipt.methods, ['totp']);
  t.same((await auth(test, password(user.id), totpOnly.headers['openstack-auth-receipt'] as string)).statusCode, 201);

  // The scope is looked up first (generic 401), its roles after the rules (a receipt).
  t.same((await auth(test, password(user.id), undefined, { project: { id: 'no-such-project' } })).json(), GENERIC_401);
  const roleless = (await test.call('POST', '/v3/projects', { project: { name: 'mfa-roleless', domain_id: 'default' } })).json().project;
  t.ok((await auth(test, password(user.id), undefined, { project: { id: roleless.id } })).headers['openstack-auth-receipt'], 'no role there: still a receipt first');
  t.same((await auth(test, totp(test, user.id), receipt, { project: { id: roleless.id } })).json(), GENERIC_401, 'then the generic 401');

  // A receipt is reusable until it expires (Keystone keeps no record of them).
  t.equal((await auth(test, totp(test, user.id), receipt)).statusCode, 201);
});

t.test('a receipt that is garbage, expired or another user\'s: "Could not find auth receipt"', async (t) => {
  const test = await startTestApp(t);
  const { user } = await mfaUser(test, 'mfa-bob', { multi_factor_auth_rules: [['password', 'totp']] });
  const other = await mfaUser(test, 'mfa-carol', { multi_factor_auth_rules: [['password', 'totp']] });
  const notFound = (receipt: string) => ({ error: { code: 401, title: 'Unauthorized', message: `Could not find auth receipt: ${receipt}.` } });

  const garbage = await auth(test, password(user.id), 'garbage-receipt');
  t.equal(garbage.statusCode, 401);
  t.same(garbage.json(), notFound('garbage-receipt'), 'the header echoed, as the live Keystone does');
  t.equal(garbage.headers['www-authenticate'], `Keystone uri="${PUBLIC_URL}/v3"`);
  t.same((await auth(test, password(user.id, 'wrong'), 'garbage-receipt')).json(), GENERIC_401, 'a wrong password is answered first');

  const carols = (await auth(test, password(other.user.id))).headers['openstack-auth-receipt'] as string;
  t.same((await auth(test, totp(test, user.id), carols)).json(), notFound(carols), "another user's receipt");

  const bobs = (await auth(test, password(user.id))).headers['openstack-auth-receipt'] as string;
  test.clock.advance(299_000);
  t.equal((await auth(test, totp(test, user.id), bobs)).statusCode, 201, 'one second before it expires');
  test.clock.advance(1000);
  t.same((await auth(test, totp(test, user.id), bobs)).json(), notFound(bobs), 'RECEIPT_EXPIRATION (300 s) later');

  // A receipt is checked even for a user without rules, as Keystone does.
  const plain = (await test.call('POST', '/v3/users', { user: { name: 'mfa-plain', password: PASSWORD } })).json().user;
  t.same((await auth(test, password(plain.id), 'nope')).json(), notFound('nope'));
  t.equal((await auth(test, password(plain.id), '')).statusCode, 201, 'an empty header is no receipt');
});

t.test('rules disabled, rules naming methods that are not enabled, option validation', async (t) => {
  const test = await startTestApp(t);
  const { user } = await mfaUser(test, 'mfa-dave', { multi_factor_auth_rules: [['password', 'totp']], multi_factor_auth_enabled: false });
  t.equal((await auth(test, password(user.id))).statusCode, 201, 'multi_factor_auth_enabled false');
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_enabled: null } } });
  t.equal((await auth(test, password(user.id))).statusCode, 401, 'removing it enables the rules again');
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_rules: [['bogus']] } } });
  t.equal((await auth(test, password(user.id))).statusCode, 201, 'a rule of unknown methods only is satisfied by anything');
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_rules: [['password', 'bogus']] } } });
  t.equal((await auth(test, password(user.id))).statusCode, 201, 'unknown methods are dropped from a rule');
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_rules: [['token', 'password'], ['mapped', 'token'], ['oauth1', 'password', 'external']] } } });
  const partial = await auth(test, password(user.id));
  t.equal(partial.statusCode, 401, 'known but unsupported methods (mapped, oauth1, external) still count, as in Keystone');
  t.same(partial.json().required_auth_methods, [['token', 'password'], ['oauth1', 'password', 'external']], 'the rules that share a method with those used');
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_rules: null } } });
  t.equal((await auth(test, password(user.id))).statusCode, 201, 'null removes the rules');
  t.same((await test.call('GET', `/v3/users/${user.id}`)).json().user.options, {});

  for (const rules of [[[]], [['password'], ['password']], [['password', 'password']], 'x', [[1]]]) {
    const refused = await test.call('POST', '/v3/users', { user: { name: `mfa-bad-${JSON.stringify(rules)}`, options: { multi_factor_auth_rules: rules } } });
    t.equal(refused.statusCode, 400, `refused: ${JSON.stringify(rules)}`);
  }
  t.equal((await test.call('POST', '/v3/users', { user: { name: 'mfa-odd', options: { multi_factor_auth_rules: [['']] } } })).statusCode, 201, '[[""]] is accepted, as by Keystone');
  t.equal((await test.call('POST', '/v3/users', { user: { name: 'mfa-bad-enabled', options: { multi_factor_auth_enabled: 'yes' } } })).statusCode, 400);
});

t.test('application credentials and token re-scoping are under the rules too, as in Keystone', async (t) => {
  const test = await startTestApp(t);
  const { user, project } = await mfaUser(test, 'mfa-erin', {});
  const before = await auth(test, password(user.id), undefined, { project: { id: project.id } });
  const token = before.headers['x-subject-token'] as string;
  const credential = (await test.call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'ac', secret: 'ac-secret' } }, token)).json().application_credential;
  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_rules: [['password', 'totp']] } } });

  const rescope = await auth(test, { methods: ['token'], token: { id: token } });
  t.equal(rescope.statusCode, 401, "re-scoping a password token: {password, token} satisfies no rule (live)");
  t.same(rescope.json().receipt.methods, ['password', 'token']);
  t.same(rescope.json().required_auth_methods, [['password', 'totp']]);
  const completed = await auth(test, totp(test, user.id), rescope.headers['openstack-auth-receipt'] as string);
  t.equal(completed.statusCode, 201);
  t.same(completed.json().token.methods, ['totp', 'token', 'password']);
  const rescoped = await auth(test, { methods: ['token'], token: { id: completed.headers['x-subject-token'] } }, undefined, { project: { id: project.id } });
  t.equal(rescoped.statusCode, 201, 'a token that satisfied the rules re-scopes freely');

  const appcred = await auth(test, { methods: ['application_credential'], application_credential: { id: credential.id, secret: 'ac-secret' } });
  t.equal(appcred.statusCode, 401);
  t.same(appcred.json().receipt.methods, ['application_credential']);
  t.same(appcred.json().required_auth_methods, [], 'no rule shares a method with it (live)');
  t.same((await auth(test, { methods: ['application_credential'], application_credential: { id: credential.id, secret: 'wrong' } })).json(), GENERIC_401);

  await test.call('PATCH', `/v3/users/${user.id}`, { user: { options: { multi_factor_auth_enabled: false } } });
  t.equal((await auth(test, { methods: ['application_credential'], application_credential: { id: credential.id, secret: 'ac-secret' } })).statusCode, 201, 'rules disabled');
});
