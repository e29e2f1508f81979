import t from 'tap';
import { ForbiddenError, NotFoundError, ValidationError } from '../../src/support/errors.ts';
import { TrustEntity, TrustRoleEntity } from '../../src/store/entities.ts';
import { MAX_REDELEGATION_COUNT } from '../../src/trust/trust-service.ts';
import { loadConfig } from '../../src/config.ts';
import { startTestApp } from '../helpers/app.ts';

const loadConfigForTest = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp/kg-config-check', ...env });

async function world(t: Parameters<typeof startTestApp>[0]) {
  const test = await startTestApp(t);
  const { call } = test;
  const roles: Record<string, string> = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const project = (await call('POST', '/v3/projects', { project: { name: 'svc-trust' } })).json().project.id as string;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'svc-trustor', password: 'Pw-1' } })).json().user.id as string;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'svc-trustee', password: 'Pw-2' } })).json().user.id as string;
  await call('PUT', `/v3/projects/${project}/users/${trustor}/roles/${roles.member}`);
  return { ...test, roles, project, trustor, trustee, trusts: test.app.trusts };
}

t.test('create: roles held (implied ones count), stored with the trust, in one transaction', async (t) => {
  const { app, trusts, roles, project, trustor, trustee } = await world(t);
  const trust = await trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }, { id: roles.member }] });
  t.same(trust.roles.map((role) => role.id).sort(), [roles.member, roles.reader].sort(), 'reader is held through member');
  t.equal(trust.redelegationCount, 0);
  t.same((await app.store.reader().find(TrustRoleEntity, { trustId: trust.id })).map((row) => row.roleId).sort(), [roles.member, roles.reader].sort());
  t.same((await trusts.delegatedRoles(trust)).map((role) => role.id).sort(), [roles.member, roles.reader].sort());

  // A failure after the trust row would be written leaves nothing behind.
  await t.rejects(trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'admin' }] }), NotFoundError);
  t.equal(await app.store.reader().count(TrustEntity, {}), 1);
  await t.rejects(trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [] }), ForbiddenError);
  await t.rejects(
    trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true, remainingUses: 2 }),
    ValidationError,
  );
  const deep = await trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true });
  t.equal(deep.redelegationCount, MAX_REDELEGATION_COUNT);
  const none = await trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true, redelegationCount: 0 });
  t.equal(none.redelegationCount, 0, 'allow_redelegation with a count of 0 is no redelegation');
});

t.test('redelegation: depth, roles, expiry and impersonation only narrow', async (t) => {
  const { trusts, roles, project, trustor, trustee, clock } = await world(t);
  const base = { trustorUserId: trustor, trusteeUserId: trustee, projectId: project };
  const expiresAt = new Date(clock.now() + 3_600_000);
  const parent = await trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true, redelegationCount: 2, expiresAt });
  const child = await trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true }, { trustId: parent.id });
  t.equal(child.redelegationCount, 1);
  t.equal(child.redelegatedTrustId, parent.id);
  t.equal(child.expiresAt?.getTime(), Math.floor(expiresAt.getTime() / 1000) * 1000, "the parent's expiry when none is asked");
  const leaf = await trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }] }, { trustId: child.id });
  t.equal(leaf.redelegationCount, 0);
  await t.rejects(trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }] }, { trustId: leaf.id }), ForbiddenError, 'no depth left');
  await t.rejects(trusts.create({ ...base, impersonation: false, roles: [{ id: roles.member }] }, { trustId: parent.id }), ForbiddenError, 'a role the parent does not delegate');
  await t.rejects(trusts.create({ ...base, impersonation: true, roles: [{ name: 'reader' }] }, { trustId: parent.id }), ForbiddenError, 'impersonation from a trust without it');
  await t.rejects(
    trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }], expiresAt: new Date(expiresAt.getTime() + 60_000) }, { trustId: parent.id }),
    ForbiddenError,
    'a later expiry than the parent',
  );
  await t.rejects(
    trusts.create({ ...base, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true, redelegationCount: 2 }, { trustId: parent.id }),
    ForbiddenError,
    'another depth than the parent leaves',
  );
});

t.test('uses: taken one at a time, atomically; the last deletes the trust', async (t) => {
  const { app, trusts, project, trustor, trustee } = await world(t);
  const trust = await trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }], remainingUses: 3 });
  const epoch = async () => Number((await app.store.reader().execute<{ value: string }[]>('select value from access_epoch where id = 1'))[0]!.value);
  const before = await epoch();
  const taken = await Promise.all(Array.from({ length: 6 }, () => trusts.consumeUse(trust.id)));
  t.equal(taken.filter(Boolean).length, 3, 'six concurrent issues, three uses: three succeed');
  const row = await app.store.reader().findOne(TrustEntity, { id: trust.id });
  t.equal(row?.remainingUses, 0);
  t.ok(row?.deletedAt, 'deleted with its last use');
  t.equal(await epoch(), before + 1, 'the access epoch moves once, with the last use (other nodes drop what they hold)');
  t.equal(await trusts.find(trust.id), null);
  t.equal(await trusts.consumeUse(trust.id), false);
});

t.test('list filters, delete writes a trust revocation event', async (t) => {
  const { app, trusts, project, trustor, trustee } = await world(t);
  const a = await trusts.create({ trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }] });
  t.same((await trusts.list({ trustorUserId: trustor })).map((trust) => trust.id), [a.id]);
  t.same((await trusts.list({ trusteeUserId: trustee })).map((trust) => trust.id), [a.id]);
  t.same(await trusts.list({ trusteeUserId: trustor }), []);
  await trusts.delete(a.id);
  t.same(await trusts.list(), []);
  await t.rejects(trusts.delete(a.id), NotFoundError);
  t.ok(app.revocations.isRevoked({ userId: trustee, roleIds: [], auditId: 'x', auditChainId: 'x', trustId: a.id, issuedAt: Date.now() - 10_000 }));
  t.notOk(app.revocations.isRevoked({ userId: trustee, roleIds: [], auditId: 'x', auditChainId: 'x', trustId: 'another', issuedAt: Date.now() - 10_000 }));
});

t.test('TRUST_MAX_REDELEGATION_COUNT: the depth a chain starts with and the most one may ask (Keystone [trust] max_redelegation_count)', async (t) => {
  const test = await startTestApp(t, { TRUST_MAX_REDELEGATION_COUNT: '5' });
  const { call } = test;
  const project = (await call('POST', '/v3/projects', { project: { name: 'svc-deep' } })).json().project.id as string;
  const trustor = (await call('POST', '/v3/users', { user: { name: 'deep-trustor', password: 'Pw-1' } })).json().user.id as string;
  const trustee = (await call('POST', '/v3/users', { user: { name: 'deep-trustee', password: 'Pw-2' } })).json().user.id as string;
  const roles: Record<string, string> = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  await call('PUT', `/v3/projects/${project}/users/${trustor}/roles/${roles.member}`);
  const base = { trustorUserId: trustor, trusteeUserId: trustee, projectId: project, impersonation: false, roles: [{ name: 'reader' }], allowRedelegation: true };
  t.equal((await test.app.trusts.create(base)).redelegationCount, 5, 'a new chain starts at the setting');
  t.equal((await test.app.trusts.create({ ...base, redelegationCount: 5 })).redelegationCount, 5, 'the setting itself may be asked');
  await t.rejects(test.app.trusts.create({ ...base, redelegationCount: 6 }), ForbiddenError, 'more than the setting is refused');
  t.throws(() => loadConfigForTest({ TRUST_MAX_REDELEGATION_COUNT: '-1' }), /TRUST_MAX_REDELEGATION_COUNT/);
});
