import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// The OS-FEDERATION admin API, the same requests against this service and against the real
// Keystone 22 (skipped without a peer; run one with [auth] methods including openid and saml2):
// statuses and bodies, with the base URL shown as "B", the ids of this run as "I…" and the domain
// Keystone makes for a provider as "DOM". A schema failure's message is compared by its first line
// where this service words it as Keystone (see docs/compatibility.md), else by status only.

interface Seen {
  status: number;
  body: unknown;
}

const RULES = [{ local: [{ user: { name: '{0}' } }, { group: { id: 'g1' } }], remote: [{ type: 'REMOTE_USER' }, { type: 'GROUPS', any_one_of: ['admins'], regex: false }] }];

async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const idp = `idp-${run}`;
  const idp2 = `idp2-${run}`;
  const mapping = `map-${run}`;
  const sp = `sp-${run}`;
  const remote = `http://issuer-${run}`;
  const adminProject: string = login.body?.token?.project?.id ?? 'none';
  const names: [string, string][] = [[`nowhere-${run}`, 'NOWHERE'], [adminProject, 'ADMIN_PROJECT'], [idp2, 'IDP2'], [idp, 'IDP'], [mapping, 'MAP'], [sp, 'SP'], [remote, 'REMOTE'], [linkBase, 'B']];
  let domain: string | undefined;
  const seen: Record<string, Seen> = {};
  const normalize = (value: unknown) => {
    let text = JSON.stringify(value ?? null);
    if (domain) text = text.split(domain).join('DOM');
    for (const [each, name] of names) text = text.split(each).join(name);
    return JSON.parse(text);
  };
  const ask = async (step: string, method: string, path: string, body?: unknown, firstLine = false) => {
    const answer = await api(method, path, body);
    const shown = normalize(answer.body);
    if (firstLine && shown?.error?.message) shown.error.message = String(shown.error.message).split('\n')[0];
    seen[step] = { status: answer.status, body: shown };
    return answer;
  };
  const FED = '/v3/OS-FEDERATION';
  const mine = (list: { id: string }[] | undefined) => normalize((list ?? []).filter((each) => each.id.includes(run))) as { id: string }[];
  try {
    // identity providers
    const created = await ask('idp create', 'PUT', `${FED}/identity_providers/${idp}`, { identity_provider: { remote_ids: [`${remote}/z`, `${remote}/a`], description: 'd' } });
    domain = created.body?.identity_provider?.domain_id;
    seen['idp create'] = { status: created.status, body: normalize(created.body) };
    await ask('idp domain', 'GET', `/v3/domains/${domain}`);
    await ask('idp get', 'GET', `${FED}/identity_providers/${idp}`);
    await ask('idp create again', 'PUT', `${FED}/identity_providers/${idp}`, { identity_provider: {} });
    await ask('idp remote id taken', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { remote_ids: [`${remote}/new`, `${remote}/a`] } });
    await ask('idp unknown domain', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { domain_id: 'nowhere' } });
    await ask('idp extra property', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { foo: 1 } }, true);
    await ask('idp negative ttl', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { authorization_ttl: -1 } }, true);
    await ask('idp not an object', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: 'x' }, true);
    seen['idp bad enabled'] = { status: (await api('PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { enabled: 'yes' } })).status, body: null };
    await ask('idp2 create', 'PUT', `${FED}/identity_providers/${idp2}`, { identity_provider: { domain_id: 'default', enabled: true, authorization_ttl: 0, remote_ids: null, description: null } });
    const listed = await api('GET', `${FED}/identity_providers`);
    seen['idp list'] = { status: listed.status, body: mine(listed.body?.identity_providers).map((each) => each.id).sort() };
    const enabled = await api('GET', `${FED}/identity_providers?enabled=true`);
    seen['idp list enabled'] = { status: enabled.status, body: mine(enabled.body?.identity_providers).map((each) => each.id) };
    await ask('idp list by id', 'GET', `${FED}/identity_providers?id=${idp2}`);
    await ask('idp update', 'PATCH', `${FED}/identity_providers/${idp}`, { identity_provider: { enabled: true, remote_ids: [`${remote}/c`, `${remote}/b`], authorization_ttl: 5 } });
    await ask('idp update taken', 'PATCH', `${FED}/identity_providers/${idp2}`, { identity_provider: { remote_ids: [`${remote}/c`] } });
    await ask('idp update domain', 'PATCH', `${FED}/identity_providers/${idp}`, { identity_provider: { domain_id: 'default' } }, true);
    await ask('idp update empty', 'PATCH', `${FED}/identity_providers/${idp}`, { identity_provider: {} }, true);
    await ask('idp update unknown', 'PATCH', `${FED}/identity_providers/nowhere-${run}`, { identity_provider: { enabled: true } });

    // mappings
    await ask('mapping create', 'PUT', `${FED}/mappings/${mapping}`, { mapping: { rules: RULES } });
    await ask('mapping create again', 'PUT', `${FED}/mappings/${mapping}`, { mapping: { rules: RULES } });
    await ask('mapping versioned', 'PUT', `${FED}/mappings/${mapping}-v`, { mapping: { schema_version: '2.0', rules: RULES } });
    await ask('mapping no rules', 'PUT', `${FED}/mappings/${mapping}-x`, { mapping: {} });
    await ask('mapping no body', 'PUT', `${FED}/mappings/${mapping}-x`, {});
    await ask('mapping empty rules', 'PUT', `${FED}/mappings/${mapping}-x`, { mapping: { rules: [] } });
    await ask('mapping many errors', 'PUT', `${FED}/mappings/${mapping}-x`, {
      mapping: {
        rules: [
          { local: [{ user: { name: 'x', bad: 1, type: 'bad' }, group: { id: 'g', name: 'n' }, projects: [{ name: 'p' }] }], remote: [{ type: 'a', any_one_of: ['x'], not_any_of: ['y'] }, { foo: 1 }], extra: true },
          { remote: [] },
          5,
          { local: [{ b: 1, a: 2, projects: [{ name: 'p', roles: [{ name: 'r', additionalProperties: 1 }] }] }], remote: [{ type: 1 }] },
        ],
      },
    });
    await ask('mapping rules not a list', 'PUT', `${FED}/mappings/${mapping}-x`, { mapping: { rules: 'x', foo: 1 } });
    await ask('mapping get', 'GET', `${FED}/mappings/${mapping}`);
    await ask('mapping get unknown', 'GET', `${FED}/mappings/${mapping}-x`);
    await ask('mapping update', 'PATCH', `${FED}/mappings/${mapping}-v`, { mapping: { rules: [{ local: [], remote: [{ type: 'a' }] }], id: 'zz' } });
    await ask('mapping update no rules', 'PATCH', `${FED}/mappings/${mapping}-v`, { mapping: {} });
    await ask('mapping update unknown', 'PATCH', `${FED}/mappings/${mapping}-x`, { mapping: { rules: RULES } });
    const mappings = await api('GET', `${FED}/mappings`);
    seen['mapping list'] = { status: mappings.status, body: mine(mappings.body?.mappings).map((each) => each.id).sort() };

    // protocols
    const protocols = `${FED}/identity_providers/${idp}/protocols`;
    await ask('protocol create', 'PUT', `${protocols}/openid`, { protocol: { mapping_id: mapping, remote_id_attribute: 'HTTP_OIDC_ISS' } });
    await ask('protocol create again', 'PUT', `${protocols}/openid`, { protocol: { mapping_id: mapping } });
    await ask('protocol unknown mapping', 'PUT', `${protocols}/saml2`, { protocol: { mapping_id: 'nope' } });
    await ask('protocol unknown idp', 'PUT', `${FED}/identity_providers/nowhere-${run}/protocols/saml2`, { protocol: { mapping_id: mapping } });
    await ask('protocol unknown idp and mapping', 'PUT', `${FED}/identity_providers/nowhere-${run}/protocols/saml2`, { protocol: { mapping_id: 'nope' } });
    await ask('protocol no mapping', 'PUT', `${protocols}/saml2`, { protocol: {} }, true);
    await ask('protocol no body', 'PUT', `${protocols}/saml2`, {}, true);
    await ask('protocol extra', 'PUT', `${protocols}/saml2`, { protocol: { mapping_id: mapping, x: 1 } }, true);
    await ask('protocol second', 'PUT', `${protocols}/saml2`, { protocol: { mapping_id: `${mapping}-v` } });
    await ask('protocol list', 'GET', protocols);
    await ask('protocol get', 'GET', `${protocols}/openid`);
    await ask('protocol get unknown', 'GET', `${protocols}/nope`);
    await ask('protocol list unknown idp', 'GET', `${FED}/identity_providers/nowhere-${run}/protocols`);
    await ask('protocol update', 'PATCH', `${protocols}/openid`, { protocol: { mapping_id: `${mapping}-v` } });
    await ask('protocol update unknown mapping', 'PATCH', `${protocols}/openid`, { protocol: { mapping_id: 'nope' } });
    await ask('protocol update unknown', 'PATCH', `${protocols}/nope`, { protocol: { mapping_id: mapping } });
    await ask('protocol update empty', 'PATCH', `${protocols}/openid`, { protocol: {} }, true);
    await ask('protocol delete', 'DELETE', `${protocols}/saml2`);
    await ask('protocol delete again', 'DELETE', `${protocols}/saml2`);

    // service providers
    await ask('sp create', 'PUT', `${FED}/service_providers/${sp}`, { service_provider: { auth_url: 'http://sp/auth', sp_url: 'http://sp/ecp' } });
    await ask('sp create again', 'PUT', `${FED}/service_providers/${sp}`, { service_provider: { auth_url: 'http://a', sp_url: 'http://b' } });
    await ask('sp create full', 'PUT', `${FED}/service_providers/${sp}-2`, { service_provider: { auth_url: 'http://a', sp_url: 'http://b', enabled: true, description: 'x', relay_state_prefix: 'pre' } });
    await ask('sp no auth_url', 'PUT', `${FED}/service_providers/${sp}-3`, { service_provider: { sp_url: 'http://b' } }, true);
    await ask('sp no body', 'PUT', `${FED}/service_providers/${sp}-3`, {}, true);
    seen['sp bad url'] = { status: (await api('PUT', `${FED}/service_providers/${sp}-3`, { service_provider: { auth_url: 'nourl', sp_url: 'http://b' } })).status, body: null };
    await ask('sp get', 'GET', `${FED}/service_providers/${sp}`);
    await ask('sp get unknown', 'GET', `${FED}/service_providers/${sp}-3`);
    await ask('sp list by id', 'GET', `${FED}/service_providers?id=${sp}`);
    const sps = await api('GET', `${FED}/service_providers?enabled=true`);
    seen['sp list enabled'] = { status: sps.status, body: mine(sps.body?.service_providers).map((each) => each.id) };
    await ask('sp update', 'PATCH', `${FED}/service_providers/${sp}`, { service_provider: { enabled: true, relay_state_prefix: 'zz' } });
    await ask('sp update empty', 'PATCH', `${FED}/service_providers/${sp}`, { service_provider: {} }, true);
    await ask('sp update id', 'PATCH', `${FED}/service_providers/${sp}`, { service_provider: { id: 'x' } }, true);
    await ask('sp update unknown', 'PATCH', `${FED}/service_providers/${sp}-3`, { service_provider: { enabled: true } });
    await ask('sp delete', 'DELETE', `${FED}/service_providers/${sp}-2`);
    await ask('sp delete again', 'DELETE', `${FED}/service_providers/${sp}-2`);

    // the scoping lists under OS-FEDERATION, for an ordinary token
    await ask('federation projects', 'GET', `${FED}/projects`);
    await ask('federation domains', 'GET', `${FED}/domains`);
    seen['auth OS-FEDERATION projects'] = { status: (await api('GET', '/v3/auth/OS-FEDERATION/projects')).status, body: null };
    seen['auth OS-FEDERATION domains'] = { status: (await api('GET', '/v3/auth/OS-FEDERATION/domains')).status, body: null };

    // deletions: the provider takes its protocols; its domain stays
    await ask('idp delete', 'DELETE', `${FED}/identity_providers/${idp}`);
    await ask('idp protocols after delete', 'GET', protocols);
    await ask('idp delete again', 'DELETE', `${FED}/identity_providers/${idp}`);
    seen['idp domain after delete'] = { status: (await api('GET', `/v3/domains/${domain}`)).status, body: null };
    await ask('mapping delete', 'DELETE', `${FED}/mappings/${mapping}`);
    await ask('mapping delete again', 'DELETE', `${FED}/mappings/${mapping}`);
  } finally {
    for (const path of [`identity_providers/${idp}`, `identity_providers/${idp2}`, `mappings/${mapping}`, `mappings/${mapping}-v`, `service_providers/${sp}`, `service_providers/${sp}-2`]) {
      await api('DELETE', `${FED}/${path}`);
    }
    if (domain) {
      await api('PATCH', `/v3/domains/${domain}`, { domain: { enabled: false } });
      await api('DELETE', `/v3/domains/${domain}`);
    }
  }
  return seen;
}

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('the OS-FEDERATION admin API answers as Keystone 22 does', { skip }, async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const ours = await scenario(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, ADMIN_PASSWORD, PUBLIC_URL);
  const keystone = await scenario(PEER_URL, PEER_PASSWORD);
  for (const step of Object.keys(keystone)) t.same(ours[step], keystone[step], step);
});
