import { createHash } from 'node:crypto';
import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { FixedAssertionVerifier } from '../helpers/federation.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { dropUncomparedTokenFields, PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// The mapped method of POST /v3/auth/tokens and the users API's `federated` attribute against the
// real Keystone 22 (skipped without a peer; it needs [auth] methods with mapped, openid and saml2:
//   KEYSTONE_EXTRA_CONF=$'[auth]\nmethods = external,password,token,oauth1,mapped,application_credential,totp,openid,saml2'
// for ../shared/peers/keystone/start.sh). Keystone under uwsgi believes OIDC-* request headers (what
// mod_auth_openidc would set in front of it); this service gets the same claims from a test verifier.
// Both sides' bodies are compared with the run's ids as labels.

interface Seen {
  status: number;
  body: unknown;
}

/** Claims → what the side needs to believe them: headers for Keystone, nothing for us (the verifier has them). */
type Prove = (claims: Record<string, string> | undefined) => Record<string, string>;

const FED = '/v3/OS-FEDERATION';

async function scenario(base: string, adminPassword: string, prove: Prove): Promise<Record<string, Seen>> {
  const admin = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (admin.status !== 201) throw new Error(`admin login: ${admin.status}`);
  const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>, token: string | null = admin.token) =>
    call(`${base}${path}`, { method, ...(token ? { token } : {}), ...(body === undefined ? {} : { body }), ...(headers ? { headers } : {}) });
  const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const idp = `idp-${run}`;
  const issuer = `http://issuer-${run}`;
  const labels: [string, string][] = [];
  const seen: Record<string, Seen> = {};
  const normalize = (value: unknown): unknown => {
    let text = JSON.stringify(value ?? null);
    for (const [each, label] of labels) text = text.split(each).join(label);
    const shown = JSON.parse(text);
    const token = shown?.token;
    if (token) {
      dropUncomparedTokenFields(token);
      token.methods = [...(token.methods ?? [])].sort();
      const federation = token.user?.['OS-FEDERATION'];
      if (federation) federation.groups = [...federation.groups].sort((a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id));
      if (token.roles) token.roles = [...token.roles].sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name));
    }
    if (shown?.user?.links) delete shown.user.links;
    if (Array.isArray(shown?.users)) {
      shown.users = shown.users.map((user: { links?: unknown }) => ({ ...user, links: undefined })).sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name));
      delete shown.links;
    }
    // Schema failures: Keystone quotes jsonschema's report, this service its own validator's words
    // (http/errors.ts, which names nested fields otherwise): only the status is compared.
    if (shown?.error?.code === 400 && /^Invalid input for field|is a required property$/.test(shown.error.message)) shown.error.message = 'a schema failure';
    return shown;
  };
  const record = (step: string, answer: { status: number; body: unknown }) => {
    seen[step] = { status: answer.status, body: normalize(answer.body) };
    return answer;
  };
  const created = async (method: string, path: string, body: unknown) => {
    const answer = await api(method, path, body);
    if (answer.status !== 201) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  };
  const roleId = async (name: string) => (await api('GET', `/v3/roles?name=${name}`)).body.roles[0].id as string;

  const domainId = (await created('POST', '/v3/domains', { domain: { name: `fed-${run}` } })).domain.id as string;
  labels.push([domainId, 'DOM'], [`fed-${run}`, 'DOMNAME'], [idp, 'IDP'], [issuer, 'ISS'], [run, 'RUN']);
  const developers = (await created('POST', '/v3/groups', { group: { name: 'developers', domain_id: domainId } })).group.id as string;
  const admins = (await created('POST', '/v3/groups', { group: { name: 'admins', domain_id: domainId } })).group.id as string;
  labels.push([developers, 'GDEV'], [admins, 'GADM']);
  const project = (await created('POST', '/v3/projects', { project: { name: `dev-${run}`, domain_id: domainId } })).project.id as string;
  labels.push([project, 'PROJ']);
  const member = await roleId('member');
  const reader = await roleId('reader');
  labels.push([member, 'ROLE_MEMBER'], [reader, 'ROLE_READER']);
  await api('PUT', `/v3/projects/${project}/groups/${developers}/roles/${member}`);
  await api('PUT', `/v3/domains/${domainId}/groups/${admins}/roles/${reader}`);
  const shadowId = createHash('sha256').update(`${domainId}useralice`).digest('hex');
  labels.push([shadowId, 'ALICE']);
  const users: string[] = [];
  try {
    await created('PUT', `${FED}/identity_providers/${idp}`, { identity_provider: { remote_ids: [issuer], enabled: true, domain_id: domainId } });
    await created('PUT', `${FED}/mappings/map-${run}`, {
      mapping: {
        rules: [
          {
            local: [{ user: { name: '{0}' } }, { groups: '{1}', domain: { id: domainId } }],
            remote: [{ type: 'HTTP_OIDC_PREFERRED_USERNAME' }, { type: 'HTTP_OIDC_GROUPS' }],
          },
        ],
      },
    });
    for (const protocol of ['openid', 'saml2']) {
      await created('PUT', `${FED}/identity_providers/${idp}/protocols/${protocol}`, { protocol: { mapping_id: `map-${run}`, remote_id_attribute: 'HTTP_OIDC_ISS' } });
    }
    const claims = { iss: issuer, preferred_username: 'alice', groups: 'developers;admins' };
    const login = await api('POST', `${FED}/identity_providers/${idp}/protocols/openid/auth`, undefined, prove(claims), null);
    if (login.status !== 201) throw new Error(`login: ${login.status}`);
    const federated = login.token;
    const issued = async (step: string, identity: Record<string, unknown>, scope?: unknown, claimsGiven?: Record<string, string>) => {
      const answer = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity, ...(scope === undefined ? {} : { scope }) } }, headers: prove(claimsGiven) });
      record(step, answer);
      return answer;
    };

    // ---- the mapped method with a federated token's id
    const scoped = await issued('openid id → project', { methods: ['openid'], openid: { id: federated } }, { project: { id: project } });
    await issued('mapped id → domain', { methods: ['mapped'], mapped: { id: federated } }, { domain: { id: domainId } });
    await issued('saml2 id → unscoped', { methods: ['saml2'], saml2: { id: federated } });
    record('validate the rescoped token', await api('GET', '/v3/auth/tokens', undefined, { 'x-subject-token': scoped.token }));
    await issued('a scoped federated token rescoped', { methods: ['openid'], openid: { id: scoped.token } }, { domain: { id: domainId } });
    const nonFederated = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['openid'], openid: { id: admin.token } }, scope: { project: { id: project } } } } });
    seen['a token that is not federated'] = { status: nonFederated.status, body: null };
    const bogus = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['openid'], openid: { id: 'gAAAAABbogus' } } } } });
    seen['no such token'] = { status: bogus.status, body: null };
    await issued('method without its object', { methods: ['openid'], saml2: { id: federated } });
    const unsupported = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: { auth: { identity: { methods: ['oidc'], oidc: { id: federated } } } } });
    seen['unsupported method'] = { status: unsupported.status, body: (unsupported.body as { error?: { message?: string } })?.error?.message };
    await issued('password of the admin with the token of alice', {
      methods: ['password', 'openid'],
      password: { user: { name: 'admin', domain: { id: 'default' }, password: adminPassword } },
      openid: { id: federated },
    });
    await issued('a project the groups have no role on', { methods: ['openid'], openid: { id: federated } }, { project: { name: 'admin', domain: { id: 'default' } } });

    // ---- without an id: the login (Keystone: from the environment; here: from the verifier)
    await issued('no id: nothing', { methods: ['openid'], openid: {} });
    await issued('no id: provider only', { methods: ['openid'], openid: { identity_provider: idp } });
    await issued('no id: nothing proven', { methods: ['openid'], openid: { identity_provider: idp, protocol: 'openid' } });
    await issued('no id: unknown provider', { methods: ['openid'], openid: { identity_provider: `nope-${run}`, protocol: 'openid' } }, undefined, claims);
    await issued('no id: proven, project', { methods: ['openid'], openid: { identity_provider: idp, protocol: 'openid' } }, { project: { id: project } }, claims);
    await issued('no id: another issuer', { methods: ['openid'], openid: { identity_provider: idp, protocol: 'openid' } }, undefined, { ...claims, iss: 'http://elsewhere' });

    // ---- the users API's federated attribute
    record('shadow user', await api('GET', `/v3/users/${shadowId}`));
    const made = await api('POST', '/v3/users', {
      user: { name: `carol-${run}`, domain_id: domainId, federated: [{ idp_id: idp, protocols: [{ protocol_id: 'openid', unique_id: `carol-${run}` }, { protocol_id: 'saml2', unique_id: `carol-saml-${run}` }] }] },
    });
    const carol = (made.body as { user?: { id: string } })?.user?.id ?? 'none';
    labels.push([carol, 'CAROL']);
    users.push(carol);
    record('create with federated', made);
    record('get with federated', await api('GET', `/v3/users/${carol}`));
    const createRefused = async (step: string, federatedObjects: unknown) => {
      const answer = await api('POST', '/v3/users', { user: { name: `erin-${run}`, domain_id: domainId, federated: federatedObjects } });
      const id = (answer.body as { user?: { id: string } })?.user?.id;
      if (id) users.push(id);
      record(step, answer);
    };
    await createRefused('create: unknown provider', [{ idp_id: `nope-${run}`, protocols: [{ protocol_id: 'openid', unique_id: 'e' }] }]);
    await createRefused('create: unknown protocol', [{ idp_id: idp, protocols: [{ protocol_id: 'nope', unique_id: 'e' }] }]);
    await createRefused('create: no protocols', [{ idp_id: idp }]);
    await createRefused('create: empty protocols', [{ idp_id: idp, protocols: [] }]);
    await createRefused('create: not a list', 'x');
    const patched = [{ idp_id: idp, protocols: [{ protocol_id: 'saml2', unique_id: `carol-new-${run}` }] }];
    record('patch federated', await api('PATCH', `/v3/users/${carol}`, { user: { federated: patched } }));
    record('patch federated []', await api('PATCH', `/v3/users/${carol}`, { user: { federated: [] } }));
    record('patch: unknown provider', await api('PATCH', `/v3/users/${carol}`, { user: { federated: [{ idp_id: `nope-${run}`, protocols: [{ protocol_id: 'openid', unique_id: 'z' }] }] } }));
    record('get after patches', await api('GET', `/v3/users/${carol}`));
    record('list ?idp_id', await api('GET', `/v3/users?idp_id=${idp}`));
    record('list ?idp_id&protocol_id=saml2', await api('GET', `/v3/users?idp_id=${idp}&protocol_id=saml2`));
    record('list ?unique_id=alice&idp_id', await api('GET', `/v3/users?unique_id=alice&idp_id=${idp}`));
    record('list ?idp_id&enabled=false', await api('GET', `/v3/users?idp_id=${idp}&enabled=false`));
    record('list ?idp_id=nope', await api('GET', `/v3/users?idp_id=nope-${run}`));
    record('list ?domain_id', await api('GET', `/v3/users?domain_id=${domainId}`));

    // ---- the provider disabled
    await api('PATCH', `${FED}/identity_providers/${idp}`, { identity_provider: { enabled: false } });
    await issued('disabled: openid id', { methods: ['openid'], openid: { id: federated } }, { project: { id: project } });
    await issued('disabled: no id', { methods: ['openid'], openid: { identity_provider: idp, protocol: 'openid' } }, undefined, claims);
  } finally {
    for (const user of users) await api('DELETE', `/v3/users/${user}`);
    await api('DELETE', `${FED}/identity_providers/${idp}`);
    await api('DELETE', `${FED}/mappings/map-${run}`);
    await api('PATCH', `/v3/domains/${domainId}`, { domain: { enabled: false } });
    await api('DELETE', `/v3/domains/${domainId}`);
  }
  return seen;
}

/**
 * Steps where this service deliberately differs (docs/compatibility.md): a disabled provider's
 * tokens no longer validate here, so its federated token given to a mapped method is "no token"
 * (404) where Keystone 22 validates it and then refuses the disabled provider (403).
 */
const DIFFERENT = new Set<string>(['disabled: openid id']);

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh with [auth] methods including mapped, openid, saml2)`;

t.test('the mapped method and users’ federated attribute answer as Keystone 22 does', { skip }, async (t) => {
  const verifier = new FixedAssertionVerifier(undefined);
  const testApp = await startTestApp(t, {}, { assertionVerifiers: [verifier] });
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const ourBase = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const ours = await scenario(ourBase, ADMIN_PASSWORD, (claims) => {
    verifier.assertion = claims ? Object.fromEntries(Object.entries(claims).map(([name, value]) => [`HTTP_OIDC_${name.toUpperCase()}`, value])) : undefined;
    return {};
  });
  const keystone = await scenario(PEER_URL, PEER_PASSWORD, (claims) => Object.fromEntries(Object.entries(claims ?? {}).map(([name, value]) => [`OIDC-${name}`, value])));
  t.strictSame(Object.keys(ours), Object.keys(keystone));
  for (const step of Object.keys(keystone)) {
    if (DIFFERENT.has(step)) continue;
    t.strictSame(ours[step], keystone[step], step);
  }
  t.equal(keystone['disabled: openid id']?.status, 403);
  t.equal(ours['disabled: openid id']?.status, 404);
  t.equal(keystone['a token that is not federated']?.status, 400, "Keystone 22: 400 \"'NoneType' object is not iterable\"");
});
