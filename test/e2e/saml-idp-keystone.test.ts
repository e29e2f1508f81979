import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD } from '../helpers/keystone-peer.ts';
import { elements, makeKeyPair, parseXml, samlAttributes, skeleton } from '../federation/saml/saml-test-helpers.ts';
import { NS } from '../../src/federation/saml/namespaces.ts';

// K2K, this service as SAML identity provider, against the real Keystone 22 with [saml] configured
// (skipped without it). Start one, its metadata file written by keystone-manage, e.g.:
//   openssl req -x509 -newkey rsa:2048 -nodes -keyout /tmp/ks-saml-keys/key.pem -out /tmp/ks-saml-keys/cert.pem -days 365 -subj /CN=ks
//   KEYSTONE_PORT=15300 KEYSTONE_PEER_DIR=/tmp/ks-saml-peer KEYSTONE_DB=ks_saml_idp KEYSTONE_EXTRA_CONF="[saml]
//   certfile = /tmp/ks-saml-keys/cert.pem
//   keyfile = /tmp/ks-saml-keys/key.pem
//   idp_entity_id = http://127.0.0.1:15300/v3/OS-FEDERATION/saml2/idp
//   idp_sso_endpoint = http://127.0.0.1:15300/v3/OS-FEDERATION/saml2/sso
//   idp_metadata_path = /tmp/ks-saml-peer/etc/saml2_idp_metadata.xml" bash ../shared/peers/keystone/start.sh
//   keystone-manage --config-file /tmp/ks-saml-peer/etc/keystone.conf saml_idp_metadata > /tmp/ks-saml-peer/etc/saml2_idp_metadata.xml
// Compared: statuses, content types, the X-sp-url/X-auth-url headers, error bodies, and the XML's
// element structure and attribute values (not ids, times, digests or signature values).

const SAML_PEER_URL = process.env.KEYSTONE_SAML_PEER_URL ?? 'http://127.0.0.1:15300';

async function samlPeerUp(): Promise<boolean> {
  try {
    const answer = await fetch(`${SAML_PEER_URL}/v3/OS-FEDERATION/saml2/metadata`, { signal: AbortSignal.timeout(2000) });
    return answer.status === 200 && (await answer.text()).includes('EntityDescriptor');
  } catch {
    return false;
  }
}

interface Seen {
  status: number;
  type: string | null;
  spUrl?: string | null;
  authUrl?: string | null;
  body: unknown;
}

async function request(base: string, method: string, path: string, body?: unknown, token?: string) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { 'x-auth-token': token } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  return { response, text: await response.text() };
}

async function scenario(base: string, password: string): Promise<Record<string, Seen>> {
  const login = async (scope?: unknown) => {
    const { response } = await request(base, 'POST', '/v3/auth/tokens', passwordAuth({ name: 'admin', domainId: 'default' }, password, scope));
    if (response.status !== 201) throw new Error(`login: ${response.status}`);
    return response.headers.get('x-subject-token')!;
  };
  const admin = await login({ project: { name: 'admin', domain: { id: 'default' } } });
  const unscoped = await login();
  const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const api = async (method: string, path: string, body?: unknown) => {
    const { response, text } = await request(base, method, path, body, admin);
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const sp = `sp-${run}`;
  const spOff = `spoff-${run}`;
  await api('PUT', `/v3/OS-FEDERATION/service_providers/${sp}`, { service_provider: { auth_url: `http://${sp}.example/auth`, sp_url: `http://${sp}.example/ecp`, relay_state_prefix: 'rs:', enabled: true } });
  await api('PUT', `/v3/OS-FEDERATION/service_providers/${spOff}`, { service_provider: { auth_url: 'http://off.example/auth', sp_url: 'http://off.example/ecp', enabled: false } });
  const group = (await api('POST', '/v3/groups', { group: { name: `g-${run}`, domain_id: 'default' } })).group.id;
  const userId = (await api('GET', '/v3/users?name=admin')).users[0].id;
  const seen: Record<string, Seen> = {};
  const normalize = (text: string) => text.split(run).join('RUN');
  const samlBody = (token: string, id: string) => ({ auth: { identity: { methods: ['token'], token: { id: token } }, scope: { service_provider: { id } } } });
  const ask = async (step: string, method: string, path: string, body: unknown, shape: (text: string) => unknown) => {
    const { response, text } = await request(base, method, path, body);
    const type = response.headers.get('content-type');
    let shown: unknown;
    if (type?.startsWith('text/xml')) shown = shape(normalize(text));
    else if (text) {
      const error = JSON.parse(text).error;
      // Keystone's schema messages dump the schema (jsonschema): first line only.
      shown = { ...error, message: response.status === 400 ? 'schema' : normalize(String(error.message)) };
    }
    seen[step] = { status: response.status, type: type?.split(';')[0] ?? null, spUrl: normalize(response.headers.get('x-sp-url') ?? 'none'), authUrl: normalize(response.headers.get('x-auth-url') ?? 'none'), body: shown };
  };
  const assertionShape = (xml: string) => {
    const document = parseXml(xml);
    const attributes = samlAttributes(xml);
    return {
      skeleton: skeleton(xml),
      destination: elements(document, NS.protocol, 'Response')[0]!.getAttribute('Destination'),
      recipient: elements(document, NS.assertion, 'SubjectConfirmationData')[0]!.getAttribute('Recipient'),
      nameId: elements(document, NS.assertion, 'NameID')[0]!.textContent,
      relayState: elements(document, NS.ecp, 'RelayState')[0]?.textContent?.replace(/[0-9a-f]{32}$/, 'UUID') ?? null,
      attributes: { ...attributes, openstack_roles: [...(attributes.openstack_roles ?? [])].sort() },
    };
  };
  const A = '/v3/auth/OS-FEDERATION/saml2';
  try {
    await ask('metadata', 'GET', '/v3/OS-FEDERATION/saml2/metadata', undefined, (xml) => skeleton(xml));
    await ask('saml2', 'POST', A, samlBody(admin, sp), assertionShape);
    await ask('ecp', 'POST', `${A}/ecp`, samlBody(admin, sp), assertionShape);
    for (const path of [A, `${A}/ecp`]) {
      await ask(`${path} unknown sp`, 'POST', path, samlBody(admin, `nope-${run}`), String);
      await ask(`${path} disabled sp`, 'POST', path, samlBody(admin, spOff), String);
      await ask(`${path} unscoped token`, 'POST', path, samlBody(unscoped, sp), String);
      await ask(`${path} bad token`, 'POST', path, samlBody('not-a-token', sp), String);
      await ask(`${path} unknown sp and bad token`, 'POST', path, samlBody('not-a-token', `nope-${run}`), String);
      await ask(`${path} no auth`, 'POST', path, {}, String);
      await ask(`${path} no scope`, 'POST', path, { auth: { identity: { token: { id: admin } } } }, String);
      await ask(`${path} extra property`, 'POST', path, { auth: { ...samlBody(admin, sp).auth, extra: 1 } }, String);
      await ask(`${path} token id not a string`, 'POST', path, samlBody(5 as unknown as string, sp), String);
    }
    // Last: Keystone revokes the user's tokens when a group membership is removed.
    await api('PUT', `/v3/groups/${group}/users/${userId}`);
    await ask('saml2 with a group', 'POST', A, samlBody(admin, sp), (xml) => samlAttributes(xml).openstack_groups);
    await api('DELETE', `/v3/groups/${group}/users/${userId}`);
  } finally {
    await request(base, 'DELETE', `/v3/OS-FEDERATION/service_providers/${sp}`, undefined, admin);
    await request(base, 'DELETE', `/v3/OS-FEDERATION/service_providers/${spOff}`, undefined, admin);
    await request(base, 'DELETE', `/v3/groups/${group}`, undefined, admin);
  }
  return seen;
}

const skip = (await samlPeerUp()) ? false : `no Keystone with [saml] at ${SAML_PEER_URL} (see the start of this file)`;

t.test('K2K identity provider: the same answers as Keystone 22', { skip }, async (t) => {
  const keys = makeKeyPair(t);
  const app = await startTestApp(t, {
    SAML_CERTFILE: keys.certFile,
    SAML_KEYFILE: keys.keyFile,
    SAML_IDP_ENTITY_ID: 'http://127.0.0.1:15300/v3/OS-FEDERATION/saml2/idp',
    SAML_IDP_SSO_ENDPOINT: 'http://127.0.0.1:15300/v3/OS-FEDERATION/saml2/sso',
  });
  await app.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = app.app.server.server.address();
  const ours = await scenario(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, ADMIN_PASSWORD);
  const theirs = await scenario(SAML_PEER_URL, PEER_PASSWORD);
  t.same(Object.keys(ours), Object.keys(theirs));
  for (const step of Object.keys(theirs)) {
    t.same(ours[step], theirs[step], step);
  }
});
