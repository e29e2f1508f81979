import type { LimitViewer } from '../../limit/limit-service.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { querySchema, stringParameter } from '../query.ts';
import { renderLimit, renderRegisteredLimit } from '../render.ts';
import {
  created,
  params,
  LimitEntity,
  LimitModelBody,
  LimitsCreate,
  LimitUpdate,
  RegisteredLimitEntity,
  RegisteredLimitsCreate,
  RegisteredLimitUpdate,
  many,
  one,
} from '../schemas.ts';

const RegisteredLimitParams = params('registered_limit_id');
const LimitParams = params('limit_id');
const RegisteredLimitListQuery = querySchema('service_id', 'region_id', 'resource_name');
const LimitListQuery = querySchema('service_id', 'region_id', 'resource_name', 'project_id', 'domain_id');

/** The filters given, by their service names. */
function filters<K extends string>(query: { readonly [P in K]?: string | string[] }, names: Record<K, string>): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [parameter, attribute] of Object.entries(names) as [K, string][]) {
    const value = stringParameter(query[parameter]);
    if (value !== undefined) result[attribute] = value;
  }
  return result;
}

/** Keystone lists limits by the token's scope: all for a system token, its domain's or its project's otherwise. */
function viewerOf(auth: TokenContext): LimitViewer {
  switch (auth.scope.type) {
    case 'system':
      return { type: 'system' };
    case 'domain':
      return { type: 'domain', domainId: auth.scope.domain.id };
    case 'project':
      return { type: 'project', projectId: auth.scope.project.id };
    default:
      return { type: 'none' };
  }
}

/** Keystone's unified limits: registered limits, limits, and the enforcement model. */
export function registerLimitRoutes(app: App, api: IdentityApi): void {
  // ---- registered limits ---------------------------------------------------------------------
  app.get('/v3/registered_limits', { schema: { querystring: RegisteredLimitListQuery, response: { 200: many('registered_limits', RegisteredLimitEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_registered_limits');
      const filter = filters(request.query, { service_id: 'serviceId', region_id: 'regionId', resource_name: 'resourceName' });
      const limits = await api.limits.listRegisteredLimits(filter);
      return { registered_limits: limits.map((limit) => renderRegisteredLimit(request, limit)), links: collectionLinks(request) };
    },
  );

  app.post('/v3/registered_limits', { schema: { body: RegisteredLimitsCreate, response: { 201: created('registered_limits', RegisteredLimitEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_registered_limits');
      const limits = await api.limits.createRegisteredLimits(
        request.body.registered_limits.map((limit) => ({
          serviceId: limit.service_id,
          regionId: limit.region_id,
          resourceName: limit.resource_name,
          defaultLimit: limit.default_limit,
          description: limit.description,
        })),
      );
      reply.code(201);
      return { registered_limits: limits.map((limit) => renderRegisteredLimit(request, limit)) };
    },
  );

  app.get('/v3/registered_limits/:registered_limit_id', { schema: { params: RegisteredLimitParams, response: { 200: one('registered_limit', RegisteredLimitEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_registered_limit');
      return { registered_limit: renderRegisteredLimit(request, await api.limits.getRegisteredLimit(request.params.registered_limit_id)) };
    },
  );

  app.patch('/v3/registered_limits/:registered_limit_id',
    { schema: { params: RegisteredLimitParams, body: RegisteredLimitUpdate, response: { 200: one('registered_limit', RegisteredLimitEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_registered_limit');
      const body = request.body.registered_limit ?? {};
      const limit = await api.limits.updateRegisteredLimit(request.params.registered_limit_id, {
        serviceId: body.service_id,
        regionId: body.region_id,
        resourceName: body.resource_name,
        defaultLimit: body.default_limit,
        description: body.description,
      });
      return { registered_limit: renderRegisteredLimit(request, limit) };
    },
  );

  app.delete('/v3/registered_limits/:registered_limit_id', { schema: { params: RegisteredLimitParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_registered_limit');
    await api.limits.deleteRegisteredLimit(request.params.registered_limit_id);
    return noContent(reply);
  });

  // ---- limits --------------------------------------------------------------------------------
  app.get('/v3/limits/model', { schema: { response: { 200: LimitModelBody } } }, async (request) => {
    authorize(api, request, 'identity:get_limit_model');
    return { model: { ...api.limits.model } };
  });

  app.get('/v3/limits', { schema: { querystring: LimitListQuery, response: { 200: many('limits', LimitEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:list_limits');
    const filter = filters(request.query, {
      service_id: 'serviceId',
      region_id: 'regionId',
      resource_name: 'resourceName',
      project_id: 'projectId',
      domain_id: 'domainId',
    });
    const limits = await api.limits.listLimits(filter, viewerOf(auth));
    return { limits: limits.map((limit) => renderLimit(request, limit)), links: collectionLinks(request) };
  });

  app.post('/v3/limits', { schema: { body: LimitsCreate, response: { 201: created('limits', LimitEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_limits');
    const limits = await api.limits.createLimits(
      request.body.limits.map((limit) => ({
        ...('project_id' in limit ? { projectId: limit.project_id } : { domainId: limit.domain_id }),
        serviceId: limit.service_id,
        regionId: limit.region_id,
        resourceName: limit.resource_name,
        resourceLimit: limit.resource_limit,
        description: limit.description,
      })),
    );
    reply.code(201);
    return { limits: limits.map((limit) => renderLimit(request, limit)) };
  });

  app.get('/v3/limits/:limit_id', { schema: { params: LimitParams, response: { 200: one('limit', LimitEntity) } } }, async (request) => {
    // Keystone's target: the limit's project (and its domain) or its domain; none for a limit that does not exist.
    authorize(api, request, 'identity:get_limit', (await api.limits.ownerOf(request.params.limit_id)) ?? {});
    return { limit: renderLimit(request, await api.limits.getLimit(request.params.limit_id)) };
  });

  app.patch('/v3/limits/:limit_id', { schema: { params: LimitParams, body: LimitUpdate, response: { 200: one('limit', LimitEntity) } } }, async (request) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.limits.getLimit(request.params.limit_id);
    authorize(api, request, 'identity:update_limit');
    const body = request.body.limit ?? {};
    const limit = await api.limits.updateLimit(request.params.limit_id, { resourceLimit: body.resource_limit, description: body.description });
    return { limit: renderLimit(request, limit) };
  });

  app.delete('/v3/limits/:limit_id', { schema: { params: LimitParams } }, async (request, reply) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.limits.getLimit(request.params.limit_id);
    authorize(api, request, 'identity:delete_limit');
    await api.limits.deleteLimit(request.params.limit_id);
    return noContent(reply);
  });
}
