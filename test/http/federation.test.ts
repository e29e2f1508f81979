import t from 'tap';
import { IdentityProviderEntity } from '../../src/store/federation-entities.ts';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';

// /v3/OS-FEDERATION as Keystone 22 answers it (compared with the real one in
// test/e2e/federation-keystone.test.ts): bodies, statuses, links and error texts.

const FED = '/v3/OS-FEDERATION';
const RULES = [{ local: [{ user: { name: '{0}' } }], remote: [{ type: 'REMOTE_USER' }] }];

t.test('identity providers: create (201, a domain of its own), show, list with filters, update, delete', async (t) => {
  const { call, app } = await startTestApp(t);
  const created = await call('PUT', `${FED}/identity_providers/idp1`, { identity_provider: { remote_ids: ['http://b', 'http://a'], description: 'd' } });
  t.equal(created.statusCode, 201);
  const idp = created.json().identity_provider;
  t.match(idp.domain_id, /^[0-9a-f]{32}$/);
  const self = `${PUBLIC_URL}${FED}/identity_providers/idp1`;
  t.same(idp, { id: 'idp1', domain_id: idp.domain_id, enabled: false, description: 'd', remote_ids: ['http://b', 'http://a'], authorization_ttl: null, links: { self, protocols: `${self}/protocols` } });
  const domain = (await call('GET', `/v3/domains/${idp.domain_id}`)).json().domain;
  t.match(domain, { id: idp.domain_id, name: idp.domain_id, description: 'Auto generated federated domain for Identity Provider: idp1', enabled: true });

  t.same((await call('GET', `${FED}/identity_providers/idp1`)).json().identity_provider, { ...idp, remote_ids: ['http://a', 'http://b'] });
  const plain = await call('PUT', `${FED}/identity_providers/idp2`, { x: 1 });
  t.equal(plain.statusCode, 201, 'no identity_provider: {}');
  t.equal(plain.json().identity_provider.enabled, false);
  await call('PUT', `${FED}/identity_providers/idp3`, { identity_provider: { domain_id: 'default', enabled: true, authorization_ttl: 0, remote_ids: null, description: null } });

  const list = await call('GET', `${FED}/identity_providers`);
  t.equal(list.statusCode, 200);
  t.same(list.json().links, { self: `${PUBLIC_URL}${FED}/identity_providers`, previous: null, next: null });
  t.same(list.json().identity_providers.map((each: { id: string }) => each.id), ['idp1', 'idp2', 'idp3']);
  t.same(list.json().identity_providers[0].links, idp.links);
  t.same((await call('GET', `${FED}/identity_providers?enabled=true`)).json().identity_providers.map((each: { id: string }) => each.id), ['idp3']);
  t.same((await call('GET', `${FED}/identity_providers?enabled=false`)).json().identity_providers.map((each: { id: string }) => each.id), ['idp1', 'idp2']);
  t.same((await call('GET', `${FED}/identity_providers?id=idp2`)).json().identity_providers.map((each: { id: string }) => each.id), ['idp2']);
  t.same((await call('GET', `${FED}/identity_providers?id__contains=dp3`)).json().identity_providers.map((each: { id: string }) => each.id), ['idp3']);

  const patched = await call('PATCH', `${FED}/identity_providers/idp1`, { identity_provider: { enabled: true, remote_ids: ['http://c'], authorization_ttl: 5 } });
  t.equal(patched.statusCode, 200);
  t.same(patched.json().identity_provider, { ...idp, enabled: true, remote_ids: ['http://c'], authorization_ttl: 5 });
  t.match(await app.store.reader().findOne(IdentityProviderEntity, { id: 'idp1' }), { enabled: true, authorizationTtl: 5 });

  t.equal((await call('DELETE', `${FED}/identity_providers/idp1`)).statusCode, 204);
  const gone = await call('GET', `${FED}/identity_providers/idp1`);
  t.equal(gone.statusCode, 404);
  t.equal(gone.json().error.message, 'Could not find Identity Provider: idp1.');
  t.equal((await call('GET', `/v3/domains/${idp.domain_id}`)).statusCode, 200, 'its domain stays');
});

t.test('identity providers: errors', async (t) => {
  const { call } = await startTestApp(t);
  await call('PUT', `${FED}/identity_providers/idp1`, { identity_provider: { remote_ids: ['http://a'] } });
  const expect = async (method: 'PUT' | 'PATCH', url: string, body: unknown, status: number, message: string | RegExp) => {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, status, `${method} ${url} ${JSON.stringify(body)}`);
    t.match(answer.json().error.message, message);
  };
  await expect('PUT', `${FED}/identity_providers/idp1`, { identity_provider: {} }, 409, 'Conflict occurred attempting to store identity_provider - Duplicate entry: idp1.');
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { remote_ids: ['http://a'] } }, 409, 'Conflict occurred attempting to store identity_provider - Duplicate remote ID: http://a.');
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { domain_id: 'nope' } }, 404, 'Could not find domain: nope.');
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { foo: 1 } }, 400, "Additional properties are not allowed ('foo' was unexpected)");
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { enabled: 'yes' } }, 400, /^Invalid input for field 'enabled'/);
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { remote_ids: ['a', 'a'] } }, 400, /^Invalid input for field 'remote_ids'/);
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { authorization_ttl: -1 } }, 400, "Invalid input for field 'authorization_ttl': -1 is less than the minimum of 0");
  await expect('PUT', `${FED}/identity_providers/idp2`, { identity_provider: 'x' }, 400, "'x' is not of type 'object'");
  await expect('PATCH', `${FED}/identity_providers/idp1`, { identity_provider: { domain_id: 'default' } }, 400, "Additional properties are not allowed ('domain_id' was unexpected)");
  await expect('PATCH', `${FED}/identity_providers/idp1`, { identity_provider: {} }, 400, '{} does not have enough properties');
  await expect('PATCH', `${FED}/identity_providers/idp1`, { x: 1 }, 400, '{} does not have enough properties');
  await expect('PATCH', `${FED}/identity_providers/nope`, { identity_provider: { enabled: true } }, 404, 'Could not find Identity Provider: nope.');
  t.equal((await call('DELETE', `${FED}/identity_providers/nope`)).statusCode, 404);
  t.equal((await call('GET', `${FED}/identity_providers`)).json().identity_providers.length, 1, 'nothing was created');
});

t.test('mappings and protocols: Keystone bodies (the protocol links as Keystone 22 builds them)', async (t) => {
  const { call } = await startTestApp(t);
  await call('PUT', `${FED}/identity_providers/idp1`, { identity_provider: { domain_id: 'default' } });
  const created = await call('PUT', `${FED}/mappings/m1`, { mapping: { rules: RULES } });
  t.equal(created.statusCode, 201);
  t.same(created.json(), { mapping: { id: 'm1', rules: RULES, links: { self: `${PUBLIC_URL}${FED}/mappings/m1` } } });
  const versioned = await call('PUT', `${FED}/mappings/m2`, { mapping: { schema_version: '2.0', rules: RULES } });
  t.same(versioned.json().mapping, { id: 'm2', rules: RULES, links: { self: `${PUBLIC_URL}${FED}/mappings/m2` } }, 'schema_version is neither kept nor shown (Keystone 22)');
  t.same((await call('GET', `${FED}/mappings`)).json().mappings.map((each: { id: string }) => each.id), ['m1', 'm2']);
  const conflict = await call('PUT', `${FED}/mappings/m1`, { mapping: { rules: RULES } });
  t.equal(conflict.statusCode, 409);
  t.equal(conflict.json().error.message, 'Conflict occurred attempting to store mapping - Duplicate entry.');
  for (const [body, message] of [
    [{}, "'rules' is a required property\n"],
    [{ mapping: { rules: [] } }, '[] is too short\n'],
    [{ mapping: 'x' }, "'x' is not of type 'object'\n"],
    [{ mapping: { rules: [{ local: [], remote: [{ type: 'a', any_one_of: 'x' }] }] } }, "{'type': 'a', 'any_one_of': 'x'} is not valid under any of the given schemas\n"],
  ] as const) {
    const answer = await call('PUT', `${FED}/mappings/m3`, body);
    t.equal(answer.statusCode, 400);
    t.equal(answer.json().error.message, message);
  }
  const patched = await call('PATCH', `${FED}/mappings/m1`, { mapping: { rules: [{ local: [], remote: [{ type: 'a' }] }], id: 'zz' } });
  t.same(patched.json().mapping.rules, [{ local: [], remote: [{ type: 'a' }] }]);
  t.equal(patched.json().mapping.id, 'm1');
  t.equal((await call('PATCH', `${FED}/mappings/m1`, { mapping: {} })).json().error.message, "'rules' is a required property\n");
  t.equal((await call('PATCH', `${FED}/mappings/nope`, { mapping: { rules: RULES } })).statusCode, 404);

  const protocols = `${FED}/identity_providers/idp1/protocols`;
  const protocol = await call('PUT', `${protocols}/openid`, { protocol: { mapping_id: 'm1', remote_id_attribute: 'HTTP_OIDC_ISS' } });
  t.equal(protocol.statusCode, 201);
  const links = { self: `${PUBLIC_URL}/v3/protocols/openid`, identity_provider: `${PUBLIC_URL}/v3/idp1` };
  t.same(protocol.json(), { protocol: { id: 'openid', mapping_id: 'm1', links } });
  t.same((await call('GET', `${protocols}/openid`)).json(), { protocol: { id: 'openid', mapping_id: 'm1', links } });
  await call('PUT', `${protocols}/saml2`, { protocol: { mapping_id: 'm2' } });
  const listed = (await call('GET', protocols)).json();
  t.same(listed.protocols, [
    { id: 'openid', idp_id: 'idp1', mapping_id: 'm1', remote_id_attribute: 'HTTP_OIDC_ISS', links },
    { id: 'saml2', idp_id: 'idp1', mapping_id: 'm2', remote_id_attribute: null, links: { ...links, self: `${PUBLIC_URL}/v3/protocols/saml2` } },
  ]);
  t.same(listed.links, { self: `${PUBLIC_URL}${protocols}`, previous: null, next: null });
  for (const [method, url, body, status, message] of [
    ['PUT', `${protocols}/openid`, { protocol: { mapping_id: 'm1' } }, 409, 'Conflict occurred attempting to store federation_protocol - Duplicate entry found with ID openid.'],
    ['PUT', `${protocols}/x`, { protocol: { mapping_id: 'nope' } }, 400, 'Invalid mapping id: nope'],
    ['PUT', `${FED}/identity_providers/nope/protocols/x`, { protocol: { mapping_id: 'm1' } }, 404, 'Could not find Identity Provider: nope.'],
    ['PUT', `${protocols}/x`, {}, 400, "'mapping_id' is a required property"],
    ['PUT', `${protocols}/x`, { protocol: { mapping_id: 'm1', x: 1 } }, 400, "Additional properties are not allowed ('x' was unexpected)"],
    ['PATCH', `${protocols}/openid`, { protocol: { mapping_id: 'nope' } }, 400, 'Invalid mapping id: nope'],
    ['PATCH', `${protocols}/nope`, { protocol: { mapping_id: 'm1' } }, 404, 'Could not find federated protocol nope for Identity Provider: idp1.'],
    ['PATCH', `${protocols}/openid`, { protocol: {} }, 400, '{} does not have enough properties'],
  ] as const) {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, status, `${method} ${url}`);
    t.equal(answer.json().error.message, message);
  }
  t.same((await call('PATCH', `${protocols}/openid`, { protocol: { mapping_id: 'm2' } })).json(), { protocol: { id: 'openid', mapping_id: 'm2', links } });
  t.equal((await call('PATCH', `${protocols}/openid`, { protocol: { remote_id_attribute: 'X' } })).statusCode, 200, 'Keystone 22 answers 500 here');
  t.same((await call('GET', `${FED}/identity_providers/nope/protocols`)).json().protocols, []);

  t.equal((await call('DELETE', `${protocols}/saml2`)).statusCode, 204);
  t.equal((await call('DELETE', `${protocols}/saml2`)).statusCode, 404);
  t.equal((await call('DELETE', `${FED}/identity_providers/idp1`)).statusCode, 204);
  t.same((await call('GET', protocols)).json().protocols, [], 'its protocols went with it');
  t.equal((await call('DELETE', `${FED}/mappings/m2`)).statusCode, 204);
  t.equal((await call('DELETE', `${FED}/mappings/m2`)).json().error.message, 'Could not find mapping: m2.');
});

t.test('service providers', async (t) => {
  const { call } = await startTestApp(t);
  const created = await call('PUT', `${FED}/service_providers/sp1`, { service_provider: { auth_url: 'http://sp/auth', sp_url: 'http://sp/ecp' } });
  t.equal(created.statusCode, 201);
  const sp = { auth_url: 'http://sp/auth', id: 'sp1', enabled: false, description: null, relay_state_prefix: 'ss:mem:', sp_url: 'http://sp/ecp', links: { self: `${PUBLIC_URL}${FED}/service_providers/sp1` } };
  t.same(created.json().service_provider, sp);
  await call('PUT', `${FED}/service_providers/sp2`, { service_provider: { auth_url: 'http://a', sp_url: 'http://b', enabled: true, description: 'x', relay_state_prefix: 'pre' } });
  t.same((await call('GET', `${FED}/service_providers?enabled=true`)).json().service_providers.map((each: { id: string }) => each.id), ['sp2']);
  t.same((await call('GET', `${FED}/service_providers?id=sp1`)).json().service_providers, [sp]);
  t.same((await call('GET', `${FED}/service_providers/sp1`)).json().service_provider, sp);
  t.same((await call('PATCH', `${FED}/service_providers/sp1`, { service_provider: { enabled: true, relay_state_prefix: 'zz' } })).json().service_provider, { ...sp, enabled: true, relay_state_prefix: 'zz' });
  for (const [method, url, body, status, message] of [
    ['PUT', `${FED}/service_providers/sp1`, { service_provider: { auth_url: 'http://a', sp_url: 'http://b' } }, 409, 'Conflict occurred attempting to store service_provider - Duplicate entry found with ID sp1.'],
    ['PUT', `${FED}/service_providers/sp3`, {}, 400, /^'auth_url' is a required property/],
    ['PUT', `${FED}/service_providers/sp3`, { service_provider: { auth_url: 'nourl', sp_url: 'http://b' } }, 400, /^Invalid input for field 'auth_url'/],
    ['PUT', `${FED}/service_providers/sp3`, { service_provider: { auth_url: 'http://a', sp_url: 'http://b', relay_state_prefix: null } }, 400, /^Invalid input for field 'relay_state_prefix'/],
    ['PATCH', `${FED}/service_providers/sp1`, { service_provider: {} }, 400, '{} does not have enough properties'],
    ['PATCH', `${FED}/service_providers/sp1`, { service_provider: { id: 'x' } }, 400, "Additional properties are not allowed ('id' was unexpected)"],
    ['PATCH', `${FED}/service_providers/nope`, { service_provider: { enabled: true } }, 404, 'Could not find Service Provider: nope.'],
  ] as const) {
    const answer = await call(method, url, body);
    t.equal(answer.statusCode, status, `${method} ${url} ${JSON.stringify(body)}`);
    t.match(answer.json().error.message, message);
  }
  t.equal((await call('DELETE', `${FED}/service_providers/sp2`)).statusCode, 204);
  t.equal((await call('DELETE', `${FED}/service_providers/sp2`)).json().error.message, 'Could not find Service Provider: sp2.');
});

t.test('/v3/OS-FEDERATION/projects and /domains answer as /v3/auth/projects and /domains', async (t) => {
  const { call } = await startTestApp(t);
  const projects = await call('GET', `${FED}/projects`);
  t.equal(projects.statusCode, 200);
  const auth = (await call('GET', '/v3/auth/projects')).json();
  t.same(projects.json().projects, auth.projects);
  t.ok(auth.projects.length >= 1, "the admin's project");
  t.equal(projects.json().links.self, `${PUBLIC_URL}${FED}/projects`);
  const domains = await call('GET', `${FED}/domains`);
  t.same(domains.json(), { domains: (await call('GET', '/v3/auth/domains')).json().domains, links: { self: `${PUBLIC_URL}${FED}/domains`, previous: null, next: null } });
  t.equal((await call('GET', '/v3/auth/OS-FEDERATION/projects')).statusCode, 404, 'not a route in Keystone 22 either');
  t.equal((await call('GET', `${FED}/projects`, undefined, null)).statusCode, 401);
});

t.test('a non-admin is refused; creating a provider announces the domain made for it', async (t) => {
  const { call, app } = await startTestApp(t);
  await call('POST', '/v3/users', { user: { name: 'fed-member', password: 'Secret-1', default_project_id: undefined } });
  const project = (await call('GET', '/v3/auth/projects')).json().projects[0].id;
  const roles = Object.fromEntries((await call('GET', '/v3/roles')).json().roles.map((r: { name: string; id: string }) => [r.name, r.id]));
  const user = (await call('GET', '/v3/users?name=fed-member')).json().users[0].id;
  await call('PUT', `/v3/projects/${project}/users/${user}/roles/${roles.member}`);
  const login = await app.server.inject({
    method: 'POST',
    url: '/v3/auth/tokens',
    payload: { auth: { identity: { methods: ['password'], password: { user: { id: user, password: 'Secret-1' } } }, scope: { project: { id: project } } } },
  });
  const member = login.headers['x-subject-token'] as string;
  const refused = await call('PUT', `${FED}/identity_providers/x`, { identity_provider: {} }, member);
  t.equal(refused.statusCode, 403);
  t.equal((await call('GET', `${FED}/mappings`, undefined, member)).statusCode, 403);
  t.equal((await call('GET', `${FED}/projects`, undefined, member)).statusCode, 200);

  const events: Array<{ type: string; id: string }> = [];
  const resource = app.audit.resource.bind(app.audit);
  app.audit.resource = (operation, type, id, initiator, actor) => {
    events.push({ type: `${type}.${operation}`, id });
    resource(operation, type, id, initiator, actor);
  };
  const idp = (await call('PUT', `${FED}/identity_providers/idp`, { identity_provider: {} })).json().identity_provider;
  await call('PUT', `${FED}/identity_providers/idp2`, { identity_provider: { domain_id: 'default' } });
  await call('PUT', `${FED}/mappings/m`, { mapping: { rules: RULES } });
  t.same(events, [{ type: 'domain.created', id: idp.domain_id }], 'only the domain: Keystone 22 audits no federation resource');
});

t.test('token bodies list the enabled service providers (K2K), as Keystone renders them', async (t) => {
  const { call, adminToken, login } = await startTestApp(t);
  const FED = '/v3/OS-FEDERATION';
  const body = async (token: string) => (await call('GET', '/v3/auth/tokens', undefined, undefined, { 'x-subject-token': token })).json().token;
  t.notOk('service_providers' in (await body(adminToken)), 'none registered: no key');
  const sp = (id: string, enabled: boolean) =>
    call('PUT', `${FED}/service_providers/${id}`, { service_provider: { auth_url: `https://${id}.example/v3/OS-FEDERATION/identity_providers/us/protocols/saml2/auth`, sp_url: `https://${id}.example/Shibboleth.sso/SAML2/ECP`, enabled } });
  t.equal((await sp('sp-on', true)).statusCode, 201);
  t.equal((await sp('sp-off', false)).statusCode, 201);
  const expected = [{ id: 'sp-on', auth_url: 'https://sp-on.example/v3/OS-FEDERATION/identity_providers/us/protocols/saml2/auth', sp_url: 'https://sp-on.example/Shibboleth.sso/SAML2/ECP' }];
  t.same((await body(adminToken)).service_providers, expected, 'a validation (cached before) lists the enabled one');
  const issued = await login({ name: 'admin', domain: { id: 'default' } }, ADMIN_PASSWORD, 'unscoped');
  t.same(issued.body.token.service_providers, expected, 'an unscoped token too');
  t.equal((await call('PATCH', `${FED}/service_providers/sp-off`, { service_provider: { enabled: true } })).statusCode, 200);
  t.same(((await body(adminToken)).service_providers as { id: string }[]).map((each) => each.id).sort(), ['sp-off', 'sp-on']);
  t.equal((await call('DELETE', `${FED}/service_providers/sp-on`)).statusCode, 204);
  t.equal((await call('DELETE', `${FED}/service_providers/sp-off`)).statusCode, 204);
  t.notOk('service_providers' in (await body(adminToken)), 'all gone: no key again');
});
