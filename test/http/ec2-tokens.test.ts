import { createHash } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { debianPython } from '../helpers/debian-packages.ts';
import { startPythonWorker } from '../helpers/python-worker.ts';

// POST /v3/ec2tokens and /v3/s3tokens: requests signed by botocore (an independent AWS signer,
// Debian's python3-botocore), checked as Keystone 22 checks them.

const SIGNER = path.join(import.meta.dirname, '../helpers/aws-sign.py');
const PYTHON = debianPython(['python3-botocore']);
// One botocore process for the file, asked once per signature.
const signer = startPythonWorker(t, PYTHON, [SIGNER, '--serve']);

/** The `credentials` body for a request botocore signs at `at` (epoch ms). */
async function sign(mode: 'ec2-v4' | 'ec2-v2' | 's3-v1' | 's3-v4', access: string, secret: string, at: number, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const date = new Date(at).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return signer.ask<Record<string, unknown>>({ mode, access, secret, date, params: { Action: 'DescribeInstances' }, ...extra });
}

async function setup(t: Parameters<typeof startTestApp>[0]) {
  const test = await startTestApp(t);
  const token = (await test.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': test.adminToken })).json().token;
  const ec2 = (await test.call('POST', `/v3/users/${token.user.id}/credentials/OS-EC2`, { tenant_id: token.project.id })).json().credential;
  return { ...test, userId: token.user.id as string, projectId: token.project.id as string, access: ec2.access as string, secret: ec2.secret as string };
}

const GENERIC_401 = { error: { code: 401, title: 'Unauthorized', message: 'The request you have made requires authentication.' } };

t.test('ec2tokens: SigV4 and SigV2 from botocore give a project-scoped ec2credential token', async (t) => {
  const { call, clock, access, secret, userId, projectId } = await setup(t);
  for (const mode of ['ec2-v4', 'ec2-v2'] as const) {
    const answer = await call('POST', '/v3/ec2tokens', { credentials: await sign(mode, access, secret, clock.now()) });
    t.equal(answer.statusCode, 200, mode);
    const subject = String(answer.headers['x-subject-token']);
    t.ok(subject.length > 0, `${mode}: X-Subject-Token`);
    const token = answer.json().token;
    t.same(token.methods, ['ec2credential']);
    t.equal(token.user.id, userId);
    t.equal(token.project.id, projectId);
    t.ok(token.roles.some((role: { name: string }) => role.name === 'admin'));
    t.ok(Array.isArray(token.catalog));
    const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject });
    t.equal(validated.statusCode, 200, `${mode}: the token validates`);
    t.same(validated.json().token.methods, ['ec2credential']);
  }
  // The other accepted body names.
  for (const key of ['credential', 'ec2Credentials']) {
    t.equal((await call('POST', '/v3/ec2tokens', { [key]: await sign('ec2-v4', access, secret, clock.now()) })).statusCode, 200, key);
  }
  // Clients that sign the host without its port are accepted, as Keystone retries without it.
  const withoutPort = await sign('ec2-v2', access, secret, clock.now(), { host: 'ec2.example.com' });
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: { ...withoutPort, host: 'ec2.example.com:8773' } })).statusCode, 200);
});

t.test('ec2tokens: what Keystone refuses', async (t) => {
  const test = await setup(t);
  const { call, clock, access, secret, login } = test;
  const good = await sign('ec2-v4', access, secret, clock.now());

  const badSignature = await call('POST', '/v3/ec2tokens', { credentials: { ...good, signature: '0'.repeat(64) } });
  t.equal(badSignature.statusCode, 401);
  t.same(badSignature.json(), GENERIC_401);
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, 'wrong-secret', clock.now()) })).statusCode, 401, 'signed with another secret');
  const tampered = { ...good, params: { Action: 'TerminateInstances' } };
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: tampered })).statusCode, 401, 'a changed request');
  const { signature: _signature, ...unsigned } = good;
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: unsigned })).statusCode, 401, 'no signature');
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: { access, signature: 'x' } })).statusCode, 401, 'nothing signed: 401, never a 500');
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: {} })).statusCode, 401, 'no access key');

  const unknown = await call('POST', '/v3/ec2tokens', { credentials: { ...good, access: 'nope' } });
  t.equal(unknown.statusCode, 404, "Keystone 22 answers an unknown access key with the credential's 404");
  t.equal(unknown.json().error.message, `Could not find credential: ${createHash('sha256').update('nope').digest('hex')}.`);

  const empty = await call('POST', '/v3/ec2tokens', {});
  t.equal(empty.statusCode, 400);
  t.equal(empty.json().error.message, 'request must include a request body');

  // auth_ttl: 15 minutes after the request's timestamp, then 401.
  clock.advance(14 * 60_000);
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: good })).statusCode, 200, 'within auth_ttl');
  clock.advance(2 * 60_000);
  t.same((await call('POST', '/v3/ec2tokens', { credentials: good })).json(), GENERIC_401, 'expired');

  // Only an admin or a service asks (Keystone 22's ec2tokens_validate); no token: 401.
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, secret, clock.now()) }, null)).statusCode, 401);
  const project = (await call('POST', '/v3/projects', { project: { name: 'p-ec2', domain_id: 'default' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name: 'u-ec2', password: 'pw-secret-1', domain_id: 'default' } })).json().user;
  const memberRole = (await call('GET', '/v3/roles?name=member')).json().roles[0];
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${memberRole.id}`);
  const memberToken = (await login({ id: user.id }, 'pw-secret-1', { project: { id: project.id } })).token;
  const denied = await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, secret, clock.now()) }, memberToken);
  t.equal(denied.statusCode, 403);
  t.equal(denied.json().error.message, 'You are not authorized to perform the requested action: identity:ec2tokens_validate.');

  // A user's credential on a project where they hold no role: "User not valid for project." (401).
  const other = (await call('POST', '/v3/projects', { project: { name: 'p-norole', domain_id: 'default' } })).json().project;
  const userCredential = (await call('POST', `/v3/users/${user.id}/credentials/OS-EC2`, { tenant_id: other.id })).json().credential;
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', userCredential.access, userCredential.secret, clock.now()) })).statusCode, 401);
  // A disabled user: 401.
  const ownCredential = (await call('POST', `/v3/users/${user.id}/credentials/OS-EC2`, { tenant_id: project.id })).json().credential;
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', ownCredential.access, ownCredential.secret, clock.now()) })).statusCode, 200);
  await call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } });
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', ownCredential.access, ownCredential.secret, clock.now()) })).statusCode, 401);

  // A credential of another type under the same id is not an EC2 credential.
  const certAccess = 'cert-access';
  await call('POST', '/v3/credentials', { credential: { type: 'EC2', blob: JSON.stringify({ access: certAccess, secret: 's' }), user_id: test.userId } });
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', certAccess, 's', clock.now()) })).statusCode, 401);
});

t.test('ec2tokens: deleting the credential stops new tokens but revokes none (as Keystone)', async (t) => {
  const { call, clock, access, secret, userId } = await setup(t);
  const issued = await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, secret, clock.now()) });
  const subject = String(issued.headers['x-subject-token']);
  t.equal((await call('DELETE', `/v3/users/${userId}/credentials/OS-EC2/${access}`)).statusCode, 204);
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': subject })).statusCode, 200, 'the token still validates');
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, secret, clock.now()) })).statusCode, 404);
});

t.test('s3tokens: SigV4 (s3 scope) and HMAC-SHA1 v1 strings to sign from botocore', async (t) => {
  const { call, clock, access, secret, projectId } = await setup(t);
  for (const mode of ['s3-v4', 's3-v1'] as const) {
    const answer = await call('POST', '/v3/s3tokens', { credentials: await sign(mode, access, secret, clock.now(), { path: '/bucket/key', host: 's3.example.com' }) });
    t.equal(answer.statusCode, 200, mode);
    t.equal(answer.headers['x-subject-token'], undefined, 'no X-Subject-Token, as Keystone');
    t.same(answer.json().token.methods, ['ec2credential']);
    t.equal(answer.json().token.project.id, projectId);
    const wrong = await call('POST', '/v3/s3tokens', { credentials: await sign(mode, access, 'other-secret', clock.now(), { path: '/bucket/key', host: 's3.example.com' }) });
    t.same(wrong.json(), GENERIC_401, `${mode}: another secret`);
  }
  // A version 4 string to sign must be for s3.
  const ec2Scoped = await sign('ec2-v4', access, secret, clock.now());
  const stringToSign = ['AWS4-HMAC-SHA256', '20261127T000000Z', '20261127/RegionOne/ec2/aws4_request', 'x'].join('\n');
  t.equal((await call('POST', '/v3/s3tokens', { credentials: { access, signature: ec2Scoped.signature, token: Buffer.from(stringToSign).toString('base64url') } })).statusCode, 401);
  t.equal((await call('POST', '/v3/s3tokens', { credentials: { access, signature: 'x' } })).statusCode, 401, 'no token: 401, never a 500');
});

t.test('ec2tokens: a credential that names a trust gives a trust-scoped token with the trust\'s roles only', async (t) => {
  const test = await startTestApp(t);
  const { call, login, clock } = test;
  const roles: Record<string, string> = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'ec2-trusted' } })).json().project.id as string;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'ec2-trustor', password: 'Pw-1' } })).json().user.id as string;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'ec2-trustee', password: 'Pw-2' } })).json().user.id as string;
  const stranger = (await call('POST', '/v3/users', { user: { name: 'ec2-stranger', password: 'Pw-3' } })).json().user.id as string;
  // The trustor holds admin on the project; the trust delegates reader only.
  await call('PUT', `/v3/projects/${project}/users/${trustor}/roles/${roles.admin}`);
  await call('PUT', `/v3/projects/${project}/users/${stranger}/roles/${roles.member}`);
  const trustorToken = (await login({ id: trustor }, 'Pw-1', { project: { id: project } })).token;
  const makeTrust = async (impersonation: boolean) =>
    (await call('POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: trustor, trustee_user_id: trustee, project_id: project, impersonation, roles: [{ name: 'reader' }] } }, trustorToken)).json().trust.id as string;
  // Keystone once stamped the trust of the token that made an ec2 credential; such credentials (or
  // ones written so by an admin) are honoured. A trust-scoped token itself may not make any.
  const credentialNaming = async (owner: string, trustId: string, access: string) => {
    const made = await call('POST', '/v3/credentials', { credential: { type: 'ec2', user_id: owner, project_id: project, blob: JSON.stringify({ access, secret: `${access}-secret`, trust_id: trustId }) } });
    t.equal(made.statusCode, 201);
    return (at: number) => sign('ec2-v4', access, `${access}-secret`, at);
  };

  for (const impersonation of [true, false]) {
    const trustId = await makeTrust(impersonation);
    // The trust's token shows the trustor when it impersonates: the credential may be the trustor's then.
    const owner = impersonation ? trustor : trustee;
    const signed = await credentialNaming(owner, trustId, `trusted-${impersonation}`);
    const answer = await call('POST', '/v3/ec2tokens', { credentials: await signed(clock.now()) });
    t.equal(answer.statusCode, 200, `impersonation ${impersonation}`);
    const body = answer.json().token;
    t.same(body.methods, ['ec2credential']);
    t.same(body['OS-TRUST:trust'], { id: trustId, trustor_user: { id: trustor }, trustee_user: { id: trustee }, impersonation });
    t.equal(body.user.id, owner);
    t.equal(body.project.id, project);
    t.same(body.roles.map((role: { name: string }) => role.name), ['reader'], "the trust's roles, never the trustor's admin");
    const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': String(answer.headers['x-subject-token']) });
    t.equal(validated.statusCode, 200);
    t.same(validated.json().token.roles.map((role: { name: string }) => role.name), ['reader']);
    t.equal(validated.json().token['OS-TRUST:trust'].id, trustId);

    // Deleting the trust: the credential gives no token any more (Keystone: the trust's 404).
    t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trustId}`)).statusCode, 204);
    const gone = await call('POST', '/v3/ec2tokens', { credentials: await signed(clock.now()) });
    t.equal(gone.statusCode, 404);
    t.equal(gone.json().error.message, `Could not find trust: ${trustId}.`);
  }

  // A trust named in the blob of someone who is not its trustee (nor the trustor it impersonates) delegates nothing.
  const trustId = await makeTrust(false);
  const forged = await credentialNaming(stranger, trustId, 'forged');
  const refused = await call('POST', '/v3/ec2tokens', { credentials: await forged(clock.now()) });
  t.equal(refused.statusCode, 403);
  const trustorsOwn = await credentialNaming(trustor, trustId, 'not-impersonated');
  t.equal((await call('POST', '/v3/ec2tokens', { credentials: await trustorsOwn(clock.now()) })).statusCode, 403, 'the trustor, when the trust does not impersonate');

  // The trust's own token makes no credential (Keystone's security fix: a delegation never mints one).
  const trustToken = (await login({ id: trustee }, 'Pw-2', { 'OS-TRUST:trust': { id: trustId } })).token;
  const minted = await call('POST', `/v3/users/${trustee}/credentials/OS-EC2`, { tenant_id: project }, trustToken);
  t.equal(minted.statusCode, 403);
  t.equal(minted.json().error.message, 'You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly.');
});

t.test('an EC2 signature\'s token is refused by the identity API (Keystone: "EC2 credential tokens cannot be used for authorization")', async (t) => {
  const { call, clock, access, secret, userId, projectId } = await setup(t);
  const issued = await call('POST', '/v3/ec2tokens', { credentials: await sign('ec2-v4', access, secret, clock.now()) });
  const token = String(issued.headers['x-subject-token']);
  for (const [method, url] of [['GET', `/v3/users/${userId}`], ['GET', '/v3/auth/catalog'], ['GET', `/v3/projects/${projectId}`]] as const) {
    const answer = await call(method, url, undefined, token);
    t.equal(answer.statusCode, 403, `${method} ${url}`);
    t.same(answer.json(), { error: { code: 403, title: 'Forbidden', message: 'You are not authorized to perform the requested action.' } });
  }
  const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: token } }, scope: { project: { id: projectId } } } }, null);
  t.equal(rescoped.statusCode, 403, 'nor exchanged for another token');
  t.equal(rescoped.json().error.message, 'You are not authorized to perform the requested action: Using a delegated token to create another token is not allowed..');
  t.equal((await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token })).statusCode, 200, 'it still validates (for the services it was made for)');
});
