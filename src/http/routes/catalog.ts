import { authorize, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { querySchema, stringParameter } from '../query.ts';
import { renderEndpoint, renderRegion, renderService } from '../render.ts';
import {
  params,
  EndpointCreate,
  EndpointEntity,
  EndpointUpdate,
  RegionCreate,
  RegionEntity,
  RegionUpdate,
  ServiceCreate,
  ServiceEntity,
  ServiceUpdate,
  many,
  one,
} from '../schemas.ts';

const RegionParams = params('region_id');
const ServiceParams = params('service_id');
const EndpointParams = params('endpoint_id');
const RegionListQuery = querySchema('parent_region_id');
const ServiceListQuery = querySchema('type', 'name');
const EndpointListQuery = querySchema('interface', 'service_id', 'region_id');
const REGION_FIELDS = ['id', 'description', 'parent_region_id', 'links'] as const;
const SERVICE_FIELDS = ['id', 'type', 'name', 'description', 'enabled', 'links'] as const;
const ENDPOINT_FIELDS = ['id', 'interface', 'service_id', 'url', 'region_id', 'region', 'enabled', 'links', 'legacy_endpoint_id'] as const;

/** Regions, services and endpoints. */
export function registerCatalogRoutes(app: App, api: IdentityApi): void {
  // ---- regions -------------------------------------------------------------------------------
  app.get('/v3/regions', { schema: { querystring: RegionListQuery, response: { 200: many('regions', RegionEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_regions');
    const parentRegionId = stringParameter(request.query.parent_region_id);
    const regions = await api.catalog.listRegions(parentRegionId === undefined ? {} : { parentRegionId });
    return { regions: regions.map((region) => renderRegion(request, region)), links: collectionLinks(request) };
  });

  app.post('/v3/regions', { schema: { body: RegionCreate, response: { 201: one('region', RegionEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_region');
    const body = request.body.region ?? {};
    const region = await api.catalog.createRegion({
      id: body.id,
      description: body.description,
      parentRegionId: body.parent_region_id,
      extra: extraAttributes(body, REGION_FIELDS),
    });
    reply.code(201);
    return { region: renderRegion(request, region) };
  });

  app.put('/v3/regions/:region_id', { schema: { params: RegionParams, body: RegionCreate, response: { 201: one('region', RegionEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_region');
      const body = request.body.region ?? {};
      const region = await api.catalog.createRegionAt(request.params.region_id, {
        id: body.id,
        description: body.description,
        parentRegionId: body.parent_region_id,
        extra: extraAttributes(body, REGION_FIELDS),
      });
      reply.code(201);
      return { region: renderRegion(request, region) };
    },
  );

  app.get('/v3/regions/:region_id', { schema: { params: RegionParams, response: { 200: one('region', RegionEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_region');
    return { region: renderRegion(request, await api.catalog.getRegion(request.params.region_id)) };
  });

  app.patch('/v3/regions/:region_id', { schema: { params: RegionParams, body: RegionUpdate, response: { 200: one('region', RegionEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_region');
      const body = request.body.region;
      const region = await api.catalog.updateRegion(request.params.region_id, {
        id: typeof body.id === 'string' ? body.id : undefined,
        description: body.description,
        parentRegionId: body.parent_region_id,
        extra: extraAttributes(body, REGION_FIELDS),
      });
      return { region: renderRegion(request, region) };
    },
  );

  app.delete('/v3/regions/:region_id', { schema: { params: RegionParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_region');
    await api.catalog.deleteRegion(request.params.region_id);
    return noContent(reply);
  });

  // ---- services ------------------------------------------------------------------------------
  app.get('/v3/services', { schema: { querystring: ServiceListQuery, response: { 200: many('services', ServiceEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_services');
    const type = stringParameter(request.query.type);
    const name = stringParameter(request.query.name);
    const services = await api.catalog.listServices({ ...(type === undefined ? {} : { type }), ...(name === undefined ? {} : { name }) });
    return { services: services.map((service) => renderService(request, service)), links: collectionLinks(request) };
  });

  app.post('/v3/services', { schema: { body: ServiceCreate, response: { 201: one('service', ServiceEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_service');
    const body = request.body.service;
    const service = await api.catalog.createService({
      type: body.type,
      name: body.name,
      description: body.description,
      enabled: body.enabled,
      extra: extraAttributes(body, SERVICE_FIELDS),
    });
    reply.code(201);
    return { service: renderService(request, service) };
  });

  app.get('/v3/services/:service_id', { schema: { params: ServiceParams, response: { 200: one('service', ServiceEntity) } } }, async (request) => {
    authorize(api, request, 'identity:get_service');
    return { service: renderService(request, await api.catalog.getService(request.params.service_id)) };
  });

  app.patch('/v3/services/:service_id', { schema: { params: ServiceParams, body: ServiceUpdate, response: { 200: one('service', ServiceEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_service');
      const body = request.body.service;
      const service = await api.catalog.updateService(request.params.service_id, {
        id: typeof body.id === 'string' ? body.id : undefined,
        type: body.type,
        name: body.name,
        description: body.description,
        enabled: body.enabled,
        extra: extraAttributes(body, SERVICE_FIELDS),
      });
      return { service: renderService(request, service) };
    },
  );

  app.delete('/v3/services/:service_id', { schema: { params: ServiceParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_service');
    await api.catalog.deleteService(request.params.service_id);
    return noContent(reply);
  });

  // ---- endpoints -----------------------------------------------------------------------------
  app.get('/v3/endpoints', { schema: { querystring: EndpointListQuery, response: { 200: many('endpoints', EndpointEntity) } } }, async (request) => {
    authorize(api, request, 'identity:list_endpoints');
    const filter: { interface?: string; serviceId?: string; regionId?: string } = {};
    const endpointInterface = stringParameter(request.query.interface);
    const serviceId = stringParameter(request.query.service_id);
    const regionId = stringParameter(request.query.region_id);
    if (endpointInterface !== undefined) filter.interface = endpointInterface;
    if (serviceId !== undefined) filter.serviceId = serviceId;
    if (regionId !== undefined) filter.regionId = regionId;
    const endpoints = await api.catalog.listEndpoints(filter);
    return { endpoints: endpoints.map((endpoint) => renderEndpoint(request, endpoint)), links: collectionLinks(request) };
  });

  app.post('/v3/endpoints', { schema: { body: EndpointCreate, response: { 201: one('endpoint', EndpointEntity) } } }, async (request, reply) => {
    authorize(api, request, 'identity:create_endpoint');
    const body = request.body.endpoint;
    const endpoint = await api.catalog.createEndpoint({
      serviceId: body.service_id,
      interface: body.interface,
      url: body.url,
      regionId: body.region_id,
      legacyRegion: body.region,
      enabled: body.enabled,
      extra: extraAttributes(body, ENDPOINT_FIELDS),
    });
    reply.code(201);
    return { endpoint: renderEndpoint(request, endpoint) };
  });

  app.get('/v3/endpoints/:endpoint_id', { schema: { params: EndpointParams, response: { 200: one('endpoint', EndpointEntity) } } },
    async (request) => {
      // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
      const endpoint = await api.catalog.getEndpoint(request.params.endpoint_id);
      authorize(api, request, 'identity:get_endpoint');
      return { endpoint: renderEndpoint(request, endpoint) };
    },
  );

  app.patch('/v3/endpoints/:endpoint_id', { schema: { params: EndpointParams, body: EndpointUpdate, response: { 200: one('endpoint', EndpointEntity) } } },
    async (request) => {
      // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
      await api.catalog.getEndpoint(request.params.endpoint_id);
      authorize(api, request, 'identity:update_endpoint');
      const body = request.body.endpoint;
      const endpoint = await api.catalog.updateEndpoint(request.params.endpoint_id, {
        id: typeof body.id === 'string' ? body.id : undefined,
        serviceId: body.service_id,
        interface: body.interface,
        url: body.url,
        regionId: body.region_id,
        legacyRegion: body.region,
        enabled: body.enabled,
        extra: extraAttributes(body, ENDPOINT_FIELDS),
      });
      return { endpoint: renderEndpoint(request, endpoint) };
    },
  );

  app.delete('/v3/endpoints/:endpoint_id', { schema: { params: EndpointParams } }, async (request, reply) => {
    // Keystone reads the member before its policy: an id that exists nowhere is 404 for any token.
    await api.catalog.getEndpoint(request.params.endpoint_id);
    authorize(api, request, 'identity:delete_endpoint');
    await api.catalog.deleteEndpoint(request.params.endpoint_id);
    return noContent(reply);
  });
}
