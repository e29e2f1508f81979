import t from 'tap';
import { FederatedUserEntity } from '../../src/store/federation-entities.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { aliceAssertion, FixedAssertionVerifier } from '../helpers/federation.ts';

// A user's `federated` attribute as Keystone 22's users API has it: shown by GET /v3/users/{id}
// (never in lists), set by POST and PATCH (a non-empty list replaces the user's; checked first,
// 400 with Keystone's texts), and the idp_id, protocol_id, unique_id filters of GET /v3/users.
// Compared with the real Keystone in test/e2e/users-federated-keystone.test.ts.

const FED = '/v3/OS-FEDERATION';
const ISSUER = 'http://127.0.0.1:19000';

async function world(t: Parameters<typeof startTestApp>[0]) {
  const verifier = new FixedAssertionVerifier(aliceAssertion(ISSUER));
  const app = await startTestApp(t, {}, { assertionVerifiers: [verifier] });
  const created = async (method: 'POST' | 'PUT', url: string, body: unknown) => {
    const response = await app.call(method, url, body);
    if (response.statusCode !== 201) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const domainId = (await created('POST', '/v3/domains', { domain: { name: 'fed' } })).domain.id as string;
  await created('PUT', `${FED}/identity_providers/idp`, { identity_provider: { remote_ids: [ISSUER], enabled: true, domain_id: domainId } });
  await created('PUT', `${FED}/identity_providers/other`, { identity_provider: { enabled: true, domain_id: domainId } });
  await created('PUT', `${FED}/mappings/m`, { mapping: { rules: [{ local: [{ user: { id: '{0}', name: '{1}' } }], remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_PREFERRED_USERNAME' }] }] } });
  for (const [idp, protocol] of [['idp', 'openid'], ['idp', 'saml2'], ['other', 'openid']]) {
    await created('PUT', `${FED}/identity_providers/${idp}/protocols/${protocol}`, { protocol: { mapping_id: 'm' } });
  }
  return { app, domainId, created };
}

const names = (response: { json(): any }) => (response.json().users as { name: string }[]).map((user) => user.name).sort();

t.test('a shadow user shows its federated identity; lists never show it', async (t) => {
  const { app, domainId } = await world(t);
  const login = await app.request({ method: 'POST', url: `${FED}/identity_providers/idp/protocols/openid/auth` });
  t.equal(login.statusCode, 201);
  const userId = login.json().token.user.id as string;
  const user = (await app.call('GET', `/v3/users/${userId}`)).json().user;
  t.strictSame(user.federated, [{ idp_id: 'idp', protocols: [{ protocol_id: 'openid', unique_id: 'alice' }] }]);
  const listed = (await app.call('GET', `/v3/users?domain_id=${domainId}`)).json().users;
  t.equal(listed.length, 1);
  t.notOk('federated' in listed[0]);
  t.notOk('federated' in (await app.call('GET', '/v3/users/' + (await app.call('GET', '/v3/users?name=admin')).json().users[0].id)).json().user, 'a user without any: no key');
});

t.test('POST and PATCH take federated as Keystone 22 does', async (t) => {
  const { app, domainId } = await world(t);
  const federated = [
    { idp_id: 'idp', protocols: [{ protocol_id: 'openid', unique_id: 'carol-oidc' }, { protocol_id: 'saml2', unique_id: 'carol-saml' }] },
    { idp_id: 'other', protocols: [{ protocol_id: 'openid', unique_id: 'carol-other' }] },
  ];
  const create = await app.call('POST', '/v3/users', { user: { name: 'carol', domain_id: domainId, federated } });
  t.equal(create.statusCode, 201, create.body);
  const carol = create.json().user;
  t.strictSame(carol.federated, federated);
  t.strictSame((await app.call('GET', `/v3/users/${carol.id}`)).json().user.federated, federated);
  const rows = await app.app.store.reader().find(FederatedUserEntity, { userId: carol.id }, { orderBy: { id: 'asc' } });
  t.strictSame(rows.map((row) => [row.idpId, row.protocolId, row.uniqueId, row.displayName]), [
    ['idp', 'openid', 'carol-oidc', 'carol'],
    ['idp', 'saml2', 'carol-saml', 'carol'],
    ['other', 'openid', 'carol-other', 'carol'],
  ]);

  // A login as carol-oidc at idp/openid is carol (Keystone's federated_user lookup).
  const login = await app.request({ method: 'POST', url: `${FED}/identity_providers/idp/protocols/openid/auth` });
  t.equal(login.statusCode, 201);

  // An empty list: no federated identity, no key.
  const plain = await app.call('POST', '/v3/users', { user: { name: 'dave', domain_id: domainId, federated: [] } });
  t.equal(plain.statusCode, 201);
  t.notOk('federated' in plain.json().user);

  // Refusals, before anything is written.
  const refused = async (body: unknown, status: number, message?: string) => {
    const response = await app.call('POST', '/v3/users', { user: { name: 'erin', domain_id: domainId, ...(body as object) } });
    t.equal(response.statusCode, status, JSON.stringify(body));
    if (message) t.equal(response.json().error.message, message);
  };
  await refused({ federated: [{ idp_id: 'nope', protocols: [{ protocol_id: 'openid', unique_id: 'e' }] }] }, 400, 'Could not find Identity Provider: nope');
  await refused({ federated: [{ idp_id: 'idp', protocols: [{ protocol_id: 'nope', unique_id: 'e' }] }] }, 400, 'Could not find federated protocol nope for Identity Provider: idp.');
  await refused({ federated: [{ idp_id: 'idp' }] }, 400);
  await refused({ federated: [{ idp_id: 'idp', protocols: [] }] }, 400);
  await refused({ federated: [{ idp_id: 'idp', protocols: [{ protocol_id: 'openid' }] }] }, 400);
  await refused({ federated: 'x' }, 400);
  t.equal((await app.call('GET', `/v3/users?name=erin`)).json().users.length, 0, 'no user was created');
  // Another user's (idp, protocol, unique id): 409, and the user is not left half made... as Keystone, the user exists.
  const taken = await app.call('POST', '/v3/users', { user: { name: 'fay', domain_id: domainId, federated: [{ idp_id: 'idp', protocols: [{ protocol_id: 'saml2', unique_id: 'carol-saml' }] }] } });
  t.equal(taken.statusCode, 409);

  // PATCH: a list replaces; an empty one or none keeps; a bad one changes nothing.
  const replaced = [{ idp_id: 'idp', protocols: [{ protocol_id: 'saml2', unique_id: 'carol-new' }] }];
  const patch = await app.call('PATCH', `/v3/users/${carol.id}`, { user: { federated: replaced } });
  t.equal(patch.statusCode, 200, patch.body);
  t.strictSame(patch.json().user.federated, replaced);
  t.strictSame(patch.json().user.extra, {}, 'federated is no extra attribute');
  t.strictSame((await app.call('GET', `/v3/users/${carol.id}`)).json().user.federated, replaced);
  const kept = await app.call('PATCH', `/v3/users/${carol.id}`, { user: { federated: [] } });
  t.strictSame(kept.json().user.federated, replaced);
  const renamed = await app.call('PATCH', `/v3/users/${carol.id}`, { user: { description: 'x' } });
  t.strictSame(renamed.json().user.federated, replaced);
  const bad = await app.call('PATCH', `/v3/users/${carol.id}`, { user: { description: 'y', federated: [{ idp_id: 'nope', protocols: [{ protocol_id: 'openid', unique_id: 'z' }] }] } });
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error.message, 'Could not find Identity Provider: nope');
  const after = (await app.call('GET', `/v3/users/${carol.id}`)).json().user;
  t.strictSame(after.federated, replaced);
  t.equal(after.description, 'x', 'nothing written');
});

t.test('GET /v3/users filters on idp_id, protocol_id and unique_id', async (t) => {
  const { app, domainId } = await world(t);
  const make = (name: string, federated: unknown) => app.call('POST', '/v3/users', { user: { name, domain_id: domainId, federated } });
  t.equal((await make('carol', [{ idp_id: 'idp', protocols: [{ protocol_id: 'openid', unique_id: 'c1' }, { protocol_id: 'saml2', unique_id: 'c2' }] }])).statusCode, 201);
  t.equal((await make('erin', [{ idp_id: 'idp', protocols: [{ protocol_id: 'openid', unique_id: 'bob' }] }])).statusCode, 201);
  t.equal((await make('gus', [{ idp_id: 'other', protocols: [{ protocol_id: 'openid', unique_id: 'bob' }] }])).statusCode, 201);
  t.equal((await app.call('POST', '/v3/users', { user: { name: 'local', domain_id: domainId } })).statusCode, 201);
  t.strictSame(names(await app.call('GET', '/v3/users?idp_id=idp')), ['carol', 'erin']);
  t.strictSame(names(await app.call('GET', '/v3/users?idp_id=idp&protocol_id=saml2')), ['carol']);
  t.strictSame(names(await app.call('GET', '/v3/users?protocol_id=openid')), ['carol', 'erin', 'gus']);
  t.strictSame(names(await app.call('GET', '/v3/users?unique_id=bob')), ['erin', 'gus']);
  t.strictSame(names(await app.call('GET', '/v3/users?unique_id=bob&idp_id=other')), ['gus']);
  t.strictSame(names(await app.call('GET', '/v3/users?idp_id=nope')), []);
  t.strictSame(names(await app.call('GET', '/v3/users?idp_id=idp&enabled=false')), [], 'the other filters still apply');
  t.strictSame(names(await app.call('GET', '/v3/users?idp_id=idp&name=erin')), ['erin']);
  t.strictSame(names(await app.call('GET', `/v3/users?domain_id=${domainId}`)), ['carol', 'erin', 'gus', 'local'], 'without them, every user');
  const listed = (await app.call('GET', '/v3/users?idp_id=idp')).json().users;
  t.notOk(listed.some((user: object) => 'federated' in user), 'the filtered list does not show them either');
  // A domain-scoped caller still sees only its domain's users.
  const other = (await app.call('POST', '/v3/domains', { domain: { name: 'elsewhere' } })).json().domain.id as string;
  t.equal((await app.call('POST', '/v3/users', { user: { name: 'far', domain_id: other, federated: [{ idp_id: 'idp', protocols: [{ protocol_id: 'openid', unique_id: 'far' }] }] } })).statusCode, 201);
  t.strictSame(names(await app.call('GET', `/v3/users?idp_id=idp&domain_id=${domainId}`)), ['carol', 'erin']);
});
