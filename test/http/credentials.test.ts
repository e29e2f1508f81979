import { createHash } from 'node:crypto';
import t from 'tap';
import { CredentialEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp, type TestApp } from '../helpers/app.ts';

// Keystone's /v3/credentials and OS-EC2, as Keystone 22 answers them (compared with the real one in
// test/e2e/credentials-keystone.test.ts).

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function adminIds(call: TestApp['call'], adminToken: string) {
  const body = (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': adminToken })).json().token;
  return { userId: body.user.id as string, projectId: body.project.id as string };
}

/** A user with the member role on a new project, and their project-scoped token. */
async function member(test: TestApp, name: string) {
  const { call, login } = test;
  const project = (await call('POST', '/v3/projects', { project: { name: `${name}-project`, domain_id: 'default' } })).json().project;
  const user = (await call('POST', '/v3/users', { user: { name, password: 'pw-secret-1', domain_id: 'default' } })).json().user;
  const roles = (await call('GET', '/v3/roles?name=member')).json().roles;
  await call('PUT', `/v3/projects/${project.id}/users/${user.id}/roles/${roles[0].id}`);
  const { token } = await login({ id: user.id }, 'pw-secret-1', { project: { id: project.id } });
  return { user, project, token };
}

t.test('credentials: create, show, list with filters, update the blob, delete', async (t) => {
  const test = await startTestApp(t);
  const { call, app, adminToken } = test;
  const { userId, projectId } = await adminIds(call, adminToken);

  const created = await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'hello', user_id: userId, extra1: 5, id: 'ignored' } });
  t.equal(created.statusCode, 201);
  const cert = created.json().credential;
  t.match(cert.id, /^[0-9a-f]{32}$/, 'a random id (one in the body is ignored)');
  t.same(cert, { extra1: 5, id: cert.id, user_id: userId, project_id: null, type: 'cert', blob: 'hello', links: { self: `${PUBLIC_URL}/v3/credentials/${cert.id}` } });

  const access = 'my-access-key';
  const ec2 = (await call('POST', '/v3/credentials', { credential: { type: 'ec2', blob: JSON.stringify({ access, secret: 's' }), user_id: userId, project_id: projectId } })).json().credential;
  t.equal(ec2.id, sha256(access), "an ec2 credential's id is the SHA-256 of its access key");
  const duplicate = await call('POST', '/v3/credentials', { credential: { type: 'ec2', blob: JSON.stringify({ access, secret: 'x' }), user_id: userId, project_id: projectId } });
  t.equal(duplicate.statusCode, 409);

  // The blob is encrypted at rest, with the hash of the key that encrypted it.
  const row = await app.store.reader().findOne(CredentialEntity, { id: cert.id });
  t.ok(row);
  t.not(row!.encryptedBlob, 'hello');
  t.notOk(row!.encryptedBlob.includes('hello'));
  t.match(row!.keyHash, /^[0-9a-f]{40}$/);

  t.same((await call('GET', `/v3/credentials/${cert.id}`)).json().credential, cert);
  const listed = (await call('GET', '/v3/credentials')).json();
  t.same(listed.credentials.map((c: { id: string }) => c.id).sort(), [cert.id, ec2.id].sort());
  t.same((await call('GET', '/v3/credentials?type=ec2')).json().credentials.map((c: { id: string }) => c.id), [ec2.id]);
  t.same((await call('GET', `/v3/credentials?user_id=${userId}&type=cert`)).json().credentials.map((c: { id: string }) => c.id), [cert.id]);
  t.same((await call('GET', '/v3/credentials?user_id=nobody')).json().credentials, []);

  const updated = await call('PATCH', `/v3/credentials/${ec2.id}`, { credential: { blob: JSON.stringify({ access: 'changed', secret: 's2' }) } });
  t.equal(updated.statusCode, 200);
  t.equal(updated.json().credential.id, ec2.id, 'changing the access key keeps the id, as Keystone does');
  t.equal(updated.json().credential.blob, '{"access":"changed","secret":"s2"}');
  t.equal((await call('GET', `/v3/credentials/${ec2.id}`)).json().credential.blob, '{"access":"changed","secret":"s2"}');

  t.equal((await call('DELETE', `/v3/credentials/${cert.id}`)).statusCode, 204);
  const gone = await call('GET', `/v3/credentials/${cert.id}`);
  t.equal(gone.statusCode, 404);
  t.equal(gone.json().error.message, `Could not find credential: ${cert.id}.`);
  t.equal((await call('DELETE', `/v3/credentials/${cert.id}`)).statusCode, 404);
});

t.test('credentials: Keystone\'s validation', async (t) => {
  const { call, adminToken } = await startTestApp(t);
  const { userId, projectId } = await adminIds(call, adminToken);
  const expect400 = async (method: 'POST' | 'PATCH', url: string, body: unknown, message: string | RegExp) => {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, 400, `${method} ${JSON.stringify(body)}`);
    t.match(answer.json().error.message, message);
  };
  await expect400('POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{"access":"x"}', user_id: userId } },
    `{'type': 'ec2', 'blob': '{"access":"x"}', 'user_id': '${userId}'} is not valid under any of the given schemas`);
  await expect400('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x' } }, "{'type': 'cert', 'blob': 'x'} is not valid under any of the given schemas");
  await expect400('POST', '/v3/credentials', {}, '{} is not valid under any of the given schemas');
  await expect400('POST', '/v3/credentials', { credential: { type: 'ec2', blob: 'notjson', user_id: userId, project_id: projectId } }, 'Invalid blob in credential');
  await expect400('POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{}', user_id: userId, project_id: projectId } }, /^Expecting to find blob in credential/);
  await expect400('POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{"secret": "s"}', user_id: userId, project_id: projectId } }, /^Expecting to find access in credential/);
  await expect400('POST', '/v3/credentials', { credential: { type: 'cert', blob: 5, user_id: userId } }, /^Invalid input for field 'blob'/);

  const cert = (await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x', user_id: 'no-such-user', project_id: 'no-such-project' } }));
  t.equal(cert.statusCode, 201, 'neither the user nor the project must exist (nor do they in Keystone)');
  const id = cert.json().credential.id;
  await expect400('PATCH', `/v3/credentials/${id}`, { credential: {} }, "'blob' is a required property");
  await expect400('PATCH', `/v3/credentials/${id}`, { credential: { type: 'ec2' } }, "Additional properties are not allowed ('type' was unexpected)");
  await expect400('PATCH', `/v3/credentials/${id}`, { credential: { project_id: null, blob: 'y' } }, "Additional properties are not allowed ('project_id' was unexpected)");
  const ec2 = (await call('POST', '/v3/credentials', { credential: { type: 'ec2', blob: '{"access": "a1", "trust_id": null}', user_id: userId, project_id: projectId } })).json().credential;
  await expect400('PATCH', `/v3/credentials/${ec2.id}`, { credential: { blob: 'nojson' } }, 'Invalid blob in credential');
  await expect400('PATCH', `/v3/credentials/${ec2.id}`, { credential: { blob: '{"access": "a1", "trust_id": "t"}' } }, 'trust_id can not be updated for credential');
  t.equal((await call('PATCH', '/v3/credentials/nope', { credential: { blob: 'x' } })).statusCode, 404);
});

t.test('credentials: the owner manages their own, and sees only their own', async (t) => {
  const test = await startTestApp(t);
  const { call, adminToken } = test;
  const { userId: adminId } = await adminIds(call, adminToken);
  const alice = await member(test, 'alice');
  const adminCredential = (await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'admin-blob', user_id: adminId } })).json().credential;

  const own = await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'mine', user_id: alice.user.id } }, alice.token);
  t.equal(own.statusCode, 201);
  const forOther = await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x', user_id: adminId } }, alice.token);
  t.equal(forOther.statusCode, 403);
  t.equal(forOther.json().error.message, 'You are not authorized to perform the requested action: identity:create_credential.');

  const listed = await call('GET', '/v3/credentials', undefined, alice.token);
  t.equal(listed.statusCode, 200);
  t.same(listed.json().credentials.map((c: { id: string }) => c.id), [own.json().credential.id], 'a list shows a non-admin only their own');
  t.equal((await call('GET', `/v3/credentials/${adminCredential.id}`, undefined, alice.token)).statusCode, 403);
  t.equal((await call('GET', '/v3/credentials/no-such-credential', undefined, alice.token)).statusCode, 403, 'no existence leak');
  t.equal((await call('PATCH', `/v3/credentials/${adminCredential.id}`, { credential: { blob: 'x' } }, alice.token)).statusCode, 403);
  t.equal((await call('DELETE', `/v3/credentials/${adminCredential.id}`, undefined, alice.token)).statusCode, 403);
  t.equal((await call('PATCH', `/v3/credentials/${own.json().credential.id}`, { credential: { blob: 'new' } }, alice.token)).statusCode, 200);
  t.equal((await call('DELETE', `/v3/credentials/${own.json().credential.id}`, undefined, alice.token)).statusCode, 204);
});

t.test('OS-EC2: create, list, show, delete; Keystone\'s errors', async (t) => {
  const test = await startTestApp(t);
  const { call, adminToken } = test;
  const { userId, projectId } = await adminIds(call, adminToken);
  const base = `/v3/users/${userId}/credentials/OS-EC2`;

  const created = await call('POST', base, { tenant_id: projectId });
  t.equal(created.statusCode, 201);
  const ec2 = created.json().credential;
  t.match(ec2.access, /^[0-9a-f]{32}$/);
  t.match(ec2.secret, /^[0-9a-f]{32}$/);
  t.same(ec2, { user_id: userId, tenant_id: projectId, access: ec2.access, secret: ec2.secret, trust_id: null, links: { self: `${PUBLIC_URL}${base}/${ec2.access}` } });
  const v3 = (await call('GET', `/v3/credentials/${sha256(ec2.access)}`)).json().credential;
  t.equal(v3.type, 'ec2');
  t.equal(v3.blob, `{"access": "${ec2.access}", "secret": "${ec2.secret}", "trust_id": null}`, "Keystone's blob, as Python's json.dumps writes it");

  t.same((await call('GET', `${base}/${ec2.access}`)).json().credential, ec2);
  t.same((await call('GET', base)).json().credentials, [ec2]);

  const badProject = await call('POST', base, { tenant_id: 'nope' });
  t.equal(badProject.statusCode, 404);
  t.equal(badProject.json().error.message, 'Could not find project: nope.');
  t.equal((await call('POST', base, {})).json().error.message, 'Could not find project: None.');
  t.equal((await call('POST', '/v3/users/nouser/credentials/OS-EC2', { tenant_id: projectId })).json().error.message, 'Could not find user: nouser.');
  const missing = await call('GET', `${base}/nope`);
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, `Could not find credential: ${sha256('nope')}.`);
  t.equal((await call('DELETE', `${base}/nope`)).statusCode, 404);

  // A member manages their own EC2 credentials, not another user's.
  const bob = await member(test, 'bob');
  const bobBase = `/v3/users/${bob.user.id}/credentials/OS-EC2`;
  const bobs = await call('POST', bobBase, { tenant_id: bob.project.id }, bob.token);
  t.equal(bobs.statusCode, 201);
  t.equal((await call('GET', bobBase, undefined, bob.token)).json().credentials.length, 1);
  t.equal((await call('GET', base, undefined, bob.token)).statusCode, 403);
  t.equal((await call('POST', base, { tenant_id: projectId }, bob.token)).statusCode, 403);
  t.equal((await call('GET', `${base}/${ec2.access}`, undefined, bob.token)).statusCode, 403);
  t.equal((await call('DELETE', `${base}/${ec2.access}`, undefined, bob.token)).statusCode, 403);

  t.equal((await call('DELETE', `${base}/${ec2.access}`)).statusCode, 204);
  t.same((await call('GET', base)).json().credentials, []);
});

t.test('credentials go with their user and with their project', async (t) => {
  const test = await startTestApp(t);
  const { call, app } = test;
  const carol = await member(test, 'carol');
  const dave = await member(test, 'dave');
  await call('POST', `/v3/users/${carol.user.id}/credentials/OS-EC2`, { tenant_id: carol.project.id });
  await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x', user_id: carol.user.id } });
  const daves = (await call('POST', `/v3/users/${dave.user.id}/credentials/OS-EC2`, { tenant_id: dave.project.id })).json().credential;
  await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'y', user_id: dave.user.id } });
  t.equal(await app.store.reader().count(CredentialEntity, {}), 4);

  t.equal((await call('DELETE', `/v3/users/${carol.user.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(CredentialEntity, { userId: carol.user.id }), 0, "the user's credentials are deleted with them");

  await call('PATCH', `/v3/projects/${dave.project.id}`, { project: { enabled: false } });
  t.equal((await call('DELETE', `/v3/projects/${dave.project.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(CredentialEntity, { id: sha256(daves.access) }), 0, "the project's credentials are deleted with it");
  t.equal(await app.store.reader().count(CredentialEntity, { userId: dave.user.id }), 1, 'a credential of no project stays');
});

t.test('delegated tokens (an application credential\'s, an EC2 signature\'s) touch no credential', async (t) => {
  const test = await startTestApp(t);
  const { call, request } = test;
  const erin = await member(test, 'erin');
  const own = (await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'x', user_id: erin.user.id } }, erin.token)).json().credential;
  const appCredential = (await call('POST', `/v3/users/${erin.user.id}/application_credentials`, { application_credential: { name: 'bot' } }, erin.token)).json().application_credential;
  const issued = await request({
    method: 'POST',
    url: '/v3/auth/tokens',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ auth: { identity: { methods: ['application_credential'], application_credential: { id: appCredential.id, secret: appCredential.secret } } } }),
  });
  t.equal(issued.statusCode, 201);
  const delegated = String(issued.headers['x-subject-token']);
  const refused = await call('POST', '/v3/credentials', { credential: { type: 'cert', blob: 'y', user_id: erin.user.id } }, delegated);
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.message, 'You are not authorized to perform the requested action: Delegated tokens cannot access credentials directly.');
  t.equal((await call('GET', `/v3/credentials/${own.id}`, undefined, delegated)).statusCode, 403);
  t.same((await call('GET', '/v3/credentials', undefined, delegated)).json().credentials, [], 'a list shows a delegated token nothing');
  t.equal((await call('POST', `/v3/users/${erin.user.id}/credentials/OS-EC2`, { tenant_id: erin.project.id }, delegated)).statusCode, 403);
  t.equal((await call('GET', `/v3/users/${erin.user.id}/credentials/OS-EC2`, undefined, delegated)).statusCode, 403);
});
