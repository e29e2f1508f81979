// K2K with the REAL Keystone 22 as identity provider and this service as its service provider: a
// Keystone of our own (../shared/peers/keystone/start.sh, [saml] configured, its metadata written by
// keystone-manage saml_idp_metadata and trusted here through SAML_TRUSTED_IDP_METADATA) has this
// service registered as service provider (sp_url = auth_url = our saml2 login URL); the ECP
// assertion it issues is accepted here, and the real `openstack` CLI (keystoneauth's k2k plugin)
// gets a project token from us with --os-service-provider. Skipped, saying why, only when the
// Keystone peer cannot start.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startListeningTestApp, type TestApp } from '../helpers/app.ts';
import { ensureDebianPackages } from '../helpers/debian-packages.ts';
import { freePort, ROOT } from '../helpers/processes.ts';
import { makeKeyPair } from '../federation/saml/saml-test-helpers.ts';

const run = promisify(execFile);
const PEER = path.resolve(ROOT, '../shared/peers/keystone');
const PASSWORD = 'admin-secret';
const DB = 'ks_saml_sp_e2e';

t.setTimeout(600_000);

interface Peer {
  url: string;
  entityId: string;
  metadataFile: string;
  dir: string;
}

/** Our own Keystone with [saml]; undefined (and why) when it cannot start. */
async function startKeystone(): Promise<Peer | string> {
  // start.sh's own packages too: it would install them without waiting for another test file's dpkg lock.
  ensureDebianPackages(['xmlsec1', 'keystone', 'python3-openstackclient', 'python3-psycopg2', 'uwsgi-core', 'uwsgi-plugin-python3', 'curl', 'jq', 'wrk']);
  const keys = makeKeyPair(t);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kg-saml-sp-peer-'));
  const url = `http://127.0.0.1:${port}`;
  const entityId = `${url}/v3/OS-FEDERATION/saml2/idp`;
  const env = {
    ...process.env,
    KEYSTONE_PORT: String(port),
    KEYSTONE_PEER_DIR: dir,
    KEYSTONE_DB: DB,
    KEYSTONE_ADMIN_PASSWORD: PASSWORD,
    KEYSTONE_HASH_ROUNDS: '4',
    KEYSTONE_WORKERS: '1',
    KEYSTONE_EXTRA_CONF: [
      '[saml]',
      `certfile = ${keys.certFile}`,
      `keyfile = ${keys.keyFile}`,
      `idp_entity_id = ${entityId}`,
      `idp_sso_endpoint = ${url}/v3/OS-FEDERATION/saml2/sso`,
      `idp_metadata_path = ${dir}/etc/saml2_idp_metadata.xml`,
    ].join('\n'),
  };
  t.teardown(async () => {
    await run('bash', [path.join(PEER, 'stop.sh')], { env }).catch(() => undefined);
    await run('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-qc', `DROP DATABASE IF EXISTS "${DB}" WITH (FORCE)`]).catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  try {
    await run('bash', [path.join(PEER, 'start.sh')], { env, timeout: 300_000 });
  } catch (error) {
    const output = error as { stderr?: string; message: string };
    return `the Keystone peer did not start: ${(output.stderr ?? output.message).trim().split('\n').slice(-3).join(' / ')}`;
  }
  const { stdout } = await run('keystone-manage', ['--config-file', path.join(dir, 'etc', 'keystone.conf'), 'saml_idp_metadata'], { maxBuffer: 1 << 20 });
  const metadataFile = path.join(dir, 'etc', 'saml2_idp_metadata.xml');
  fs.writeFileSync(metadataFile, stdout);
  return { url, entityId, metadataFile, dir };
}

async function keystone(peer: Peer, method: string, route: string, body?: unknown, token?: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${peer.url}${route}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { 'x-auth-token': token } : {}), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

async function keystoneAdminToken(peer: Peer): Promise<string> {
  const login = await keystone(peer, 'POST', '/v3/auth/tokens', {
    auth: { identity: { methods: ['password'], password: { user: { name: 'admin', domain: { id: 'default' }, password: PASSWORD } } }, scope: { project: { name: 'admin', domain: { id: 'default' } } } },
  });
  if (login.status !== 201) throw new Error(`Keystone login: ${login.status} ${login.text}`);
  return login.headers.get('x-subject-token') as string;
}

/** Our side: the identity provider (Keystone's entity id), Keystone's K2K mapping, a project for its users. */
async function registerKeystoneIdp(app: TestApp, peer: Peer): Promise<{ domainId: string; projectId: string }> {
  const ok = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201 && response.statusCode !== 204) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.body ? response.json() : undefined;
  };
  const domainId = (await ok('POST', '/v3/domains', { domain: { name: 'k2k-users' } })).domain.id as string;
  const groupId = (await ok('POST', '/v3/groups', { group: { name: 'federated_users', domain_id: domainId } })).group.id as string;
  const projectId = (await ok('POST', '/v3/projects', { project: { name: 'k2k-project', domain_id: domainId } })).project.id as string;
  const member = (await app.call('GET', '/v3/roles?name=member')).json().roles[0].id as string;
  await ok('PUT', `/v3/projects/${projectId}/groups/${groupId}/roles/${member}`, undefined);
  await ok('PUT', '/v3/OS-FEDERATION/identity_providers/keystone-idp', { identity_provider: { remote_ids: [peer.entityId], enabled: true, domain_id: domainId } });
  await ok('PUT', '/v3/OS-FEDERATION/mappings/k2k-mapping', {
    mapping: {
      rules: [
        {
          local: [{ user: { name: '{0}' } }, { group: { name: 'federated_users', domain: { id: domainId } } }],
          remote: [{ type: 'openstack_user' }, { type: 'openstack_user_domain', any_one_of: ['Default'] }],
        },
      ],
    },
  });
  await ok('PUT', '/v3/OS-FEDERATION/identity_providers/keystone-idp/protocols/saml2', { protocol: { mapping_id: 'k2k-mapping' } });
  return { domainId, projectId };
}

t.test('the real Keystone as identity provider, this service as its service provider', async (t) => {
  const peer = await startKeystone();
  if (typeof peer === 'string') return t.plan(0, `skipped: ${peer}`);
  const { testApp: app, base } = await startListeningTestApp(t, (base) => ({ PUBLIC_URL: base, SAML_TRUSTED_IDP_METADATA: peer.metadataFile }));
  const { domainId, projectId } = await registerKeystoneIdp(app, peer);
  const loginUrl = `${base}/v3/OS-FEDERATION/identity_providers/keystone-idp/protocols/saml2/auth`;

  // Keystone's side: this service as its service provider, sp_url = auth_url = our login URL.
  const admin = await keystoneAdminToken(peer);
  const sp = await keystone(peer, 'PUT', '/v3/OS-FEDERATION/service_providers/keystone-gateway', { service_provider: { auth_url: loginUrl, sp_url: loginUrl, enabled: true } }, admin);
  t.equal(sp.status, 201, `service provider registered at Keystone: ${sp.text.slice(0, 200)}`);

  await t.test('an ECP assertion from Keystone is accepted: 201 and a federated token', async (t) => {
    const ecp = await keystone(peer, 'POST', '/v3/auth/OS-FEDERATION/saml2/ecp', {
      auth: { identity: { methods: ['token'], token: { id: admin } }, scope: { service_provider: { id: 'keystone-gateway' } } },
    });
    t.equal(ecp.status, 200, `Keystone made the ECP assertion (${ecp.text.slice(0, 200)})`);
    t.match(ecp.text, /Recipient="http:\/\/127\.0\.0\.1:\d+\/v3\/OS-FEDERATION\/identity_providers\/keystone-idp\/protocols\/saml2\/auth"/);
    app.clock.set(Date.now());
    const login = await fetch(loginUrl, { method: 'POST', headers: { 'content-type': 'application/vnd.paos+xml' }, body: ecp.text });
    const body = await login.text();
    t.equal(login.status, 201, body.slice(0, 300));
    t.ok(login.headers.get('x-subject-token'), 'X-Subject-Token');
    t.match(JSON.parse(body).token, { methods: ['saml2'], user: { name: 'admin', domain: { id: domainId }, 'OS-FEDERATION': { identity_provider: { id: 'keystone-idp' }, protocol: { id: 'saml2' } } } });
    const again = await fetch(loginUrl, { method: 'POST', headers: { 'content-type': 'application/vnd.paos+xml' }, body: ecp.text });
    t.equal(again.status, 401, 'the same assertion again: refused (replay)');
    t.match(await again.json(), { error: { code: 401, title: 'Unauthorized' } });
  });

  await t.test('the real openstack CLI: --os-service-provider gets a project token from us', async (t) => {
    app.clock.set(Date.now());
    const { stdout } = await run(
      'openstack',
      [
        '--os-auth-url', `${peer.url}/v3`, '--os-identity-api-version', '3',
        '--os-username', 'admin', '--os-password', PASSWORD, '--os-user-domain-name', 'Default',
        '--os-project-name', 'admin', '--os-project-domain-name', 'Default',
        '--os-service-provider', 'keystone-gateway',
        '--os-remote-project-name', 'k2k-project', '--os-remote-project-domain-name', 'k2k-users',
        'token', 'issue', '-f', 'json',
      ],
      { timeout: 120_000, env: { ...process.env, OS_CLOUD: '', OS_AUTH_TYPE: '' } },
    );
    const issued = JSON.parse(stdout) as { id: string; project_id: string; user_id: string };
    t.equal(issued.project_id, projectId, 'scoped to our k2k-project');
    const validated = await app.call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': issued.id });
    t.equal(validated.statusCode, 200, 'a token of this service');
    const token = validated.json().token;
    t.match(token, { project: { id: projectId }, user: { name: 'admin', 'OS-FEDERATION': { identity_provider: { id: 'keystone-idp' } } } });
    t.ok(token.roles.some((role: { name: string }) => role.name === 'member'), "the federated_users group's member role");
  });
});
