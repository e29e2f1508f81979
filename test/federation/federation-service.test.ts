import t from 'tap';
import { ConflictError, NotFoundError, ValidationError } from '../../src/support/errors.ts';
import { ProjectEntity } from '../../src/store/entities.ts';
import {
  FederatedUserEntity,
  FederationProtocolEntity,
  IdentityProviderEntity,
  IdpRemoteIdEntity,
} from '../../src/store/federation-entities.ts';
import { DEFAULT_RELAY_STATE_PREFIX, identityProviderDomainDescription } from '../../src/federation/federation-service.ts';
import { startTestApp } from '../helpers/app.ts';

const RULES = [{ local: [{ user: { name: '{0}' } }], remote: [{ type: 'REMOTE_USER' }] }];

t.test('identity providers: a domain of their own unless one is named; remote ids unique across providers', async (t) => {
  const { app } = await startTestApp(t);
  const federation = app.federation;
  const domainsBefore = await app.store.reader().count(ProjectEntity, { isDomain: true });

  const created = await federation.createIdentityProvider('idp-a', { remoteIds: ['http://z', 'http://a'], description: 'first' });
  const domainId = created.createdDomainId!;
  t.match(domainId, /^[0-9a-f]{32}$/);
  t.same(created.identityProvider, { id: 'idp-a', domainId, enabled: false, description: 'first', authorizationTtl: null, remoteIds: ['http://z', 'http://a'] }, 'remote ids as sent');
  const domain = await app.store.reader().findOneOrFail(ProjectEntity, { id: domainId });
  t.match(domain, { name: domainId, description: identityProviderDomainDescription('idp-a'), enabled: true, isDomain: true }, "Keystone's domain for the provider");
  t.equal(identityProviderDomainDescription('idp-a'), 'Auto generated federated domain for Identity Provider: idp-a');
  t.same((await federation.getIdentityProvider('idp-a')).remoteIds, ['http://a', 'http://z'], 'read back sorted');

  const named = await federation.createIdentityProvider('idp-b', { domainId: 'default', enabled: true, authorizationTtl: 0 });
  t.equal(named.createdDomainId, undefined);
  t.same(named.identityProvider, { id: 'idp-b', domainId: 'default', enabled: true, description: null, authorizationTtl: 0, remoteIds: [] });

  // Errors, in Keystone's order: the domain (404), the id (409), a remote id (409); nothing left behind.
  await t.rejects(federation.createIdentityProvider('idp-c', { domainId: 'nowhere' }), new NotFoundError('Could not find domain: nowhere.'));
  await t.rejects(federation.createIdentityProvider('idp-a', { domainId: 'nowhere' }), NotFoundError);
  await t.rejects(
    federation.createIdentityProvider('idp-a', {}),
    new ConflictError('identity_provider', 'Duplicate entry: idp-a'),
  );
  await t.rejects(
    federation.createIdentityProvider('idp-c', { remoteIds: ['http://new', 'http://z'] }),
    { message: 'Conflict occurred attempting to store identity_provider - Duplicate remote ID: http://z.' },
  );
  t.equal(await app.store.reader().count(ProjectEntity, { isDomain: true }), domainsBefore + 1, 'a refused provider leaves no domain');
  t.equal(await app.store.reader().count(IdentityProviderEntity, {}), 2);

  // Updates: fields, remote ids replaced (its own may be given again), another's refused.
  const updated = await federation.updateIdentityProvider('idp-a', { enabled: true, description: null, remoteIds: ['http://z', 'http://b'], authorizationTtl: 5 });
  t.same(updated, { id: 'idp-a', domainId, enabled: true, description: null, authorizationTtl: 5, remoteIds: ['http://z', 'http://b'] });
  await t.rejects(federation.updateIdentityProvider('idp-b', { remoteIds: ['http://b'] }), { message: /Duplicate remote ID: http:\/\/b\.$/ });
  t.same((await federation.getIdentityProvider('idp-b')).remoteIds, [], 'a refused update changes nothing');
  t.same((await federation.updateIdentityProvider('idp-a', { remoteIds: null })).remoteIds, []);
  t.equal(await app.store.reader().count(IdpRemoteIdEntity, {}), 0);
  await t.rejects(federation.updateIdentityProvider('nope', { enabled: true }), new NotFoundError('Could not find Identity Provider: nope.'));

  // Lists: filters on id (exact and inexact) and enabled, ordered by id.
  t.same((await federation.listIdentityProviders()).map((idp) => idp.id), ['idp-a', 'idp-b']);
  t.same((await federation.listIdentityProviders({ id: [{ operator: 'equals', value: 'idp-b' }] })).map((idp) => idp.id), ['idp-b']);
  t.same((await federation.listIdentityProviders({ id: [{ operator: 'endswith', value: '-a' }] })).map((idp) => idp.id), ['idp-a']);
  await federation.updateIdentityProvider('idp-b', { enabled: false });
  t.same((await federation.listIdentityProviders({ enabled: false })).map((idp) => idp.id), ['idp-b']);
});

t.test('mappings: rules checked with Keystone texts; conflicts; a mapping in use may be deleted', async (t) => {
  const { app } = await startTestApp(t);
  const federation = app.federation;
  const mapping = await federation.createMapping('m1', RULES);
  t.same(mapping, { id: 'm1', rules: RULES });
  await t.rejects(federation.createMapping('m1', RULES), { message: 'Conflict occurred attempting to store mapping - Duplicate entry.' });
  await t.rejects(federation.createMapping('m2', []), new ValidationError('[] is too short\n'));
  await t.rejects(federation.createMapping('m2', undefined), new ValidationError("'rules' is a required property\n"));
  await t.rejects(federation.getMapping('m2'), new NotFoundError('Could not find mapping: m2.'));

  const replaced = [{ local: [{ group: { id: 'g1' } }], remote: [{ type: 'HTTP_OIDC_GROUPS', any_one_of: ['admins'], regex: false }] }];
  t.same(await federation.updateMapping('m1', replaced), { id: 'm1', rules: replaced });
  await t.rejects(federation.updateMapping('m1', [{ local: [] }]), new ValidationError("'remote' is a required property\n"));
  t.same((await federation.getMapping('m1')).rules, replaced, 'a refused update changes nothing');
  await t.rejects(federation.updateMapping('nope', RULES), NotFoundError);

  await federation.createIdentityProvider('idp', { domainId: 'default' });
  await federation.createProtocol('idp', 'openid', { mappingId: 'm1' });
  await federation.deleteMapping('m1');
  t.same(await federation.listMappings(), []);
  t.equal((await federation.getProtocol('idp', 'openid')).mappingId, 'm1', 'its protocol still names it, as in Keystone');
  await t.rejects(federation.deleteMapping('m1'), NotFoundError);
});

t.test('protocols: the mapping must exist (400) before the provider (404); deleting the provider takes them', async (t) => {
  const { app } = await startTestApp(t);
  const federation = app.federation;
  await federation.createMapping('m1', RULES);
  await federation.createMapping('m2', RULES);
  await federation.createIdentityProvider('idp', { domainId: 'default' });

  const protocol = await federation.createProtocol('idp', 'openid', { mappingId: 'm1', remoteIdAttribute: 'HTTP_OIDC_ISS' });
  t.same(protocol, { id: 'openid', idpId: 'idp', mappingId: 'm1', remoteIdAttribute: 'HTTP_OIDC_ISS' });
  await t.rejects(federation.createProtocol('nope', 'saml2', { mappingId: 'nope' }), new ValidationError('Invalid mapping id: nope'));
  await t.rejects(federation.createProtocol('nope', 'saml2', { mappingId: 'm1' }), new NotFoundError('Could not find Identity Provider: nope.'));
  await t.rejects(federation.createProtocol('idp', 'openid', { mappingId: 'm1' }), {
    message: 'Conflict occurred attempting to store federation_protocol - Duplicate entry found with ID openid.',
  });
  await federation.createProtocol('idp', 'saml2', { mappingId: 'm2' });
  t.same((await federation.listProtocols('idp')).map((p) => p.id), ['openid', 'saml2']);
  t.same(await federation.listProtocols('nope'), [], 'an unknown provider has none');

  t.same(await federation.updateProtocol('idp', 'openid', { mappingId: 'm2' }), { ...protocol, mappingId: 'm2' });
  t.same(await federation.updateProtocol('idp', 'openid', { remoteIdAttribute: 'X' }), { ...protocol, mappingId: 'm2', remoteIdAttribute: 'X' });
  await t.rejects(federation.updateProtocol('idp', 'nope', { mappingId: 'nope' }), ValidationError, 'the mapping first');
  await t.rejects(federation.updateProtocol('idp', 'nope', { mappingId: 'm1' }), new NotFoundError('Could not find federated protocol nope for Identity Provider: idp.'));

  // A federated user of the protocol (shadowed by a later step): the protocol's deletion takes it.
  const user = (await app.identity.createUser({ name: 'fed-user', domainId: 'default' })).id;
  const em = app.store.reader();
  await em.insert(FederatedUserEntity, { userId: user, idpId: 'idp', protocolId: 'saml2', uniqueId: 'alice', displayName: 'alice' });
  await federation.deleteProtocol('idp', 'saml2');
  t.equal(await app.store.reader().count(FederatedUserEntity, {}), 0, "the protocol's federated users go with it");
  await t.rejects(federation.deleteProtocol('idp', 'saml2'), NotFoundError);

  await em.insert(FederatedUserEntity, { userId: user, idpId: 'idp', protocolId: 'openid', uniqueId: 'alice', displayName: 'alice' });
  await federation.updateIdentityProvider('idp', { remoteIds: ['http://issuer'] });
  await federation.deleteIdentityProvider('idp');
  const reader = app.store.reader();
  t.equal(await reader.count(FederationProtocolEntity, {}), 0, 'its protocols');
  t.equal(await reader.count(IdpRemoteIdEntity, {}), 0, 'its remote ids');
  t.equal(await reader.count(FederatedUserEntity, {}), 0, 'its federated users');
  await t.rejects(federation.getIdentityProvider('idp'), NotFoundError);
  await t.rejects(federation.deleteIdentityProvider('idp'), new NotFoundError('Could not find Identity Provider: idp.'));
  t.ok(await app.identity.getUser(user), 'the local user stays');
});

t.test("deleting an identity provider's domain deletes the provider", async (t) => {
  const { app } = await startTestApp(t);
  const federation = app.federation;
  await federation.createMapping('m1', RULES);
  const { createdDomainId } = await federation.createIdentityProvider('idp', { remoteIds: ['http://x'] });
  await federation.createProtocol('idp', 'openid', { mappingId: 'm1' });
  await app.resources.updateDomain(createdDomainId!, { enabled: false });
  await app.resources.deleteDomain(createdDomainId!);
  await t.rejects(federation.getIdentityProvider('idp'), NotFoundError);
  t.equal(await app.store.reader().count(FederationProtocolEntity, {}), 0);
  t.same((await federation.createIdentityProvider('idp2', { remoteIds: ['http://x'] })).identityProvider.remoteIds, ['http://x'], 'its remote ids are free again');
});

t.test('service providers: defaults, conflicts, filters, updates', async (t) => {
  const { app } = await startTestApp(t);
  const federation = app.federation;
  const sp = await federation.createServiceProvider('sp1', { authUrl: 'http://sp/auth', spUrl: 'http://sp/ecp' });
  t.same(sp, { id: 'sp1', enabled: false, description: null, authUrl: 'http://sp/auth', spUrl: 'http://sp/ecp', relayStatePrefix: DEFAULT_RELAY_STATE_PREFIX });
  t.equal(DEFAULT_RELAY_STATE_PREFIX, 'ss:mem:');
  await t.rejects(federation.createServiceProvider('sp1', { authUrl: 'a:b', spUrl: 'a:b' }), {
    message: 'Conflict occurred attempting to store service_provider - Duplicate entry found with ID sp1.',
  });
  await federation.createServiceProvider('sp2', { authUrl: 'a:b', spUrl: 'a:c', enabled: true, description: 'x', relayStatePrefix: 'pre' });
  t.same((await federation.listServiceProviders({ enabled: true })).map((each) => each.id), ['sp2']);
  t.same((await federation.listServiceProviders({ id: [{ operator: 'equals', value: 'sp1' }] })).map((each) => each.id), ['sp1']);
  t.same(await federation.updateServiceProvider('sp1', { enabled: true, relayStatePrefix: 'zz', description: 'd' }), { ...sp, enabled: true, relayStatePrefix: 'zz', description: 'd' });
  await t.rejects(federation.updateServiceProvider('nope', { enabled: true }), new NotFoundError('Could not find Service Provider: nope.'));
  await federation.deleteServiceProvider('sp2');
  await t.rejects(federation.deleteServiceProvider('sp2'), NotFoundError);
  t.same((await federation.listServiceProviders()).map((each) => each.id), ['sp1']);
});
