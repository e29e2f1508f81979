import { randomBytes } from 'node:crypto';
import t from 'tap';
import { OAuth1AccessTokenEntity, OAuth1ConsumerEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';
import { oauthlibAuthorization, type OAuthSigning } from '../helpers/oauth1-signer.ts';

const FORM = 'application/x-www-form-urlencoded';
// Keystone's Unauthorized shows clients only this (the cause goes to the audit trail).
const GENERIC_401 = 'The request you have made requires authentication.';

/** Signs with oauthlib (an independent signer) at the test clock's time, with a fresh hex nonce. */
function signer(test: TestApp) {
  return (path: string, signing: Omit<OAuthSigning, 'url'>) =>
    oauthlibAuthorization({
      url: `${PUBLIC_URL}${path}`,
      timestamp: String(Math.floor(test.clock.now() / 1000)),
      nonce: randomBytes(16).toString('hex'),
      ...signing,
    });
}

function form(body: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(body));
}

t.test('OS-OAUTH1: consumers, delegation, the oauth1 method, access tokens', async (t) => {
  const test = await startTestApp(t, { OAUTH1_REQUEST_TOKEN_DURATION: '600' });
  const { call, login, app, request, clock } = test;
  const sign = signer(test);
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'delegated' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'delegator', password: 'Pw-1' } })).json().user;
  const plain = (await call('POST', '/v3/users', { user: { name: 'plain', password: 'Pw-1' } })).json().user;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.admin}`);
  await call('PUT', `/v3/projects/${project.id}/users/${plain.id}/roles/${roles.member}`);
  const unheld = (await call('POST', '/v3/roles', { role: { name: 'unheld' } })).json().role;
  const userToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const plainToken = (await login({ id: plain.id }, 'Pw-1', { project: { id: project.id } })).token;

  // ---- consumers ----
  const created = await call('POST', '/v3/OS-OAUTH1/consumers', { consumer: { description: 'cli', colour: 'blue' } });
  t.equal(created.statusCode, 201);
  const consumer = created.json().consumer;
  t.match(consumer.id, /^[0-9a-f]{32}$/);
  t.match(consumer.secret, /^[0-9a-f]{32}$/);
  t.same(Object.keys(consumer).sort(), ['colour', 'description', 'id', 'links', 'secret'], 'extra attributes kept');
  t.equal(consumer.links.self, `${PUBLIC_URL}/v3/OS-OAUTH1/consumers/${consumer.id}`);
  const row = await app.store.reader().findOne(OAuth1ConsumerEntity, { id: consumer.id });
  t.match(row?.secret, /^aes256gcm:/, 'the secret is stored encrypted');
  t.notOk(row?.secret.includes(consumer.secret));
  const got = await call('GET', `/v3/OS-OAUTH1/consumers/${consumer.id}`);
  t.same(got.json().consumer, { colour: 'blue', id: consumer.id, description: 'cli', links: consumer.links }, 'no secret after create');
  t.same((await call('GET', '/v3/OS-OAUTH1/consumers')).json().consumers.map((c: { id: string }) => c.id), [consumer.id]);
  const patched = await call('PATCH', `/v3/OS-OAUTH1/consumers/${consumer.id}`, { consumer: { description: 'x2', foo: 'bar' } });
  t.equal(patched.statusCode, 200);
  t.same(patched.json().consumer, { colour: 'blue', foo: 'bar', id: consumer.id, description: 'x2', links: consumer.links });
  t.equal((await call('PATCH', `/v3/OS-OAUTH1/consumers/${consumer.id}`, { consumer: { secret: 'x' } })).statusCode, 400, 'the secret cannot be set');
  const changeId = await call('PATCH', `/v3/OS-OAUTH1/consumers/${consumer.id}`, { consumer: { id: 'other' } });
  t.equal(changeId.statusCode, 400);
  t.equal(changeId.json().error.message, 'Cannot change ID');
  const missing = await call('GET', '/v3/OS-OAUTH1/consumers/nope');
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Consumer not found');
  t.equal((await call('GET', '/v3/OS-OAUTH1/consumers', undefined, plainToken)).statusCode, 403, 'a member does not list consumers');

  // ---- request token ----
  const requestTokenPath = '/v3/OS-OAUTH1/request_token';
  const requestHeaders = () => ({ authorization: sign(requestTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, callback: 'oob' }), 'requested-project-id': project.id });
  const issued = await request({ method: 'POST', url: requestTokenPath, headers: requestHeaders() });
  t.equal(issued.statusCode, 201, issued.body);
  t.equal(issued.headers['content-type'], FORM);
  t.match(issued.body, /^oauth_token=[0-9a-f]{32}&oauth_token_secret=[0-9a-f]{32}&oauth_expires_at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  const requestToken = form(issued.body);
  t.equal(Date.parse(requestToken.oauth_expires_at!), clock.now() + 600_000);

  const noProject = await request({ method: 'POST', url: requestTokenPath, headers: { authorization: requestHeaders().authorization } });
  t.equal(noProject.statusCode, 400);
  t.match(noProject.json().error.message, /^Expecting to find Requested-Project-Id in request/);
  const badSecret = await request({
    method: 'POST',
    url: requestTokenPath,
    headers: { authorization: sign(requestTokenPath, { consumerKey: consumer.id, consumerSecret: 'f'.repeat(32), callback: 'oob' }), 'requested-project-id': project.id },
  });
  t.equal(badSecret.statusCode, 401);
  t.equal(badSecret.json().error.message, GENERIC_401);
  const replayHeaders = requestHeaders();
  t.equal((await request({ method: 'POST', url: requestTokenPath, headers: replayHeaders })).statusCode, 201);
  const replay = await request({ method: 'POST', url: requestTokenPath, headers: replayHeaders });
  t.equal(replay.statusCode, 401, 'a nonce is good once');
  t.equal(replay.json().error.message, GENERIC_401);
  const stale = await request({
    method: 'POST',
    url: requestTokenPath,
    headers: {
      authorization: sign(requestTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, callback: 'oob', timestamp: String(Math.floor(clock.now() / 1000) - 601) }),
      'requested-project-id': project.id,
    },
  });
  t.equal(stale.statusCode, 400);
  t.equal(stale.json().error.message, 'Validation failed with errors: invalid_request, detail message is: Timestamp given is invalid, differ from allowed by over 600 seconds..');
  const noCallback = await request({
    method: 'POST',
    url: requestTokenPath,
    headers: { authorization: sign(requestTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret }), 'requested-project-id': project.id },
  });
  t.equal(noCallback.statusCode, 400);
  t.equal(noCallback.json().error.message, 'Validation failed with errors: invalid_request, detail message is: Missing callback URI..');
  const unknownProject = await request({ method: 'POST', url: requestTokenPath, headers: { ...requestHeaders(), 'requested-project-id': 'nope' } });
  t.equal(unknownProject.statusCode, 404);

  // ---- authorize ----
  const authorizePath = `/v3/OS-OAUTH1/authorize/${requestToken.oauth_token}`;
  t.equal((await call('PUT', authorizePath, { roles: [{ id: roles.member }] }, plainToken)).statusCode, 403, 'admin_required');
  const notHeld = await call('PUT', authorizePath, { roles: [{ id: unheld.id }] }, userToken);
  t.equal(notHeld.statusCode, 401);
  t.equal(notHeld.json().error.message, GENERIC_401);
  const noRole = await call('PUT', authorizePath, { roles: [{ name: 'no-such-role' }] }, userToken);
  t.equal(noRole.statusCode, 404);
  t.equal(noRole.json().error.message, 'Role no-such-role is not defined');
  t.equal((await call('PUT', authorizePath, { roles: [{ id: roles.member, name: 'member' }] }, userToken)).statusCode, 400, 'one of id or name');
  t.equal((await call('PATCH', `/v3/OS-OAUTH1/consumers/${consumer.id}`, { consumer: {} })).statusCode, 400, 'an empty update');
  t.equal((await call('PUT', '/v3/OS-OAUTH1/authorize/' + 'a'.repeat(32), { roles: [{ id: roles.member }] }, userToken)).statusCode, 404);
  const authorized = await call('PUT', authorizePath, { roles: [{ name: 'member' }] }, userToken);
  t.equal(authorized.statusCode, 200);
  const verifier = authorized.json().token.oauth_verifier;
  t.match(verifier, /^[A-HJ-NP-Za-hk-np-z2-9]{8}$/, 'Keystone\'s verifier characters');

  // ---- access token ----
  const accessTokenPath = '/v3/OS-OAUTH1/access_token';
  const accessSigning = (overrides: Partial<OAuthSigning> = {}) =>
    sign(accessTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, token: requestToken.oauth_token!, tokenSecret: requestToken.oauth_token_secret!, verifier, ...overrides });
  const wrongVerifier = await request({ method: 'POST', url: accessTokenPath, headers: { authorization: accessSigning({ verifier: 'ABCDEFGH' }) } });
  t.equal(wrongVerifier.statusCode, 401);
  t.equal(wrongVerifier.json().error.message, GENERIC_401);
  const badVerifier = await request({ method: 'POST', url: accessTokenPath, headers: { authorization: accessSigning({ verifier: 'bad' }) } });
  t.equal(badVerifier.statusCode, 400);
  t.equal(badVerifier.json().error.message, 'Validation failed with errors: invalid_request, detail message is: Invalid verifier format..');
  const badTokenSecret = await request({ method: 'POST', url: accessTokenPath, headers: { authorization: accessSigning({ tokenSecret: 'e'.repeat(32) }) } });
  t.equal(badTokenSecret.statusCode, 401);
  t.equal(badTokenSecret.json().error.message, GENERIC_401);
  const exchanged = await request({ method: 'POST', url: accessTokenPath, headers: { authorization: accessSigning() } });
  t.equal(exchanged.statusCode, 201, exchanged.body);
  t.equal(exchanged.headers['content-type'], FORM);
  const accessToken = form(exchanged.body);
  t.match(accessToken.oauth_token, /^[0-9a-f]{32}$/);
  t.equal(Date.parse(accessToken.oauth_expires_at!), clock.now() + 86_400_000, 'access_token_duration: a day');
  const used = await request({ method: 'POST', url: accessTokenPath, headers: { authorization: accessSigning() } });
  t.equal(used.statusCode, 404, 'a request token is exchanged once');
  t.equal(used.json().error.message, 'Request token not found');

  // ---- the oauth1 auth method ----
  const oauthLogin = (token = accessToken, consumerSecret = consumer.secret) =>
    request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: {
        'content-type': 'application/json',
        authorization: sign('/v3/auth/tokens', { consumerKey: consumer.id, consumerSecret, token: token.oauth_token!, tokenSecret: token.oauth_token_secret! }),
      },
      payload: JSON.stringify({ auth: { identity: { methods: ['oauth1'], oauth1: {} } } }),
    });
  const issuedToken = await oauthLogin();
  t.equal(issuedToken.statusCode, 201, issuedToken.body);
  const body = issuedToken.json().token;
  t.same(body.methods, ['oauth1']);
  t.equal(body.user.id, user.id);
  t.equal(body.project.id, project.id);
  t.same(body.roles.map((r: { name: string }) => r.name).sort(), ['member', 'reader'], 'the delegated role and what it implies, not admin');
  t.same(body['OS-OAUTH1'], { access_token_id: accessToken.oauth_token, consumer_id: consumer.id });
  const oauthToken = String(issuedToken.headers['x-subject-token']);
  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': oauthToken });
  t.equal(validated.statusCode, 200);
  t.same(validated.json().token['OS-OAUTH1'], body['OS-OAUTH1']);
  t.same(validated.json().token.roles, body.roles);
  const wrongSecret = await oauthLogin(accessToken, 'd'.repeat(32));
  t.equal(wrongSecret.statusCode, 401);
  t.equal(wrongSecret.json().error.message, GENERIC_401);
  const rescope = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: oauthToken } } } }, null);
  t.equal(rescope.statusCode, 403);
  t.equal(rescope.json().error.message, 'You are not authorized to perform the requested action: Using OAuth-scoped token to create another token. Create a new OAuth-scoped token instead.');

  // ---- the user's access tokens ----
  const tokensPath = `/v3/users/${user.id}/OS-OAUTH1/access_tokens`;
  const listed = await call('GET', tokensPath);
  t.equal(listed.statusCode, 200);
  const expected = {
    id: accessToken.oauth_token,
    authorizing_user_id: user.id,
    project_id: project.id,
    consumer_id: consumer.id,
    expires_at: accessToken.oauth_expires_at,
    links: { roles: `${PUBLIC_URL}${tokensPath}/${accessToken.oauth_token}/roles`, self: `${PUBLIC_URL}${tokensPath}/${accessToken.oauth_token}` },
  };
  t.same(listed.json().access_tokens, [expected]);
  t.same((await call('GET', `${tokensPath}/${accessToken.oauth_token}`)).json().access_token, expected);
  const tokenRoles = await call('GET', `${tokensPath}/${accessToken.oauth_token}/roles`);
  t.same(tokenRoles.json().roles.map((r: { id: string }) => r.id), [roles.member], 'the roles as authorized');
  t.equal((await call('GET', `${tokensPath}/${accessToken.oauth_token}/roles/${roles.member}`)).json().role.name, 'member');
  t.equal((await call('GET', `${tokensPath}/${accessToken.oauth_token}/roles/${roles.admin}`)).statusCode, 404);
  t.equal((await call('GET', tokensPath, undefined, oauthToken)).statusCode, 403, 'the delegated token is no admin');

  const deleted = await call('DELETE', `${tokensPath}/${accessToken.oauth_token}`);
  t.equal(deleted.statusCode, 204);
  t.equal(await app.store.reader().count(OAuth1AccessTokenEntity, {}), 0);
  const revoked = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': oauthToken });
  t.equal(revoked.statusCode, 404, 'tokens of a deleted access token stop validating');
  t.equal(revoked.json().error.message, 'Access token not found');
  t.equal((await call('GET', `/v3/projects/${project.id}`, undefined, oauthToken)).statusCode, 401);
  const afterDelete = await oauthLogin();
  t.equal(afterDelete.statusCode, 404);
  t.equal(afterDelete.json().error.message, 'Access token not found');

  // ---- an expired request token; a consumer deleted ends its tokens ----
  const second = form((await request({ method: 'POST', url: requestTokenPath, headers: requestHeaders() })).body);
  clock.advance(601_000);
  const expired = await call('PUT', `/v3/OS-OAUTH1/authorize/${second.oauth_token}`, { roles: [{ id: roles.member }] }, (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token);
  t.equal(expired.statusCode, 401);
  t.equal(expired.json().error.message, GENERIC_401);

  const freshUserToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const third = form((await request({ method: 'POST', url: requestTokenPath, headers: requestHeaders() })).body);
  const thirdVerifier = (await call('PUT', `/v3/OS-OAUTH1/authorize/${third.oauth_token}`, { roles: [{ id: roles.admin }] }, freshUserToken)).json().token.oauth_verifier;
  const thirdAccess = form(
    (
      await request({
        method: 'POST',
        url: accessTokenPath,
        headers: { authorization: sign(accessTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, token: third.oauth_token!, tokenSecret: third.oauth_token_secret!, verifier: thirdVerifier }) },
      })
    ).body,
  );
  const thirdToken = await oauthLogin(thirdAccess);
  t.equal(thirdToken.statusCode, 201);
  t.same(thirdToken.json().token.roles.map((r: { name: string }) => r.name).sort(), ['admin', 'member', 'reader']);
  const delegatedAdmin = String(thirdToken.headers['x-subject-token']);
  const delegatedList = await call('GET', tokensPath, undefined, delegatedAdmin);
  t.equal(delegatedList.statusCode, 403, 'a delegated token lists no access tokens, even with admin');
  t.equal(delegatedList.json().error.message, 'You are not authorized to perform the requested action.');
  const fourth = form((await request({ method: 'POST', url: requestTokenPath, headers: requestHeaders() })).body);
  const delegatedAuthorize = await call('PUT', `/v3/OS-OAUTH1/authorize/${fourth.oauth_token}`, { roles: [{ id: roles.reader }] }, delegatedAdmin);
  t.equal(delegatedAuthorize.statusCode, 403, 'nor authorizes a request token');
  t.equal(delegatedAuthorize.json().error.message, 'You are not authorized to perform the requested action.');
  const othersToken = await call('GET', `/v3/users/${plain.id}/OS-OAUTH1/access_tokens/${thirdAccess.oauth_token}`);
  t.equal(othersToken.statusCode, 404);
  t.equal(othersToken.json().error.message, 'Could not find: %(target)s.', 'Keystone\'s unfilled template');
  const notDelegated = await call('GET', `${tokensPath}/${thirdAccess.oauth_token}/roles/${unheld.id}`);
  t.equal(notDelegated.json().error.message, `Could not find role: ${unheld.id}.`);
  t.equal((await call('GET', `/v3/users/${plain.id}/OS-OAUTH1/access_tokens/${thirdAccess.oauth_token}/roles/${roles.admin}`)).statusCode, 401);
  t.equal((await call('DELETE', `/v3/users/${plain.id}/OS-OAUTH1/access_tokens/${thirdAccess.oauth_token}`)).statusCode, 401, 'not the authorizing user');
  t.equal((await call('DELETE', `/v3/OS-OAUTH1/consumers/${consumer.id}`)).statusCode, 204);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': String(thirdToken.headers['x-subject-token']) })).statusCode, 404, 'a deleted consumer ends its tokens');
  t.equal((await call('GET', tokensPath)).json().access_tokens.length, 0, 'its access tokens are gone');
});

t.test('signature methods: PLAINTEXT end to end (gophercloud signs with it), RSA refused, an unknown method named as oauthlib names it', async (t) => {
  const test = await startTestApp(t);
  const { call, login, request } = test;
  const sign = signer(test);
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((role: { name: string; id: string }) => [role.name, role.id]));
  const member = roles.member;
  const project = (await call('POST', '/v3/projects', { project: { name: 'plaintext' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'plaintext-delegator', password: 'Pw-1' } })).json().user;
  // Authorizing a request token is admin_required; the member role is what is delegated.
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles.admin}`);
  const userToken = (await login({ id: user.id }, 'Pw-1', { project: { id: project.id } })).token;
  const consumer = (await call('POST', '/v3/OS-OAUTH1/consumers', { consumer: {} })).json().consumer;

  const requestTokenPath = '/v3/OS-OAUTH1/request_token';
  const requestToken = (signing: Partial<OAuthSigning>, header = (text: string) => text) =>
    request({
      method: 'POST',
      url: requestTokenPath,
      headers: { authorization: header(sign(requestTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, callback: 'oob', method: 'PLAINTEXT', ...signing })), 'requested-project-id': project.id },
    });
  const wrong = await requestToken({ consumerSecret: 'f'.repeat(32) });
  t.equal(wrong.statusCode, 401, 'PLAINTEXT with another secret');
  t.equal(wrong.json().error.message, GENERIC_401);
  for (const method of ['RSA-SHA1', 'RSA-SHA256', 'RSA-SHA512']) {
    const rsa = await requestToken({ method: 'HMAC-SHA1' }, (text) => text.replace('oauth_signature_method="HMAC-SHA1"', `oauth_signature_method="${method}"`));
    t.equal(rsa.statusCode, 401, `${method}: no consumer has a key (Keystone 22 answers 500)`);
  }
  const unknown = await requestToken({ method: 'HMAC-SHA1' }, (text) => text.replace('oauth_signature_method="HMAC-SHA1"', 'oauth_signature_method="HMAC-MD5"'));
  t.equal(unknown.statusCode, 400);
  t.equal(
    unknown.json().error.message,
    "Validation failed with errors: invalid_signature_method, detail message is: Invalid signature, HMAC-MD5 not in ('HMAC-SHA1', 'HMAC-SHA256', 'HMAC-SHA512', 'RSA-SHA1', 'RSA-SHA256', 'RSA-SHA512', 'PLAINTEXT')..",
  );
  const issued = await requestToken({});
  t.equal(issued.statusCode, 201, issued.body);
  const requested = form(issued.body);

  const verifier = (await call('PUT', `/v3/OS-OAUTH1/authorize/${requested.oauth_token}`, { roles: [{ id: member }] }, userToken)).json().token.oauth_verifier;
  const accessTokenPath = '/v3/OS-OAUTH1/access_token';
  const exchange = (tokenSecret: string) =>
    request({
      method: 'POST',
      url: accessTokenPath,
      headers: { authorization: sign(accessTokenPath, { consumerKey: consumer.id, consumerSecret: consumer.secret, token: requested.oauth_token!, tokenSecret, verifier, method: 'PLAINTEXT' }) },
    });
  t.equal((await exchange('e'.repeat(32))).statusCode, 401, 'PLAINTEXT with another request token secret');
  const exchanged = await exchange(requested.oauth_token_secret!);
  t.equal(exchanged.statusCode, 201, exchanged.body);
  const access = form(exchanged.body);

  const oauthLogin = (tokenSecret: string) =>
    request({
      method: 'POST',
      url: '/v3/auth/tokens',
      headers: {
        'content-type': 'application/json',
        authorization: sign('/v3/auth/tokens', { consumerKey: consumer.id, consumerSecret: consumer.secret, token: access.oauth_token!, tokenSecret, method: 'PLAINTEXT' }),
      },
      payload: JSON.stringify({ auth: { identity: { methods: ['oauth1'], oauth1: {} } } }),
    });
  t.equal((await oauthLogin('e'.repeat(32))).statusCode, 401, 'PLAINTEXT with another access token secret');
  const issuedToken = await oauthLogin(access.oauth_token_secret!);
  t.equal(issuedToken.statusCode, 201, issuedToken.body);
  t.same(issuedToken.json().token['OS-OAUTH1'], { access_token_id: access.oauth_token, consumer_id: consumer.id });
  t.same(issuedToken.json().token.roles.map((role: { name: string }) => role.name).sort(), ['member', 'reader']);
});
