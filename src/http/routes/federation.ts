import type { FastifyRequest } from 'fastify';
import type { IdentityProvider, Mapping, Protocol, ServiceProvider } from '../../federation/federation-service.ts';
import { validateMapping } from '../../federation/mapping-rules-schema.ts';
import { ValidationError } from '../../support/errors.ts';
import { auditInitiator } from '../audit.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { baseUrl, collectionLinks } from '../links.ts';
import { booleanFilter, matchParameters, querySchema, stringMatches } from '../query.ts';
import {
  IdentityProviderCreate,
  IdentityProviderEntity,
  IdentityProviderUpdate,
  MappingBody,
  MappingEntity,
  ProtocolCreate,
  ProtocolEntity,
  ProtocolUpdate,
  ServiceProviderCreate,
  ServiceProviderEntity,
  ServiceProviderUpdate,
  many,
  one,
  params,
} from '../schemas.ts';

const OS_FEDERATION = '/v3/OS-FEDERATION';
const IdpParams = params('idp_id');
const ProtocolParams = params('idp_id', 'protocol_id');
const MappingParams = params('mapping_id');
const SpParams = params('sp_id');
// Keystone's filters on both provider lists: id (and its inexact forms) and enabled.
const ProviderListQuery = querySchema(...matchParameters('id'), 'enabled');

const NOT_ENOUGH_PROPERTIES = '{} does not have enough properties';

function federationLink(request: FastifyRequest, collection: string, id: string): string {
  return `${baseUrl(request)}${OS_FEDERATION}/${collection}/${encodeURIComponent(id)}`;
}

function renderIdentityProvider(request: FastifyRequest, idp: IdentityProvider) {
  const self = federationLink(request, 'identity_providers', idp.id);
  return {
    id: idp.id,
    domain_id: idp.domainId,
    enabled: idp.enabled,
    description: idp.description,
    remote_ids: idp.remoteIds,
    authorization_ttl: idp.authorizationTtl,
    links: { self, protocols: `${self}/protocols` },
  };
}

function renderMapping(request: FastifyRequest, mapping: Mapping) {
  return { id: mapping.id, rules: mapping.rules, links: { self: federationLink(request, 'mappings', mapping.id) } };
}

/**
 * Keystone 22's protocol links are built without the resource's path: `self` is /v3/protocols/{id}
 * and `identity_provider` /v3/{idp_id} (neither is routed); kept as Keystone answers them. Shown
 * alone (create, get, update) a protocol has no idp_id nor remote_id_attribute; listed, it has both.
 */
function renderProtocol(request: FastifyRequest, protocol: Protocol, listed = false) {
  const base = baseUrl(request);
  return {
    id: protocol.id,
    ...(listed ? { idp_id: protocol.idpId } : {}),
    mapping_id: protocol.mappingId,
    ...(listed ? { remote_id_attribute: protocol.remoteIdAttribute } : {}),
    links: { self: `${base}/v3/protocols/${encodeURIComponent(protocol.id)}`, identity_provider: `${base}/v3/${encodeURIComponent(protocol.idpId)}` },
  };
}

function renderServiceProvider(request: FastifyRequest, sp: ServiceProvider) {
  return {
    auth_url: sp.authUrl,
    id: sp.id,
    enabled: sp.enabled,
    description: sp.description ?? null,
    relay_state_prefix: sp.relayStatePrefix,
    sp_url: sp.spUrl,
    links: { self: federationLink(request, 'service_providers', sp.id) },
  };
}

/** A mapping body as Keystone reads it: the `mapping` object (missing: {}) checked whole against its schema. */
function mappingRules(body: { mapping?: unknown }): unknown {
  const mapping = body.mapping ?? {};
  validateMapping(mapping);
  return (mapping as { rules: unknown }).rules;
}

/** /v3/OS-FEDERATION: identity providers, their protocols, mappings and service providers (Keystone's admin API). */
export function registerFederationRoutes(app: App, api: IdentityApi): void {
  // ---- identity providers --------------------------------------------------------------------
  app.get(`${OS_FEDERATION}/identity_providers`, { schema: { querystring: ProviderListQuery, response: { 200: many('identity_providers', IdentityProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_identity_providers');
      const enabled = booleanFilter(request.query.enabled);
      const idps = await api.federation.listIdentityProviders({ id: stringMatches(request.query, 'id'), ...(enabled === undefined ? {} : { enabled }) });
      return { identity_providers: idps.map((idp) => renderIdentityProvider(request, idp)), links: collectionLinks(request) };
    },
  );

  app.get(`${OS_FEDERATION}/identity_providers/:idp_id`, { schema: { params: IdpParams, response: { 200: one('identity_provider', IdentityProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_identity_provider');
      return { identity_provider: renderIdentityProvider(request, await api.federation.getIdentityProvider(request.params.idp_id)) };
    },
  );

  app.put(
    `${OS_FEDERATION}/identity_providers/:idp_id`,
    { schema: { params: IdpParams, body: IdentityProviderCreate, response: { 201: one('identity_provider', IdentityProviderEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_identity_provider');
      const body = request.body.identity_provider ?? {};
      const created = await api.federation.createIdentityProvider(request.params.idp_id, {
        domainId: body.domain_id,
        enabled: body.enabled,
        description: body.description,
        authorizationTtl: body.authorization_ttl,
        remoteIds: body.remote_ids,
      });
      // Keystone's resource manager announces the domain it made for the provider.
      if (created.createdDomainId) api.audit.resource('created', 'domain', created.createdDomainId, auditInitiator(api, request, reply));
      reply.code(201);
      return { identity_provider: renderIdentityProvider(request, created.identityProvider) };
    },
  );

  app.patch(
    `${OS_FEDERATION}/identity_providers/:idp_id`,
    { schema: { params: IdpParams, body: IdentityProviderUpdate, response: { 200: one('identity_provider', IdentityProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_identity_provider');
      const body = request.body.identity_provider;
      if (!body) throw new ValidationError(NOT_ENOUGH_PROPERTIES);
      const idp = await api.federation.updateIdentityProvider(request.params.idp_id, {
        enabled: body.enabled,
        description: body.description,
        authorizationTtl: body.authorization_ttl,
        remoteIds: body.remote_ids,
      });
      return { identity_provider: renderIdentityProvider(request, idp) };
    },
  );

  app.delete(`${OS_FEDERATION}/identity_providers/:idp_id`, { schema: { params: IdpParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_identity_provider');
    await api.federation.deleteIdentityProvider(request.params.idp_id);
    return noContent(reply);
  });

  // ---- protocols -----------------------------------------------------------------------------
  const PROTOCOLS = `${OS_FEDERATION}/identity_providers/:idp_id/protocols`;
  app.get(PROTOCOLS, { schema: { params: IdpParams, response: { 200: many('protocols', ProtocolEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_protocols');
    const protocols = await api.federation.listProtocols(request.params.idp_id);
    return { protocols: protocols.map((protocol) => renderProtocol(request, protocol, true)), links: collectionLinks(request) };
  });

  app.get(`${PROTOCOLS}/:protocol_id`, { schema: { params: ProtocolParams, response: { 200: one('protocol', ProtocolEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_protocol');
    return { protocol: renderProtocol(request, await api.federation.getProtocol(request.params.idp_id, request.params.protocol_id)) };
  });

  app.put(`${PROTOCOLS}/:protocol_id`, { schema: { params: ProtocolParams, body: ProtocolCreate, response: { 201: one('protocol', ProtocolEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_protocol');
      const body = request.body.protocol;
      if (!body) throw new ValidationError("'mapping_id' is a required property");
      const protocol = await api.federation.createProtocol(request.params.idp_id, request.params.protocol_id, {
        mappingId: body.mapping_id,
        remoteIdAttribute: body.remote_id_attribute,
      });
      reply.code(201);
      return { protocol: renderProtocol(request, protocol) };
    },
  );

  app.patch(`${PROTOCOLS}/:protocol_id`, { schema: { params: ProtocolParams, body: ProtocolUpdate, response: { 200: one('protocol', ProtocolEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_protocol');
      const body = request.body.protocol;
      if (!body) throw new ValidationError(NOT_ENOUGH_PROPERTIES);
      const protocol = await api.federation.updateProtocol(request.params.idp_id, request.params.protocol_id, {
        mappingId: body.mapping_id,
        remoteIdAttribute: body.remote_id_attribute,
      });
      return { protocol: renderProtocol(request, protocol) };
    },
  );

  app.delete(`${PROTOCOLS}/:protocol_id`, { schema: { params: ProtocolParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_protocol');
    await api.federation.deleteProtocol(request.params.idp_id, request.params.protocol_id);
    return noContent(reply);
  });

  // ---- mappings ------------------------------------------------------------------------------
  app.get(`${OS_FEDERATION}/mappings`, { schema: { response: { 200: many('mappings', MappingEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_mappings');
    const mappings = await api.federation.listMappings();
    return { mappings: mappings.map((mapping) => renderMapping(request, mapping)), links: collectionLinks(request) };
  });

  app.get(`${OS_FEDERATION}/mappings/:mapping_id`, { schema: { params: MappingParams, response: { 200: one('mapping', MappingEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_mapping');
    return { mapping: renderMapping(request, await api.federation.getMapping(request.params.mapping_id)) };
  });

  app.put(`${OS_FEDERATION}/mappings/:mapping_id`, { schema: { params: MappingParams, body: MappingBody, response: { 201: one('mapping', MappingEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_mapping');
      const mapping = await api.federation.createMapping(request.params.mapping_id, mappingRules(request.body));
      reply.code(201);
      return { mapping: renderMapping(request, mapping) };
    },
  );

  app.patch(`${OS_FEDERATION}/mappings/:mapping_id`, { schema: { params: MappingParams, body: MappingBody, response: { 200: one('mapping', MappingEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_mapping');
      return { mapping: renderMapping(request, await api.federation.updateMapping(request.params.mapping_id, mappingRules(request.body))) };
    },
  );

  app.delete(`${OS_FEDERATION}/mappings/:mapping_id`, { schema: { params: MappingParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_mapping');
    await api.federation.deleteMapping(request.params.mapping_id);
    return noContent(reply);
  });

  // ---- service providers ---------------------------------------------------------------------
  app.get(`${OS_FEDERATION}/service_providers`, { schema: { querystring: ProviderListQuery, response: { 200: many('service_providers', ServiceProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_service_providers');
      const enabled = booleanFilter(request.query.enabled);
      const sps = await api.federation.listServiceProviders({ id: stringMatches(request.query, 'id'), ...(enabled === undefined ? {} : { enabled }) });
      return { service_providers: sps.map((sp) => renderServiceProvider(request, sp)), links: collectionLinks(request) };
    },
  );

  app.get(`${OS_FEDERATION}/service_providers/:sp_id`, { schema: { params: SpParams, response: { 200: one('service_provider', ServiceProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_service_provider');
      return { service_provider: renderServiceProvider(request, await api.federation.getServiceProvider(request.params.sp_id)) };
    },
  );

  app.put(
    `${OS_FEDERATION}/service_providers/:sp_id`,
    { schema: { params: SpParams, body: ServiceProviderCreate, response: { 201: one('service_provider', ServiceProviderEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_service_provider');
      const body = request.body.service_provider;
      if (!body) throw new ValidationError("'auth_url' is a required property");
      const sp = await api.federation.createServiceProvider(request.params.sp_id, {
        authUrl: body.auth_url,
        spUrl: body.sp_url,
        enabled: body.enabled,
        description: body.description,
        relayStatePrefix: body.relay_state_prefix,
      });
      reply.code(201);
      return { service_provider: renderServiceProvider(request, sp) };
    },
  );

  app.patch(
    `${OS_FEDERATION}/service_providers/:sp_id`,
    { schema: { params: SpParams, body: ServiceProviderUpdate, response: { 200: one('service_provider', ServiceProviderEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_service_provider');
      const body = request.body.service_provider;
      if (!body) throw new ValidationError(NOT_ENOUGH_PROPERTIES);
      const sp = await api.federation.updateServiceProvider(request.params.sp_id, {
        authUrl: body.auth_url,
        spUrl: body.sp_url,
        enabled: body.enabled,
        description: body.description,
        relayStatePrefix: body.relay_state_prefix,
      });
      return { service_provider: renderServiceProvider(request, sp) };
    },
  );

  app.delete(`${OS_FEDERATION}/service_providers/:sp_id`, { schema: { params: SpParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_service_provider');
    await api.federation.deleteServiceProvider(request.params.sp_id);
    return noContent(reply);
  });
}
