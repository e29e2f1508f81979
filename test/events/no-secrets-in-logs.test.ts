import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { pino } from 'pino';
import { ADMIN_PASSWORD } from '../helpers/app.ts';
import { gatewayWorld } from '../helpers/gateway.ts';
import { oauthlibAuthorization, type OAuthSigning } from '../helpers/oauth1-signer.ts';
import { testRedis } from '../helpers/redis.ts';
import { rawRequest } from '../helpers/upstream.ts';
import { decodeBase32Secret, totpPasscode } from '../../src/token/totp.ts';

// A full flow through both faces, logging everything down to trace; then every log line (and every
// entry of the Redis audit stream) is searched for every password, secret, token and key used.

t.test('no password, secret or token ever appears in a log line or the audit stream', async (t) => {
  const redis = await testRedis(t);
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) });
  const stream = redis ? `${redis.prefix}audit` : undefined;
  const w = await gatewayWorld(
    t,
    {
      IDENTITY_LOCKOUT_FAILURE_ATTEMPTS: '2',
      IDENTITY_PASSWORD_REGEX: '(?!.*Weak)',
      IDENTITY_PASSWORD_REGEX_DESCRIPTION: 'not weak',
      ...(redis && stream ? { REDIS_URL: 'redis://127.0.0.1:6379', AUDIT_STREAM: stream, RATE_LIMIT_KEY_PREFIX: `${redis.prefix}ratelimit:` } : {}),
    },
    { logger },
  );
  const { call, login, request, config, clock } = w.testApp;
  const secrets = new Set<string>([ADMIN_PASSWORD, w.member, w.reader, w.admin]);
  const remember = <T extends string>(secret: T): T => {
    secrets.add(secret);
    return secret;
  };

  // Users and passwords: create, good and bad logins, lockout, self-service change, admin reset.
  const password = remember('Quartz-Lantern-41');
  const user = (await call('POST', '/v3/users', { user: { name: 'dora', password } })).json().user;
  t.equal((await call('POST', '/v3/users', { user: { name: 'weak', password: remember('Weak-Password-Example') } })).statusCode, 400);
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${w.projectId}/users/${user.id}/roles/${member.id}`);
  const session = await login({ name: 'dora', domain: { name: 'Default' } }, password, { project: { id: w.projectId } });
  t.equal(session.status, 201);
  remember(session.token);
  for (const guess of ['Wrong-Guess-Alpha', 'Wrong-Guess-Bravo', 'Wrong-Guess-Charlie']) {
    t.equal((await login({ id: user.id }, remember(guess))).status, 401);
  }
  await call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } });
  const changed = remember('Velvet-Harbor-83');
  t.equal((await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: password, password: changed } }, null)).statusCode, 204);
  t.equal((await call('POST', `/v3/users/${user.id}/password`, { user: { original_password: remember('Not-The-Original-9'), password: 'Whatever-Else-1' } }, null)).statusCode, 401);
  const reset = remember('Copper-Meadow-52');
  t.equal((await call('PATCH', `/v3/users/${user.id}`, { user: { password: reset } })).statusCode, 200);
  clock.advance(1000); // tokens issued in the second of a revocation are revoked by it

  // Tokens: issue, validate, check, rescope, revoke; a garbage one.
  const fresh = await login({ id: user.id }, reset);
  remember(fresh.token);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': fresh.token })).statusCode, 200);
  t.equal((await call('HEAD', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': fresh.token })).statusCode, 200);
  const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: fresh.token } }, scope: { project: { id: w.projectId } } } }, null);
  t.equal(rescoped.statusCode, 201);
  const scoped = remember(String(rescoped.headers['x-subject-token']));
  t.equal((await call('GET', '/v3/auth/projects', undefined, scoped)).statusCode, 200);
  t.equal((await call('GET', '/v3/users', undefined, remember('gAAAAABgarbage-but-secret-looking-token'))).statusCode, 401);

  // Application credentials: the secret is shown once, then used, and guessed.
  const created = await call('POST', `/v3/users/${user.id}/application_credentials`, { application_credential: { name: 'bot' } }, scoped);
  t.equal(created.statusCode, 201);
  const credential = created.json().application_credential;
  remember(credential.secret);
  const byCredential = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: credential.secret } } } }, null);
  t.equal(byCredential.statusCode, 201);
  const credentialToken = remember(String(byCredential.headers['x-subject-token']));
  const guessed = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['application_credential'], application_credential: { id: credential.id, secret: remember('guessed-secret-value-1234') } } } }, null);
  t.equal(guessed.statusCode, 401);

  // Credentials: blobs are secrets (created, read, listed, updated, refused), as are EC2 secrets and
  // the signatures and tokens of /v3/ec2tokens.
  const blob = remember('Credential-Blob-Secret-77');
  const cert = await call('POST', '/v3/credentials', { credential: { type: 'cert', blob, user_id: user.id } });
  t.equal(cert.statusCode, 201);
  t.equal((await call('GET', `/v3/credentials/${cert.json().credential.id}`)).statusCode, 200);
  t.equal((await call('GET', '/v3/credentials')).statusCode, 200);
  t.equal((await call('PATCH', `/v3/credentials/${cert.json().credential.id}`, { credential: { blob: remember('Credential-Blob-Updated-78') } })).statusCode, 200);
  t.equal((await call('POST', '/v3/credentials', { credential: { type: 'ec2', blob: remember('Not-Json-Blob-Secret-79'), user_id: user.id, project_id: w.projectId } })).statusCode, 400);
  const ec2 = (await call('POST', `/v3/users/${user.id}/credentials/OS-EC2`, { tenant_id: w.projectId })).json().credential;
  remember(ec2.secret);
  const signed = await call('POST', '/v3/ec2tokens', { credentials: { access: ec2.access, signature: remember('Ec2-Signature-Guess-80'), host: 'h', verb: 'GET', path: '/', params: { SignatureVersion: '2' } } });
  t.equal(signed.statusCode, 401);
  // OS-OAUTH1: the consumer's, the request token's and the access token's secrets, and the token they give.
  const adminProject = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': w.testApp.adminToken })).json().token.project.id;
  const consumer = (await call('POST', '/v3/OS-OAUTH1/consumers', { consumer: { description: 'logs' } })).json().consumer;
  remember(consumer.secret);
  const oauthSigned = (route: string, signing: Partial<OAuthSigning>) =>
    oauthlibAuthorization({ url: `${config.publicUrl}${route}`, consumerKey: consumer.id, consumerSecret: consumer.secret, timestamp: String(Math.floor(clock.now() / 1000)), nonce: randomBytes(8).toString('hex'), ...signing });
  const requestToken = new URLSearchParams(
    (await request({ method: 'POST', url: '/v3/OS-OAUTH1/request_token', headers: { authorization: oauthSigned('/v3/OS-OAUTH1/request_token', { callback: 'oob' }), 'requested-project-id': adminProject } })).body,
  );
  remember(requestToken.get('oauth_token_secret')!);
  const verifier = (await call('PUT', `/v3/OS-OAUTH1/authorize/${requestToken.get('oauth_token')}`, { roles: [{ name: 'reader' }] })).json().token.oauth_verifier;
  const accessToken = new URLSearchParams(
    (
      await request({
        method: 'POST',
        url: '/v3/OS-OAUTH1/access_token',
        headers: { authorization: oauthSigned('/v3/OS-OAUTH1/access_token', { token: requestToken.get('oauth_token')!, tokenSecret: requestToken.get('oauth_token_secret')!, verifier }) },
      })
    ).body,
  );
  remember(accessToken.get('oauth_token_secret')!);
  const oauthLogin = await request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', authorization: oauthSigned('/v3/auth/tokens', { token: accessToken.get('oauth_token')!, tokenSecret: accessToken.get('oauth_token_secret')! }) },
    payload: JSON.stringify({ auth: { identity: { methods: ['oauth1'], oauth1: {} } } }),
  });
  t.equal(oauthLogin.statusCode, 201);
  remember(String(oauthLogin.headers['x-subject-token']));
  const forged = await request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json', authorization: oauthSigned('/v3/auth/tokens', { token: accessToken.get('oauth_token')!, tokenSecret: remember('f00dfeedf00dfeedf00dfeedf00dfeed') }) },
    payload: JSON.stringify({ auth: { identity: { methods: ['oauth1'], oauth1: {} } } }),
  });
  t.equal(forged.statusCode, 401);

  // MFA: a totp secret, passcodes (right and wrong), receipts (issued, used, another user's, garbage).
  const mfa = (await call('POST', '/v3/users', { user: { name: 'mfa-secrets', password, options: { multi_factor_auth_rules: [['password', 'totp']] } } })).json().user;
  const totpSecret = remember('JBSWY3DPEHPK3PXPJBSWY3DP');
  t.equal((await call('POST', '/v3/credentials', { credential: { type: 'totp', blob: totpSecret, user_id: mfa.id } })).statusCode, 201);
  const auth = (identity: unknown, receipt?: string) =>
    request({ method: 'POST', url: '/v3/auth/tokens', headers: { 'content-type': 'application/json', ...(receipt ? { 'openstack-auth-receipt': receipt } : {}) }, payload: { auth: { identity } } });
  const first = await auth({ methods: ['password'], password: { user: { id: mfa.id, password } } });
  t.equal(first.statusCode, 401);
  const receipt = remember(first.headers['openstack-auth-receipt'] as string);
  const passcode = remember(totpPasscode(decodeBase32Secret(totpSecret)!, clock.now() / 1000));
  t.equal((await auth({ methods: ['totp'], totp: { user: { id: mfa.id, passcode: remember('918273') } } }, receipt)).statusCode, 401);
  t.equal((await auth({ methods: ['totp'], totp: { user: { id: mfa.id, passcode } } }, receipt)).statusCode, 201);
  t.equal((await auth({ methods: ['password'], password: { user: { id: user.id, password: reset } } }, receipt)).statusCode, 401, "another user's receipt");
  t.equal((await auth({ methods: ['password'], password: { user: { id: mfa.id, password } } }, remember('gAAAAABgarbage-receipt-secret'))).statusCode, 401);

  // The gateway: allowed, denied, with a service token, with a bad token.
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': scoped } })).status, 200);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': credentialToken } })).status, 200);
  t.equal((await rawRequest(w.port, { method: 'DELETE', path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.reader } })).status, 403);
  t.equal((await rawRequest(w.port, { path: `/echo/v1/${w.projectId}/things`, headers: { 'x-auth-token': w.member, 'x-service-token': w.admin } })).status, 200);
  t.equal((await rawRequest(w.port, { path: '/echo/v1/x', headers: { 'x-auth-token': `${scoped}tampered` } })).status, 401);
  // A body the server refuses to parse.
  t.equal((await request({ method: 'POST', url: '/v3/auth/tokens', headers: { 'content-type': 'application/json' }, payload: `{"auth": "${remember('Broken-Json-Secret-5')}` })).statusCode, 400);

  // A domain's LDAP bind password (domain configuration): stored, answered never, logged never; a
  // refused body that holds one too.
  const ldapDomain = (await call('POST', '/v3/domains', { domain: { name: 'ldap-secrets' } })).json().domain;
  const bind = remember('Ldap-Bind-Secret-77');
  t.equal((await call('PUT', `/v3/domains/${ldapDomain.id}/config`, { config: { identity: { driver: 'ldap' }, ldap: { url: 'ldap://x', password: bind } } })).statusCode, 201);
  t.equal((await call('PATCH', `/v3/domains/${ldapDomain.id}/config/ldap/password`, { config: { password: remember('Ldap-Bind-Secret-78') } })).statusCode, 200);
  t.equal((await call('PATCH', `/v3/domains/${ldapDomain.id}/config`, { config: { ldap: { password: remember('Ldap-Bind-Secret-79'), nope: 1 } } })).statusCode, 403);

  t.equal((await call('DELETE', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': scoped })).statusCode, 204);
  t.equal((await call('DELETE', `/v3/users/${user.id}`)).statusCode, 204);

  // Keys of the service itself.
  for (const file of fs.readdirSync(config.fernetKeyRepository)) remember(fs.readFileSync(path.join(config.fernetKeyRepository, file), 'utf8').trim());
  remember(fs.readFileSync(path.join(config.dataDir, 'secret-pepper'), 'utf8').trim());
  for (const file of fs.readdirSync(config.credentialKeyRepository)) remember(fs.readFileSync(path.join(config.credentialKeyRepository, file), 'utf8').trim());

  // The flow was logged (else this test would pass vacuously).
  const messages = lines.map((line) => JSON.parse(line).msg as string);
  t.ok(messages.filter((message) => message === 'audit').length >= 15, 'audit events were logged');
  t.ok(messages.filter((message) => message === 'gateway').length >= 5, 'gateway lines were logged');
  t.ok(messages.filter((message) => message === 'incoming request').length >= 20, 'request lines were logged');

  const records = [...lines];
  if (redis && stream) {
    // XADD runs on another connection: wait for the stream to hold every logged audit event.
    const expected = messages.filter((message) => message === 'audit').length;
    let entries: [string, string[]][] = [];
    for (let attempt = 0; attempt < 200 && entries.length < expected; attempt++) {
      entries = await redis.redis.xrange(stream, '-', '+');
      if (entries.length < expected) await new Promise((resolve) => setImmediate(resolve));
    }
    t.equal(entries.length, expected, 'the audit stream holds every event');
    for (const [, fields] of entries) records.push(fields.join(' '));
  }
  t.ok(secrets.size > 20, `${secrets.size} secrets searched for in ${records.length} records`);
  const leaks: string[] = [];
  for (const record of records) {
    for (const secret of secrets) {
      if (record.includes(secret)) leaks.push(`${secret.slice(0, 12)}… in ${record.slice(0, 160)}`);
    }
  }
  t.same(leaks, [], 'no secret in any record');
});
