import fs from 'node:fs';
import t from 'tap';
import { FernetKeyRepository } from '../../src/token/fernet-key-repository.ts';
import { FernetTokenProvider } from '../../src/token/fernet-provider.ts';
import { newAuditId } from '../../src/token/fernet-payload.ts';

// Migration from Keystone: given a real Keystone's key repository, its tokens decode here and ours
// validate there. Runs when ../shared/peers/keystone/start.sh has a peer up; otherwise it is skipped.
const PEER_URL = process.env.KEYSTONE_PEER_URL ?? 'http://127.0.0.1:15000';
const PEER_KEYS = `${process.env.KEYSTONE_PEER_DIR ?? '/tmp/keystone-peer'}/fernet-keys`;
const PEER_PASSWORD = process.env.KEYSTONE_PEER_PASSWORD ?? 'admin-secret';

async function peerUp(): Promise<boolean> {
  try {
    return fs.existsSync(PEER_KEYS) && (await fetch(`${PEER_URL}/v3`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
}

const silent = { info() {}, error() {} };

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('tokens cross between a real Keystone and this service', { skip }, async (t) => {
  const provider = new FernetTokenProvider(new FernetKeyRepository(PEER_KEYS, 3), silent);
  provider.reload();

  const auth = { auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { name: 'Default' }, password: PEER_PASSWORD } } }, scope: { project: { name: 'admin', domain: { name: 'Default' } } } } };
  const issued = await fetch(`${PEER_URL}/v3/auth/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(auth) });
  t.equal(issued.status, 201);
  const keystoneToken = issued.headers.get('x-subject-token')!;
  const body = ((await issued.json()) as { token: Record<string, any> }).token;

  // Keystone's token, decoded with our codec.
  const decoded = provider.decode(keystoneToken);
  t.equal(decoded.payload.userId, body.user.id);
  t.same(decoded.payload.scope, { type: 'project', projectId: body.project.id });
  t.same(decoded.payload.methods, body.methods);
  t.same(decoded.payload.auditIds, body.audit_ids);
  t.equal(new Date(decoded.payload.expiresAt * 1000).toISOString().replace('.000Z', '.000000Z'), body.expires_at);
  t.equal(new Date(decoded.issuedAt * 1000).toISOString().replace('.000Z', '.000000Z'), body.issued_at);

  // Our token, for the same user and project, validated by Keystone.
  const nowSeconds = Math.floor(Date.now() / 1000);
  const ours = provider.issue(
    { userId: body.user.id, methods: ['password'], expiresAt: nowSeconds + 600, auditIds: [newAuditId()], scope: { type: 'project', projectId: body.project.id } },
    nowSeconds,
  );
  const validated = await fetch(`${PEER_URL}/v3/auth/tokens`, { headers: { 'x-auth-token': keystoneToken, 'x-subject-token': ours } });
  t.equal(validated.status, 200, 'Keystone accepts a token this service issued');
  const theirView = ((await validated.json()) as { token: Record<string, any> }).token;
  t.equal(theirView.user.id, body.user.id);
  t.equal(theirView.project.id, body.project.id);
});

t.test('trust-scoped tokens cross too (payload version 3: the trustee as user, the trust id as bytes)', { skip }, async (t) => {
  const provider = new FernetTokenProvider(new FernetKeyRepository(PEER_KEYS, 3), silent);
  provider.reload();
  const json = async (path: string, method: string, token: string, body?: unknown) => {
    const response = await fetch(`${PEER_URL}${path}`, {
      method,
      headers: { 'content-type': 'application/json', 'x-auth-token': token },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, token: response.headers.get('x-subject-token') ?? '', body: (response.status === 204 ? {} : await response.json()) as Record<string, any> };
  };
  const login = async (user: Record<string, unknown>, password: string, scope?: unknown) =>
    json('/v3/auth/tokens', 'POST', '', { auth: { identity: { methods: ['password'], password: { user: { ...user, password } } }, ...(scope ? { scope } : {}) } });
  const admin = (await login({ name: 'admin', domain: { name: 'Default' } }, PEER_PASSWORD, { project: { name: 'admin', domain: { name: 'Default' } } })).token;
  const prefix = `fernet-trust-${Date.now().toString(36)}`;
  const password = `Pw-${prefix}`;
  const project = (await json('/v3/projects', 'POST', admin, { project: { name: prefix, domain_id: 'default' } })).body.project.id as string;
  const trustor = (await json('/v3/users', 'POST', admin, { user: { name: `${prefix}-trustor`, domain_id: 'default', password } })).body.user.id as string;
  const trustee = (await json('/v3/users', 'POST', admin, { user: { name: `${prefix}-trustee`, domain_id: 'default', password } })).body.user.id as string;
  t.teardown(async () => {
    for (const user of [trustor, trustee]) await json(`/v3/users/${user}`, 'DELETE', admin);
    await json(`/v3/projects/${project}`, 'PATCH', admin, { project: { enabled: false } });
    await json(`/v3/projects/${project}`, 'DELETE', admin);
  });
  const member = (await json('/v3/roles?name=member', 'GET', admin)).body.roles[0].id as string;
  t.equal((await json(`/v3/projects/${project}/users/${trustor}/roles/${member}`, 'PUT', admin)).status, 204);
  const trustorToken = (await login({ id: trustor }, password, { project: { id: project } })).token;
  const trust = await json('/v3/OS-TRUST/trusts', 'POST', trustorToken, {
    trust: { trustor_user_id: trustor, trustee_user_id: trustee, project_id: project, impersonation: true, roles: [{ name: 'member' }] },
  });
  t.equal(trust.status, 201);
  const trustId = trust.body.trust.id as string;

  // Keystone's trust token, decoded here.
  const issued = await login({ id: trustee }, password, { 'OS-TRUST:trust': { id: trustId } });
  t.equal(issued.status, 201);
  t.equal(issued.body.token.user.id, trustor, 'impersonating: Keystone shows the trustor');
  const decoded = provider.decode(issued.token);
  t.equal(decoded.payload.userId, trustee, 'but the payload carries the trustee');
  t.same(decoded.payload.scope, { type: 'trust', projectId: project, trustId });
  t.same(decoded.payload.auditIds, issued.body.token.audit_ids);

  // Ours, of the same form, validated by Keystone.
  const nowSeconds = Math.floor(Date.now() / 1000);
  const ours = provider.issue(
    { userId: trustee, methods: ['password'], expiresAt: nowSeconds + 600, auditIds: [newAuditId()], scope: { type: 'trust', projectId: project, trustId } },
    nowSeconds,
  );
  const validated = await fetch(`${PEER_URL}/v3/auth/tokens?nocatalog`, { headers: { 'x-auth-token': admin, 'x-subject-token': ours } });
  t.equal(validated.status, 200, 'Keystone accepts a trust token this service issued');
  const theirView = ((await validated.json()) as { token: Record<string, any> }).token;
  t.same(theirView['OS-TRUST:trust'], { id: trustId, trustor_user: { id: trustor }, trustee_user: { id: trustee }, impersonation: true });
  t.equal(theirView.user.id, trustor);
  t.equal(theirView.project.id, project);
});
