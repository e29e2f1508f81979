import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { debianPython } from '../helpers/debian-packages.ts';
import { call, passwordAuth, type Answer } from '../helpers/keystone-client.ts';
import { oauthlibAuthorization } from '../helpers/oauth1-signer.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// What a delegated token may do: a trust-scoped token, application credentials (restricted and
// unrestricted), an EC2 signature's token and an OAuth1 token, next to the user's own password
// token, each asked for the sensitive actions (credentials, OS-EC2, application credentials, OAuth1
// access tokens, trusts, re-scoping, authorizing a request token). The same requests go to this
// service and to the real Keystone 22 (Debian's, with its security fixes;
// ../shared/peers/keystone/start.sh; that half is skipped without a peer): the same statuses and
// messages.

interface Seen {
  status: number;
  said: unknown;
}

const SIGNER = path.join(import.meta.dirname, '../helpers/aws-sign.py');
const PYTHON = debianPython(['python3-botocore', 'python3-oauthlib']);

function ec2Sign(access: string, secret: string): Record<string, unknown> {
  const date = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const input = JSON.stringify({ mode: 'ec2-v4', access, secret, date, params: { Action: 'DescribeInstances' }, path: '/' });
  return JSON.parse(execFileSync(PYTHON, [SIGNER], { input, encoding: 'utf8' })) as Record<string, unknown>;
}

async function scenario(base: string, adminPassword: string, signBase = base): Promise<Record<string, Seen>> {
  const prefix = `dlg-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const adminLogin = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (adminLogin.status !== 201) throw new Error(`admin login: ${adminLogin.status}`);
  const as = (token: string) => (method: string, route: string, body?: unknown, headers?: Record<string, string>) =>
    call(`${base}${route}`, { method, token, ...(body === undefined ? {} : { body }), ...(headers ? { headers } : {}) });
  const admin = as(adminLogin.token);
  const adminId = adminLogin.body.token.user.id as string;
  const must = async (answer: Promise<Answer>, status: number, what: string) => {
    const got = await answer;
    if (got.status !== status) throw new Error(`${what}: ${got.status} ${JSON.stringify(got.body)}`);
    return got;
  };
  const roles: Record<string, string> = Object.fromEntries((await admin('GET', '/v3/roles')).body.roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await must(admin('POST', '/v3/projects', { project: { name: `${prefix}-p`, domain_id: 'default' } }), 201, 'project')).body.project.id as string;
  const user = (await must(admin('POST', '/v3/users', { user: { name: `${prefix}-u`, password: 'User-pw-1', domain_id: 'default' } }), 201, 'user')).body.user.id as string;
  const trustee = (await must(admin('POST', '/v3/users', { user: { name: `${prefix}-t`, password: 'Trustee-pw-1', domain_id: 'default' } }), 201, 'trustee')).body.user.id as string;
  const labels = new Map<string, string>([
    [user, '<user>'],
    [trustee, '<trustee>'],
    [project, '<project>'],
    [adminId, '<admin>'],
  ]);
  const plain = (text: string): string => {
    for (const [id, name] of labels) text = text.split(id).join(name);
    return text.split(prefix).join('~');
  };
  for (const [name, id] of Object.entries(roles)) labels.set(id, `<${name}>`);
  let consumer: string | undefined;
  try {
    await must(admin('PUT', `/v3/projects/${project}/users/${user}/roles/${roles.member}`), 204, 'grant');
    const primary = (await must(call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: user }, 'User-pw-1', { project: { id: project } }) }), 201, 'user login')).token;

    // The delegated tokens.
    const trust = (await must(as(primary)('POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: user, trustee_user_id: trustee, project_id: project, impersonation: false, roles: [{ name: 'member' }] } }), 201, 'trust')).body.trust.id as string;
    labels.set(trust, '<trust>');
    const trustToken = (await must(call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: trustee }, 'Trustee-pw-1', { 'OS-TRUST:trust': { id: trust } }) }), 201, 'trust login')).token;
    const appCredToken = async (name: string, unrestricted: boolean) => {
      const made = (await must(as(primary)('POST', `/v3/users/${user}/application_credentials`, { application_credential: { name: `${prefix}-${name}`, unrestricted } }), 201, name)).body.application_credential;
      return (await must(call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['application_credential'], application_credential: { id: made.id, secret: made.secret } } } } }), 201, `${name} login`)).token;
    };
    const restricted = await appCredToken('restricted', false);
    const unrestricted = await appCredToken('unrestricted', true);
    const ec2 = (await must(admin('POST', `/v3/users/${user}/credentials/OS-EC2`, { tenant_id: project }), 201, 'ec2 credential')).body.credential;
    // Each user holds a credential of their own already, so a list shows what a token may see.
    for (const owner of [user, trustee]) await must(admin('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'seed', user_id: owner } }), 201, 'seed credential');
    const ec2Token = (await must(admin('POST', '/v3/ec2tokens', { credentials: ec2Sign(ec2.access, ec2.secret) }), 200, 'ec2tokens')).token;
    const created = (await must(admin('POST', '/v3/OS-OAUTH1/consumers', { consumer: { description: prefix } }), 201, 'consumer')).body.consumer;
    consumer = created.id as string;
    const consumerSecret = created.secret as string | undefined;
    // Keystone's default policy lets an admin authorize request tokens: the OAuth1 token is the admin's.
    await must(admin('PUT', `/v3/projects/${project}/users/${adminId}/roles/${roles.member}`), 204, 'admin grant');
    const oauthToken = await oauth1Token(base, signBase, consumer, consumerSecret, project, adminLogin.token, roles.member!);

    const tokens: [string, string, string][] = [
      ['password', primary, user],
      ['trust', trustToken, trustee],
      ['restricted application credential', restricted, user],
      ['unrestricted application credential', unrestricted, user],
      ['ec2credential', ec2Token, user],
      ['oauth1', oauthToken, adminId],
    ];
    const seen: Record<string, Seen> = {};
    for (const [kind, token, self] of tokens) {
      const ask = async (action: string, method: string, route: string, body?: unknown, show?: (body: any) => unknown) => {
        const answer = await as(token)(method, route, body);
        const error = answer.body?.error as { message: string } | undefined;
        seen[`${kind}: ${action}`] = { status: answer.status, said: error ? plain(error.message) : show && answer.body !== undefined ? show(answer.body) : null };
        return answer;
      };
      const cert = await ask('create a credential', 'POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x', user_id: self, project_id: project } }, () => 'created');
      const ec2Made = await ask('create an ec2 credential', 'POST', '/v3/credentials', { credential: { type: 'ec2', blob: JSON.stringify({ access: `${prefix}-${kind}`, secret: 's' }), user_id: self, project_id: project } }, () => 'created');
      await ask('list credentials', 'GET', `/v3/credentials?user_id=${self}`, undefined, (body) => `${body.credentials.length} listed`);
      const osEc2 = await ask('create an OS-EC2 credential', 'POST', `/v3/users/${self}/credentials/OS-EC2`, { tenant_id: project }, () => 'created');
      await ask('list OS-EC2 credentials', 'GET', `/v3/users/${self}/credentials/OS-EC2`, undefined, () => 'listed');
      const appCred = await ask('create an application credential', 'POST', `/v3/users/${self}/application_credentials`, { application_credential: { name: `${prefix}-by-${kind}` } }, () => 'created');
      await ask('list application credentials', 'GET', `/v3/users/${self}/application_credentials`, undefined, () => 'listed');
      await ask('list OAuth1 access tokens', 'GET', `/v3/users/${self}/OS-OAUTH1/access_tokens`, undefined, () => 'listed');
      const trustMade = await ask('create a trust', 'POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: self, trustee_user_id: self === adminId ? trustee : adminId, project_id: project, impersonation: false, roles: [{ name: 'reader' }] } }, () => 'created');
      await ask('list trusts', 'GET', `/v3/OS-TRUST/trusts?trustor_user_id=${self}`, undefined, () => 'listed');
      // Re-scoping names the token in the body only (an X-Auth-Token is not what is judged here).
      const rescoped = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['token'], token: { id: token } }, scope: { project: { id: project } } } } });
      seen[`${kind}: re-scope`] = { status: rescoped.status, said: rescoped.body?.error ? plain(rescoped.body.error.message) : 'issued' };
      await ask('authorize a request token', 'PUT', `/v3/OS-OAUTH1/authorize/${'0'.repeat(32)}`, { roles: [{ id: roles.reader }] });
      // Clean up what got through (as admin: some of these tokens may delete nothing).
      if (cert.status === 201) await admin('DELETE', `/v3/credentials/${cert.body.credential.id}`);
      if (ec2Made.status === 201) await admin('DELETE', `/v3/credentials/${ec2Made.body.credential.id}`);
      if (osEc2.status === 201) await admin('DELETE', `/v3/users/${self}/credentials/OS-EC2/${osEc2.body.credential.access}`);
      if (appCred.status === 201) await admin('DELETE', `/v3/users/${self}/application_credentials/${appCred.body.application_credential.id}`);
      if (trustMade.status === 201) await admin('DELETE', `/v3/OS-TRUST/trusts/${trustMade.body.trust.id}`);
    }
    return seen;
  } finally {
    if (consumer) await admin('DELETE', `/v3/OS-OAUTH1/consumers/${consumer}`);
    await admin('DELETE', `/v3/users/${user}`);
    await admin('DELETE', `/v3/users/${trustee}`);
    await admin('DELETE', `/v3/projects/${project}`);
  }
}

/** An OAuth1 token of the user whose project token is `userToken`, for `roleId` on the project, through the whole flow. */
async function oauth1Token(base: string, signBase: string, consumer: string, consumerSecret: string | undefined, project: string, userToken: string, roleId: string): Promise<string> {
  if (!consumerSecret) throw new Error('the consumer secret was not shown');
  const sign = (route: string, signing: Record<string, string>) =>
    oauthlibAuthorization({ url: `${signBase}${route}`, timestamp: String(Math.floor(Date.now() / 1000)), nonce: randomBytes(16).toString('hex'), consumerKey: consumer, consumerSecret, ...signing });
  const form = async (route: string, headers: Record<string, string>) => {
    const response = await fetch(`${base}${route}`, { method: 'POST', headers, signal: AbortSignal.timeout(20_000) });
    const text = await response.text();
    if (response.status !== 201) throw new Error(`${route}: ${response.status} ${text}`);
    return Object.fromEntries(new URLSearchParams(text));
  };
  const request = await form('/v3/OS-OAUTH1/request_token', { authorization: sign('/v3/OS-OAUTH1/request_token', { callback: 'oob' }), 'requested-project-id': project });
  const authorized = await call(`${base}/v3/OS-OAUTH1/authorize/${request.oauth_token}`, { method: 'PUT', token: userToken, body: { roles: [{ id: roleId }] } });
  if (authorized.status !== 200) throw new Error(`authorize: ${authorized.status} ${JSON.stringify(authorized.body)}`);
  const access = await form('/v3/OS-OAUTH1/access_token', {
    authorization: sign('/v3/OS-OAUTH1/access_token', { token: request.oauth_token!, tokenSecret: request.oauth_token_secret!, verifier: authorized.body.token.oauth_verifier }),
  });
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    headers: { authorization: sign('/v3/auth/tokens', { token: access.oauth_token!, tokenSecret: access.oauth_token_secret! }) },
    body: { auth: { identity: { methods: ['oauth1'], oauth1: {} } } },
  });
  if (login.status !== 201) throw new Error(`oauth1 login: ${login.status} ${JSON.stringify(login.body)}`);
  return login.token;
}

// What Keystone 22 answered ('~' is the run's prefix).
const KEYSTONE: Record<string, Seen> = {
 "password: create a credential": {
  "status": 201,
  "said": "created"
 },
 "password: create an ec2 credential": {
  "status": 201,
  "said": "created"
 },
 "password: list credentials": {
  "status": 200,
  "said": "4 listed"
 },
 "password: create an OS-EC2 credential": {
  "status": 201,
  "said": "created"
 },
 "password: list OS-EC2 credentials": {
  "status": 200,
  "said": "listed"
 },
 "password: create an application credential": {
  "status": 201,
  "said": "created"
 },
 "password: list application credentials": {
  "status": 200,
  "said": "listed"
 },
 "password: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:list_access_tokens."
 },
 "password: create a trust": {
  "status": 201,
  "said": "created"
 },
 "password: list trusts": {
  "status": 200,
  "said": "listed"
 },
 "password: re-scope": {
  "status": 201,
  "said": "issued"
 },
 "password: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:authorize_request_token."
 },
 "trust: create a credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "trust: create an ec2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "trust: list credentials": {
  "status": 200,
  "said": "0 listed"
 },
 "trust: create an OS-EC2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "trust: list OS-EC2 credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "trust: create an application credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "trust: list application credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "trust: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:list_access_tokens."
 },
 "trust: create a trust": {
  "status": 404,
  "said": "Could not find role: <reader>."
 },
 "trust: list trusts": {
  "status": 200,
  "said": "listed"
 },
 "trust: re-scope": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using trust-scoped token to create another token. Create a new trust-scoped token instead."
 },
 "trust: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:authorize_request_token."
 },
 "restricted application credential: create a credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "restricted application credential: create an ec2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "restricted application credential: list credentials": {
  "status": 200,
  "said": "0 listed"
 },
 "restricted application credential: create an OS-EC2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "restricted application credential: list OS-EC2 credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "restricted application credential: create an application credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using method 'application_credential' is not allowed for managing additional application credentials.."
 },
 "restricted application credential: list application credentials": {
  "status": 200,
  "said": "listed"
 },
 "restricted application credential: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:list_access_tokens."
 },
 "restricted application credential: create a trust": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "restricted application credential: list trusts": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "restricted application credential: re-scope": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using a delegated token to create another token is not allowed.."
 },
 "restricted application credential: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:authorize_request_token."
 },
 "unrestricted application credential: create a credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "unrestricted application credential: create an ec2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "unrestricted application credential: list credentials": {
  "status": 200,
  "said": "0 listed"
 },
 "unrestricted application credential: create an OS-EC2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "unrestricted application credential: list OS-EC2 credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "unrestricted application credential: create an application credential": {
  "status": 201,
  "said": "created"
 },
 "unrestricted application credential: list application credentials": {
  "status": 200,
  "said": "listed"
 },
 "unrestricted application credential: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:list_access_tokens."
 },
 "unrestricted application credential: create a trust": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "unrestricted application credential: list trusts": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "unrestricted application credential: re-scope": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using a delegated token to create another token is not allowed.."
 },
 "unrestricted application credential: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:authorize_request_token."
 },
 "ec2credential: create a credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: create an ec2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: list credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: create an OS-EC2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: list OS-EC2 credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: create an application credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: list application credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: create a trust": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: list trusts": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "ec2credential: re-scope": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using a delegated token to create another token is not allowed.."
 },
 "ec2credential: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "oauth1: create a credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "oauth1: create an ec2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "oauth1: list credentials": {
  "status": 200,
  "said": "0 listed"
 },
 "oauth1: create an OS-EC2 credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "oauth1: list OS-EC2 credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly."
 },
 "oauth1: create an application credential": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "oauth1: list application credentials": {
  "status": 403,
  "said": "You are not authorized to perform the requested action."
 },
 "oauth1: list OAuth1 access tokens": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:list_access_tokens."
 },
 "oauth1: create a trust": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "oauth1: list trusts": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Delegated tokens cannot manage trusts.."
 },
 "oauth1: re-scope": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: Using OAuth-scoped token to create another token. Create a new OAuth-scoped token instead."
 },
 "oauth1: authorize a request token": {
  "status": 403,
  "said": "You are not authorized to perform the requested action: identity:authorize_request_token."
 }
};

t.test('this service: what each delegated token may do', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const seen = await scenario(base, ADMIN_PASSWORD, PUBLIC_URL);
  if (process.env.PRINT_SCENARIO) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: what each delegated token may do', { skip }, async (t) => {
  const seen = await scenario(PEER_URL, PEER_PASSWORD);
  if (process.env.PRINT_SCENARIO) console.error(JSON.stringify(seen, null, 1));
  t.same(seen, KEYSTONE);
});
