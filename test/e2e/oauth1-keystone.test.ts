import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import { newAuditId } from '../../src/token/fernet-payload.ts';
import { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';
import { oauthlibAuthorization, type OAuthSigning } from '../helpers/oauth1-signer.ts';

// OS-OAUTH1 over HTTP against this service and the real Keystone 22 (that half is skipped without a
// peer): the same flow, signed by oauthlib, must answer the same statuses, messages, body shapes and
// content types. Ids and secrets become their shapes. What the run makes on the peer is deleted.

const PEER_KEYS = `${process.env.KEYSTONE_PEER_DIR ?? '/tmp/keystone-peer'}/fernet-keys`;

interface Seen {
  status: number;
  said: unknown;
}

async function send(url: string, init: { method: string; headers?: Record<string, string>; body?: unknown }) {
  const response = await fetch(url, {
    method: init.method,
    headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // a form-encoded body
  }
  return { status: response.status, type: response.headers.get('content-type'), token: response.headers.get('x-subject-token') ?? '', body, text };
}

/** The flow as one client sees it; `signBase` is the URL the service knows itself by. */
interface OAuthIssued {
  adminToken: string;
  oauthToken: string;
  userId: string;
  projectId: string;
  accessTokenId: string;
  consumerId: string;
}

async function scenario(base: string, signBase: string, adminPassword: string, crossCheck?: (issued: OAuthIssued) => Promise<void>): Promise<Record<string, Seen>> {
  const seen: Record<string, Seen> = {};
  const login = await send(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: adminPassword } } }, scope: { project: { name: 'admin', domain: { id: 'default' } } } } },
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const admin = { 'x-auth-token': login.token };
  const userId = login.body.token.user.id as string;
  const projectId = login.body.token.project.id as string;
  const reader = (login.body.token.roles as { id: string; name: string }[]).find((role) => role.name === 'reader')!;
  const sign = (path: string, signing: Omit<OAuthSigning, 'url'>) =>
    oauthlibAuthorization({ url: `${signBase}${path}`, timestamp: String(Math.floor(Date.now() / 1000)), nonce: randomBytes(16).toString('hex'), ...signing });
  const record = (name: string, answer: { status: number; body: any; text: string }, said?: unknown) => {
    seen[name] = { status: answer.status, said: said !== undefined ? said : (answer.body?.error?.message ?? answer.body) };
  };

  const created = await send(`${base}/v3/OS-OAUTH1/consumers`, { method: 'POST', headers: admin, body: { consumer: { description: `oauth1-e2e-${Date.now()}` } } });
  const consumer = created.body.consumer;
  record('create consumer', created, Object.keys(consumer).sort());
  try {
    const got = await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'GET', headers: admin });
    record('get consumer', got, Object.keys(got.body.consumer).sort());
    record('get unknown consumer', await send(`${base}/v3/OS-OAUTH1/consumers/nope`, { method: 'GET', headers: admin }));
    const patched = await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'PATCH', headers: admin, body: { consumer: { description: 'x', foo: 'bar' } } });
    record('patch consumer', patched, { ...patched.body.consumer, id: 'ID', links: 'LINKS' });
    record('patch the secret', await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'PATCH', headers: admin, body: { consumer: { secret: 'x' } } }), 'refused');
    record('patch the id', await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'PATCH', headers: admin, body: { consumer: { id: 'x' } } }));

    const requestPath = '/v3/OS-OAUTH1/request_token';
    const requestSigning = { consumerKey: consumer.id, consumerSecret: consumer.secret, callback: 'oob' };
    const noProject = await send(`${base}${requestPath}`, { method: 'POST', headers: { authorization: sign(requestPath, requestSigning) } });
    record('request token without a project', noProject);
    const badSecret = await send(`${base}${requestPath}`, {
      method: 'POST',
      headers: { authorization: sign(requestPath, { ...requestSigning, consumerSecret: 'f'.repeat(32) }), 'requested-project-id': projectId },
    });
    record('request token, bad signature', badSecret);
    const plaintext = (consumerSecret: string) =>
      send(`${base}${requestPath}`, { method: 'POST', headers: { authorization: sign(requestPath, { ...requestSigning, consumerSecret, method: 'PLAINTEXT' }), 'requested-project-id': projectId } });
    const plaintextIssued = await plaintext(consumer.secret);
    record('request token, PLAINTEXT', plaintextIssued, { type: plaintextIssued.type, shape: plaintextIssued.text.replace(/[0-9a-f]{32}/g, 'HEX').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/, 'TIME') });
    record('request token, PLAINTEXT with another secret', await plaintext('f'.repeat(32)));
    const unknownMethod = sign(requestPath, requestSigning).replace('oauth_signature_method="HMAC-SHA1"', 'oauth_signature_method="HMAC-MD5"');
    record('request token, an unknown signature method', await send(`${base}${requestPath}`, { method: 'POST', headers: { authorization: unknownMethod, 'requested-project-id': projectId } }));
    const noCallback = await send(`${base}${requestPath}`, { method: 'POST', headers: { authorization: sign(requestPath, { consumerKey: consumer.id, consumerSecret: consumer.secret }), 'requested-project-id': projectId } });
    record('request token without a callback', noCallback);
    const issued = await send(`${base}${requestPath}`, { method: 'POST', headers: { authorization: sign(requestPath, requestSigning), 'requested-project-id': projectId } });
    record('request token', issued, { type: issued.type, shape: issued.text.replace(/[0-9a-f]{32}/g, 'HEX').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/, 'TIME') });
    const requestToken = Object.fromEntries(new URLSearchParams(issued.text));

    const authorizePath = `${base}/v3/OS-OAUTH1/authorize/${requestToken.oauth_token}`;
    record('authorize an unknown role', await send(authorizePath, { method: 'PUT', headers: admin, body: { roles: [{ name: 'no-such-role-oauth1' }] } }));
    record('authorize an unknown token', await send(`${base}/v3/OS-OAUTH1/authorize/${'a'.repeat(32)}`, { method: 'PUT', headers: admin, body: { roles: [{ id: reader.id }] } }));
    const none = await send(authorizePath, { method: 'PUT', headers: admin, body: { roles: [] } });
    record('authorize no roles', none, Object.keys(none.body?.token ?? {}));
    record('authorize with id and name', await send(authorizePath, { method: 'PUT', headers: admin, body: { roles: [{ id: reader.id, name: 'reader' }] } }), 'refused');
    record('update a consumer with nothing', await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'PATCH', headers: admin, body: { consumer: {} } }), 'refused');
    const authorized = await send(authorizePath, { method: 'PUT', headers: admin, body: { roles: [{ id: reader.id }] } });
    record('authorize', authorized, Object.keys(authorized.body.token));
    const verifier = authorized.body.token.oauth_verifier as string;

    const accessPath = '/v3/OS-OAUTH1/access_token';
    const accessSigning = { consumerKey: consumer.id, consumerSecret: consumer.secret, token: requestToken.oauth_token!, tokenSecret: requestToken.oauth_token_secret!, verifier };
    record('access token, wrong verifier', await send(`${base}${accessPath}`, { method: 'POST', headers: { authorization: sign(accessPath, { ...accessSigning, verifier: 'ABCDEFGH' }) } }));
    record('access token, bad verifier', await send(`${base}${accessPath}`, { method: 'POST', headers: { authorization: sign(accessPath, { ...accessSigning, verifier: 'bad' }) } }));
    const exchanged = await send(`${base}${accessPath}`, { method: 'POST', headers: { authorization: sign(accessPath, accessSigning) } });
    record('access token', exchanged, { type: exchanged.type, shape: exchanged.text.replace(/[0-9a-f]{32}/g, 'HEX').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/, 'TIME') });
    record('access token again', await send(`${base}${accessPath}`, { method: 'POST', headers: { authorization: sign(accessPath, accessSigning) } }));
    const accessToken = Object.fromEntries(new URLSearchParams(exchanged.text));

    const oauthLogin = await send(`${base}/v3/auth/tokens`, {
      method: 'POST',
      headers: { authorization: sign('/v3/auth/tokens', { consumerKey: consumer.id, consumerSecret: consumer.secret, token: accessToken.oauth_token!, tokenSecret: accessToken.oauth_token_secret! }) },
      body: { auth: { identity: { methods: ['oauth1'], oauth1: {} } } },
    });
    const token = oauthLogin.body?.token;
    record('oauth1 token', oauthLogin, token && { methods: token.methods, roles: token.roles.map((role: { name: string }) => role.name), user: token.user.id === userId, project: token.project.id === projectId, oauth: token['OS-OAUTH1'] && { access: token['OS-OAUTH1'].access_token_id === accessToken.oauth_token, consumer: token['OS-OAUTH1'].consumer_id === consumer.id } });
    const validated = await send(`${base}/v3/auth/tokens`, { method: 'GET', headers: { ...admin, 'x-subject-token': oauthLogin.token } });
    record('validate the oauth1 token', validated, Object.keys(validated.body.token['OS-OAUTH1']));
    await crossCheck?.({ adminToken: login.token, oauthToken: oauthLogin.token, userId, projectId, accessTokenId: accessToken.oauth_token!, consumerId: consumer.id });
    record('list access tokens as the oauth1 token', await send(`${base}/v3/users/${userId}/OS-OAUTH1/access_tokens`, { method: 'GET', headers: { 'x-auth-token': oauthLogin.token } }));
    const rescope = await send(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['token'], token: { id: oauthLogin.token } } } } });
    record('re-scope the oauth1 token', rescope);

    const tokensPath = `${base}/v3/users/${userId}/OS-OAUTH1/access_tokens`;
    const one = await send(`${tokensPath}/${accessToken.oauth_token}`, { method: 'GET', headers: admin });
    record('get access token', one, Object.keys(one.body.access_token));
    const roles = await send(`${tokensPath}/${accessToken.oauth_token}/roles`, { method: 'GET', headers: admin });
    record('access token roles', roles, (roles.body.roles as { name: string }[]).map((role) => role.name));
    record('access token, a role not delegated', await send(`${tokensPath}/${accessToken.oauth_token}/roles/${'b'.repeat(32)}`, { method: 'GET', headers: admin }));
    const othersPath = `${base}/v3/users/${'0'.repeat(32)}/OS-OAUTH1/access_tokens/${accessToken.oauth_token}`;
    record('another user\'s access token', await send(othersPath, { method: 'GET', headers: admin }));
    record('another user\'s access token roles', await send(`${othersPath}/roles`, { method: 'GET', headers: admin }));
    record('another user\'s access token role', await send(`${othersPath}/roles/${reader.id}`, { method: 'GET', headers: admin }));
    record('delete another user\'s access token', await send(othersPath, { method: 'DELETE', headers: admin }));
    record('delete access token', await send(`${tokensPath}/${accessToken.oauth_token}`, { method: 'DELETE', headers: admin }));
    record('validate after the delete', await send(`${base}/v3/auth/tokens`, { method: 'GET', headers: { ...admin, 'x-subject-token': oauthLogin.token } }));
    record('get a deleted access token', await send(`${tokensPath}/${accessToken.oauth_token}`, { method: 'GET', headers: admin }));
  } finally {
    record('delete consumer', await send(`${base}/v3/OS-OAUTH1/consumers/${consumer.id}`, { method: 'DELETE', headers: admin }));
  }
  return seen;
}

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL}`;

t.test('OS-OAUTH1 answers as Keystone 22 does', { skip }, async (t) => {
  const { app } = await startTestApp(t);
  await app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.server.address();
  const ours = await scenario(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, PUBLIC_URL, ADMIN_PASSWORD);
  const theirs = await scenario(PEER_URL, PEER_URL, PEER_PASSWORD, async (issued) => {
    // With the peer's key repository: its OAuth token decodes here, and one issued here validates there.
    if (!fs.existsSync(PEER_KEYS)) return;
    const provider = new FernetTokenProvider(new FernetKeyRepository(PEER_KEYS, 3), { info() {}, error() {} });
    provider.reload();
    const decoded = provider.decode(issued.oauthToken);
    t.same(decoded.payload.scope, { type: 'oauth1', projectId: issued.projectId, accessTokenId: issued.accessTokenId }, 'Keystone\'s OauthScopedPayload decodes');
    t.same(decoded.payload.methods, ['oauth1']);
    t.equal(decoded.payload.userId, issued.userId);
    const nowSeconds = Math.floor(Date.now() / 1000);
    const ours = provider.issue(
      { userId: issued.userId, methods: ['oauth1'], expiresAt: nowSeconds + 600, auditIds: [newAuditId()], scope: { type: 'oauth1', projectId: issued.projectId, accessTokenId: issued.accessTokenId } },
      nowSeconds,
    );
    const validated = await send(`${PEER_URL}/v3/auth/tokens`, { method: 'GET', headers: { 'x-auth-token': issued.adminToken, 'x-subject-token': ours } });
    t.equal(validated.status, 200, 'Keystone validates an OAuth token issued here');
    t.same(validated.body.token['OS-OAUTH1'], { access_token_id: issued.accessTokenId, consumer_id: issued.consumerId });
    t.same(validated.body.token.methods, ['oauth1']);
  });
  for (const name of Object.keys(theirs)) t.same(ours[name], theirs[name], name);
  t.same(Object.keys(ours), Object.keys(theirs));
});
