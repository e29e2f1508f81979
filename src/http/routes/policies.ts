import type { TObject } from 'typebox';
import { ValidationError } from '../../support/errors.ts';
import type { AssociationTarget } from '../../policy-store/policy-store-service.ts';
import { authorize, extraAttributes, noContent, type App, type IdentityApi, type Request } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { everyStringMatch, matchParameters, querySchema } from '../query.ts';
import { renderPolicy, renderPolicyEndpoint } from '../render.ts';
import { params, PolicyCreate, PolicyEndpointEntity, PolicyEntity, PolicyUpdate, many, one } from '../schemas.ts';

const PolicyParams = params('policy_id');
const PolicyListQuery = querySchema(...matchParameters('type'));
const EndpointAssociationParams = params('policy_id', 'endpoint_id');
const ServiceAssociationParams = params('policy_id', 'service_id');
const RegionAssociationParams = params('policy_id', 'service_id', 'region_id');
const EndpointParams = params('endpoint_id');
// Not extra attributes: the columns, what Keystone sets itself, and `extra` (Keystone drops a key of
// that name: it is its column of extra attributes).
const POLICY_FIELDS = ['id', 'type', 'blob', 'links', 'extra'] as const;
const OS_EP = '/v3/policies/:policy_id/OS-ENDPOINT-POLICY';

/** Keystone's policy store (/v3/policies) and the OS-ENDPOINT-POLICY extension. */
export function registerPolicyRoutes(app: App, api: IdentityApi): void {
  // ---- policies ------------------------------------------------------------------------------
  app.get('/v3/policies', { schema: { querystring: PolicyListQuery, response: { 200: many('policies', PolicyEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_policies');
    // Every value of a repeated filter counts, as in Keystone 22 (not the last, as for other lists).
    const policies = await api.policies.listPolicies(everyStringMatch(request.query, 'type'));
    return { policies: policies.map((policy) => renderPolicy(request, policy)), links: collectionLinks(request) };
  });

  app.post('/v3/policies', { schema: { body: PolicyCreate, response: { 201: one('policy', PolicyEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_policy');
    // Keystone reads a missing `policy` as {}: its first missing property is blob.
    const body = request.body.policy;
    if (!body) throw new ValidationError("'blob' is a required property");
    const policy = await api.policies.createPolicy({ type: body.type, blob: body.blob, extra: extraAttributes(body, POLICY_FIELDS) });
    reply.code(201);
    return { policy: renderPolicy(request, policy) };
  });

  app.get('/v3/policies/:policy_id', { schema: { params: PolicyParams, response: { 200: one('policy', PolicyEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_policy');
    return { policy: renderPolicy(request, await api.policies.getPolicy(request.params.policy_id)) };
  });

  app.patch('/v3/policies/:policy_id', { schema: { params: PolicyParams, body: PolicyUpdate, response: { 200: one('policy', PolicyEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_policy');
      const body = request.body.policy;
      if (!body) throw new ValidationError('{} does not have enough properties');
      const policy = await api.policies.updatePolicy(request.params.policy_id, {
        id: body.id,
        type: body.type,
        blob: body.blob,
        extra: extraAttributes(body, POLICY_FIELDS),
      });
      return { policy: renderPolicy(request, policy) };
    },
  );

  app.delete('/v3/policies/:policy_id', { schema: { params: PolicyParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_policy');
    await api.policies.deletePolicy(request.params.policy_id);
    return noContent(reply);
  });

  // ---- OS-ENDPOINT-POLICY --------------------------------------------------------------------
  app.get(`${OS_EP}/endpoints`, { schema: { params: PolicyParams, response: { 200: many('endpoints', PolicyEndpointEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_endpoints_for_policy');
    const endpoints = await api.policies.endpointsForPolicy(request.params.policy_id);
    return { endpoints: endpoints.map((endpoint) => renderPolicyEndpoint(request, endpoint)), links: collectionLinks(request) };
  });

  app.get('/v3/endpoints/:endpoint_id/OS-ENDPOINT-POLICY/policy', { schema: { params: EndpointParams, response: { 200: one('policy', PolicyEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_policy_for_endpoint');
      // Keystone links the policy under /v3/endpoints/ here.
      return { policy: renderPolicy(request, await api.policies.policyForEndpoint(request.params.endpoint_id), 'endpoints') };
    },
  );

  /** PUT (associate), GET/HEAD (check) and DELETE (dissociate) of one kind of association. */
  const associationRoutes = (path: string, schema: TObject, rule: string, target: (parameters: Record<string, string>) => AssociationTarget) => {
    const parts = (request: Request): [string, AssociationTarget] => {
      const parameters = request.params as Record<string, string>;
      return [parameters.policy_id ?? '', target(parameters)];
    };
    app.put(path, { schema: { params: schema } }, async (request, reply) => {
      authorize(api, request, `identity:create_policy_association_for_${rule}`);
      await api.policies.associate(...parts(request));
      return noContent(reply);
    });
    app.get(path, { schema: { params: schema } }, async (request, reply) => {
      authorize(api, request, `identity:check_policy_association_for_${rule}`);
      await api.policies.checkAssociation(...parts(request));
      return noContent(reply);
    });
    app.delete(path, { schema: { params: schema } }, async (request, reply) => {
      authorize(api, request, `identity:delete_policy_association_for_${rule}`);
      await api.policies.dissociate(...parts(request));
      return noContent(reply);
    });
  };
  associationRoutes(`${OS_EP}/endpoints/:endpoint_id`, EndpointAssociationParams, 'endpoint', (p) => ({ endpointId: p.endpoint_id ?? '' }));
  associationRoutes(`${OS_EP}/services/:service_id`, ServiceAssociationParams, 'service', (p) => ({ serviceId: p.service_id ?? '' }));
  associationRoutes(`${OS_EP}/services/:service_id/regions/:region_id`, RegionAssociationParams, 'region_and_service', (p) => ({
    serviceId: p.service_id ?? '',
    regionId: p.region_id ?? '',
  }));
}
