import t, { type Test } from 'tap';
import { pino } from 'pino';
import { TrustEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

const TRUST_TOKEN_REUSE = 'You are not authorized to perform the requested action: Using trust-scoped token to create another token. Create a new trust-scoped token instead.';

async function setup(t: Test) {
  const test = await startTestApp(t);
  const { call, login } = test;
  const roles: Record<string, string> = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'trusted' } })).json().project;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'trustor', password: 'Pw-1' } })).json().user;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'trustee', password: 'Pw-2' } })).json().user;
  const stranger = (await call('POST', '/v3/users', { user: { name: 'stranger', password: 'Pw-3' } })).json().user;
  t.equal((await call('PUT', `/v3/projects/${project.id}/users/${trustor.id}/roles/${roles.member}`)).statusCode, 204);
  const trustorToken = (await login({ id: trustor.id }, 'Pw-1', { project: { id: project.id } })).token;
  const trusteeToken = (await login({ id: trustee.id }, 'Pw-2')).token;
  const strangerToken = (await login({ id: stranger.id }, 'Pw-3')).token;
  const create = (trust: Record<string, unknown>, token = trustorToken) =>
    call('POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, project_id: project.id, impersonation: false, ...trust } }, token);
  const trustScoped = (trustId: string, user = trustee.id, password = 'Pw-2') =>
    call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { id: user, password } } }, scope: { 'OS-TRUST:trust': { id: trustId } } } }, null);
  return { ...test, roles, project, trustor, trustee, stranger, trustorToken, trusteeToken, strangerToken, create, trustScoped };
}

t.test('trusts: create, show, list, roles, delete, as Keystone 22 answers them', async (t) => {
  const { call, roles, project, trustor, trustee, trustorToken, trusteeToken, strangerToken, adminToken, create, app } = await setup(t);

  const created = await create({ roles: [{ name: 'reader' }], remaining_uses: 2 });
  t.equal(created.statusCode, 201);
  const trust = created.json().trust;
  t.match(trust, {
    id: /^[0-9a-f]{32}$/,
    trustor_user_id: trustor.id,
    trustee_user_id: trustee.id,
    project_id: project.id,
    impersonation: false,
    expires_at: null,
    remaining_uses: 2,
    deleted_at: null,
    redelegated_trust_id: null,
    redelegation_count: 0,
  });
  t.same(trust.roles.map((r: { id: string }) => r.id), [roles.reader]);
  t.same(trust.roles[0], { id: roles.reader, name: 'reader', domain_id: null, description: null, options: { immutable: true }, links: { self: `${PUBLIC_URL}/v3/roles/${roles.reader}` } });
  t.same(trust.links, { self: `${PUBLIC_URL}/v3/OS-TRUST/trusts/${trust.id}` });
  t.same(trust.roles_links, { self: `${PUBLIC_URL}/v3/${trust.id}/roles`, next: null, previous: null }, "Keystone 22's roles_links, as it writes them");

  const shown = await call('GET', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, trusteeToken);
  t.equal(shown.statusCode, 200);
  t.same(shown.json().trust, trust);
  t.equal((await call('GET', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, strangerToken)).statusCode, 403);
  const missing = await call('GET', '/v3/OS-TRUST/trusts/nope', undefined, strangerToken);
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.message, 'Could not find trust: nope.');

  const mine = await call('GET', `/v3/OS-TRUST/trusts?trustor_user_id=${trustor.id}`, undefined, trustorToken);
  t.equal(mine.statusCode, 200);
  t.same(mine.json().trusts.map((each: { id: string }) => each.id), [trust.id]);
  t.notOk('roles' in mine.json().trusts[0], 'a listed trust has no roles');
  t.same(mine.json().links, { self: `${PUBLIC_URL}/v3/OS-TRUST/trusts?trustor_user_id=${trustor.id}`, previous: null, next: null });
  t.equal((await call('GET', `/v3/OS-TRUST/trusts?trustee_user_id=${trustee.id}`, undefined, trusteeToken)).json().trusts.length, 1);
  t.equal((await call('GET', `/v3/OS-TRUST/trusts?trustor_user_id=${trustor.id}`, undefined, trusteeToken)).statusCode, 403);
  const all = await call('GET', '/v3/OS-TRUST/trusts', undefined, trustorToken);
  t.equal(all.statusCode, 403);
  t.equal(all.json().error.message, 'You are not authorized to perform the requested action: identity:list_trusts.');
  t.equal((await call('GET', '/v3/OS-TRUST/trusts', undefined, adminToken)).json().trusts.length, 1);
  t.same((await call('GET', '/v3/OS-TRUST/trusts?foo=bar', undefined, adminToken)).json().trusts, [], 'Keystone lists nothing for another filter');

  const trustRoles = await call('GET', `/v3/OS-TRUST/trusts/${trust.id}/roles`, undefined, trusteeToken);
  t.equal(trustRoles.statusCode, 200);
  t.same(trustRoles.json().roles.map((r: { id: string }) => r.id), [roles.reader]);
  t.same(trustRoles.json().links, trust.roles_links);
  t.equal((await call('GET', `/v3/OS-TRUST/trusts/${trust.id}/roles/${roles.reader}`, undefined, trusteeToken)).json().role.id, roles.reader);
  t.equal((await call('HEAD', `/v3/OS-TRUST/trusts/${trust.id}/roles/${roles.reader}`, undefined, trusteeToken)).statusCode, 200);
  const notDelegated = await call('GET', `/v3/OS-TRUST/trusts/${trust.id}/roles/${roles.member}`, undefined, trusteeToken);
  t.equal(notDelegated.statusCode, 404);
  t.equal(notDelegated.json().error.message, `Could not find role: ${roles.member}.`);

  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, trusteeToken)).statusCode, 403, 'the trustee does not delete');
  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, trustorToken)).statusCode, 204);
  t.equal((await call('GET', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, trustorToken)).statusCode, 404);
  const row = await app.store.reader().findOne(TrustEntity, { id: trust.id });
  t.ok(row?.deletedAt, 'soft-deleted, as Keystone');
  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, trustorToken)).statusCode, 404);
});

t.test('trusts: every refusal Keystone gives for bad input', async (t) => {
  const { call, roles, trustor, trustee, trustorToken, create, adminToken } = await setup(t);
  const expectError = async (response: Awaited<ReturnType<typeof call>>, status: number, message: string | RegExp) => {
    t.equal(response.statusCode, status);
    t.match(response.json().error.message, message);
  };
  await expectError(await create({ roles: [{ name: 'reader' }], expires_at: '2020-01-01T00:00:00Z' }), 400, /^The 'expires_at' must not be before now\./);
  await expectError(await create({ roles: [{ name: 'reader' }], expires_at: 'garbage' }), 400, /^Timestamp not in expected format\./);
  await expectError(await create({}), 403, 'You are not authorized to perform the requested action: At least one role should be specified.');
  await expectError(await create({ roles: [] }), 403, 'You are not authorized to perform the requested action: At least one role should be specified.');
  await expectError(await create({ roles: [{ name: 'admin' }] }), 404, `Could not find role: ${roles.admin}.`);
  await expectError(await create({ roles: [{ name: 'no-such-role' }] }), 404, 'Role no-such-role is not defined');
  await expectError(await create({ roles: [{ id: 'nope' }] }), 404, 'Could not find role: nope.');
  await expectError(await create({ roles: [{ name: 'reader' }], remaining_uses: 0 }), 400, /remaining_uses/);
  await expectError(await create({ roles: [{ name: 'reader' }], trustee_user_id: 'nouser' }), 404, 'Could not find user: nouser.');
  await expectError(await create({ roles: [{ name: 'reader' }], project_id: 'noproj' }), 404, 'Could not find project: noproj.');
  await expectError(await create({ roles: [{ name: 'reader' }], allow_redelegation: true, redelegation_count: 5 }), 403, 'You are not authorized to perform the requested action.');
  await expectError(await create({ roles: [{ name: 'reader' }], allow_redelegation: true, remaining_uses: 1 }), 400, 'remaining_uses must not be set if redelegation is allowed');
  await expectError(await create({ roles: [{ name: 'reader' }] }, adminToken), 403, 'You are not authorized to perform the requested action: identity:create_trust.');
  // Keystone decides before it validates: the body lacks impersonation (400 for the trustor), but
  // the admin is not the trustor (403 first, as the real Keystone 22 answers).
  const noImpersonation = { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, roles: [{ name: 'reader' }] } };
  t.equal((await call('POST', '/v3/OS-TRUST/trusts', noImpersonation)).statusCode, 403);
  t.equal((await call('POST', '/v3/OS-TRUST/trusts', noImpersonation, trustorToken)).statusCode, 400);
  const redelegatable = await create({ roles: [{ name: 'reader' }], allow_redelegation: true });
  t.equal(redelegatable.json().trust.redelegation_count, 3, "Keystone's max_redelegation_count by default");
  const extra = await create({ roles: [{ name: 'reader' }], colour: 'blue' });
  t.equal(extra.json().trust.colour, 'blue', 'an unknown attribute is kept, as Keystone does');
  t.equal((await call('GET', `/v3/OS-TRUST/trusts/${extra.json().trust.id}`)).json().trust.colour, 'blue', 'and shown again');
  const expiring = await create({ roles: [{ name: 'reader' }], expires_at: '2099-01-02T03:04:05.123456Z' });
  t.equal(expiring.json().trust.expires_at, '2099-01-02T03:04:05.000000Z', 'whole seconds, as Keystone keeps them');
});

t.test('trust-scoped tokens: the trustee, the trust roles, uses, impersonation, re-scoping, redelegation', async (t) => {
  const { call, roles, project, trustor, trustee, stranger, create, trustScoped, clock, app } = await setup(t);
  const trust = (await create({ roles: [{ name: 'member' }], remaining_uses: 2 })).json().trust;

  const issued = await trustScoped(trust.id);
  t.equal(issued.statusCode, 201);
  const body = issued.json().token;
  t.same(body['OS-TRUST:trust'], { id: trust.id, trustor_user: { id: trustor.id }, trustee_user: { id: trustee.id }, impersonation: false });
  t.equal(body.user.id, trustee.id);
  t.equal(body.project.id, project.id);
  t.notOk('is_domain' in body, 'no is_domain in a trust token, as Keystone');
  t.same(body.roles.map((r: { id: string }) => r.id), [roles.member, roles.reader], 'the trust role and what it implies, not the trustor\'s others');
  t.same(body.roles[0], { id: roles.member, name: 'member', domain_id: null, description: null, options: { immutable: true } });
  t.ok(Array.isArray(body.catalog));
  const token = issued.headers['x-subject-token'] as string;
  const validated = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
  t.equal(validated.statusCode, 200);
  t.same(validated.json().token['OS-TRUST:trust'], body['OS-TRUST:trust']);
  t.equal((await app.store.reader().findOne(TrustEntity, { id: trust.id }))?.remainingUses, 1, 'one use taken');

  t.equal((await trustScoped(trust.id, trustor.id, 'Pw-1')).statusCode, 403, 'only the trustee');
  t.equal((await trustScoped(trust.id, stranger.id, 'Pw-3')).statusCode, 403);
  t.equal((await trustScoped('0123456789abcdef0123456789abcdef')).statusCode, 401);
  const noId = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['password'], password: { user: { id: trustee.id, password: 'Pw-2' } } }, scope: { 'OS-TRUST:trust': {} } } }, null);
  t.equal(noId.statusCode, 400);
  t.match(noId.json().error.message, /^Expecting to find trust_id in trust\./);

  for (const scope of [{ project: { id: project.id } }, { 'OS-TRUST:trust': { id: trust.id } }, undefined]) {
    const rescoped = await call('POST', '/v3/auth/tokens', { auth: { identity: { methods: ['token'], token: { id: token } }, ...(scope ? { scope } : {}) } }, null);
    t.equal(rescoped.statusCode, 403);
    t.equal(rescoped.json().error.message, TRUST_TOKEN_REUSE);
  }

  // The last use deletes the trust; its tokens then stop validating (Keystone: "Could not find trust").
  clock.advance(1000);
  t.equal((await trustScoped(trust.id)).statusCode, 201);
  t.equal((await trustScoped(trust.id)).statusCode, 401, 'no use left');
  const gone = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token });
  t.equal(gone.statusCode, 404);
  t.equal(gone.json().error.message, `Could not find trust: ${trust.id}.`);

  // Impersonation: the token's user is the trustor; redelegation from it.
  const impersonating = (await create({ roles: [{ id: roles.member }], impersonation: true, allow_redelegation: true })).json().trust;
  const asTrustor = await trustScoped(impersonating.id);
  t.equal(asTrustor.statusCode, 201);
  t.equal(asTrustor.json().token.user.id, trustor.id);
  t.equal(asTrustor.json().token['OS-TRUST:trust'].impersonation, true);
  const impersonatingToken = asTrustor.headers['x-subject-token'] as string;
  const validatedAsTrustor = await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': impersonatingToken });
  t.equal(validatedAsTrustor.json().token.user.id, trustor.id);
  const redelegated = await call(
    'POST',
    '/v3/OS-TRUST/trusts',
    { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, project_id: project.id, impersonation: true, roles: [{ id: roles.member }] } },
    impersonatingToken,
  );
  t.equal(redelegated.statusCode, 201);
  t.match(redelegated.json().trust, { redelegated_trust_id: impersonating.id, redelegation_count: 0 });
  const deeper = await call(
    'POST',
    '/v3/OS-TRUST/trusts',
    { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, project_id: project.id, impersonation: true, roles: [{ id: roles.member }], allow_redelegation: true } },
    impersonatingToken,
  );
  t.equal(deeper.json().trust.redelegation_count, 2, 'one level less than its parent');
  const widened = await call(
    'POST',
    '/v3/OS-TRUST/trusts',
    { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, project_id: project.id, impersonation: true, roles: [{ id: roles.member }], remaining_uses: 3 } },
    impersonatingToken,
  );
  t.equal(widened.statusCode, 403, 'no remaining_uses on a redelegated trust');
});

t.test('trust tokens stop validating: trust deleted, trustor or trustee disabled, role removed from the trustor', async (t) => {
  const { call, login, roles, project, trustor, trustee, create, trustScoped, clock } = await setup(t);
  const issue = async () => {
    // A fresh trustor token each time (disabling the trustor revokes the one before).
    const trustorToken = (await login({ id: trustor.id }, 'Pw-1', { project: { id: project.id } })).token;
    const trust = (await create({ roles: [{ name: 'member' }] }, trustorToken)).json().trust;
    const response = await trustScoped(trust.id);
    t.equal(response.statusCode, 201);
    return { trust, token: response.headers['x-subject-token'] as string };
  };
  const valid = async (token: string) => (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token })).statusCode;
  const asCaller = async (token: string) => (await call('GET', `/v3/projects/${project.id}`, undefined, token)).statusCode;

  const deleted = await issue();
  t.equal(await asCaller(deleted.token), 200, 'a trust token works as X-Auth-Token');
  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${deleted.trust.id}`)).statusCode, 204);
  t.equal(await valid(deleted.token), 404);
  t.equal(await asCaller(deleted.token), 401);

  for (const [who, user] of [['trustor', trustor], ['trustee', trustee]] as const) {
    const issued = await issue();
    t.equal(await valid(issued.token), 200);
    t.equal((await call('PATCH', `/v3/users/${user.id}`, { user: { enabled: false } })).statusCode, 200);
    t.equal(await valid(issued.token), 404, `${who} disabled`);
    t.equal((await call('PATCH', `/v3/users/${user.id}`, { user: { enabled: true } })).statusCode, 200);
    clock.advance(1000);
    t.equal(await valid(issued.token), 404, `${who} enabled again: the revocation event still holds`);
  }

  const issued = await issue();
  t.equal(await valid(issued.token), 200);
  t.equal((await call('DELETE', `/v3/projects/${project.id}/users/${trustor.id}/roles/${roles.member}`)).statusCode, 204);
  t.equal(await valid(issued.token), 404, 'the trustor no longer holds the delegated role');
  t.equal((await trustScoped(issued.trust.id)).statusCode, 403, 'nor is a new token issued');
});

t.test('audit: identity.OS-TRUST:trust.created and .deleted, as Keystone sends them', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const { call, login } = await startTestApp(t, {}, { logger });
  const project = (await call('POST', '/v3/projects', { project: { name: 'audited' } })).json().project;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'a-trustor', password: 'Pw-1' } })).json().user;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'a-trustee', password: 'Pw-2' } })).json().user;
  const member = (await call('GET', '/v3/roles?name=member')).json().roles[0].id;
  await call('PUT', `/v3/projects/${project.id}/users/${trustor.id}/roles/${member}`);
  const token = (await login({ id: trustor.id }, 'Pw-1', { project: { id: project.id } })).token;
  lines.length = 0;
  const trust = (await call('POST', '/v3/OS-TRUST/trusts', { trust: { trustor_user_id: trustor.id, trustee_user_id: trustee.id, project_id: project.id, impersonation: false, roles: [{ name: 'member' }] } }, token)).json().trust;
  t.equal((await call('DELETE', `/v3/OS-TRUST/trusts/${trust.id}`, undefined, token)).statusCode, 204);
  const notifications = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'audit').map((entry) => entry.notification);
  t.match(notifications, [
    { event_type: 'identity.OS-TRUST:trust.created', payload: { action: 'created.OS-TRUST:trust', outcome: 'success', target: { typeURI: 'data/security/trust', id: trust.id }, initiator: { user_id: trustor.id } } },
    { event_type: 'identity.OS-TRUST:trust.deleted', payload: { action: 'deleted.OS-TRUST:trust', target: { typeURI: 'data/security/trust', id: trust.id } } },
  ]);
  t.equal(notifications.length, 2);
});
