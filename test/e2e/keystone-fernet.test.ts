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
