import type { FastifyRequest } from 'fastify';
import type { Json } from '../../store/entities.ts';
import type { EndpointGroup } from '../../catalog/endpoint-filter-service.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks, selfLink } from '../links.ts';
import { querySchema, stringParameter } from '../query.ts';
import { renderEndpoint, renderProject } from '../render.ts';
import {
  EndpointEntity,
  EndpointGroupCreate,
  EndpointGroupEntity,
  EndpointGroupUpdate,
  ProjectEndpointGroupBody,
  ProjectEntity,
  many,
  one,
  params,
} from '../schemas.ts';

const GroupParams = params('endpoint_group_id');
const GroupProjectParams = params('endpoint_group_id', 'project_id');
const ProjectParams = params('project_id');
const EndpointParams = params('endpoint_id');
const ProjectEndpointParams = params('project_id', 'endpoint_id');
const GroupListQuery = querySchema('name');
const GROUP_FIELDS = new Set(['name', 'description', 'filters']);
const PREFIX = '/v3/OS-EP-FILTER';

function renderGroup(request: FastifyRequest, group: EndpointGroup) {
  return {
    id: group.id,
    name: group.name,
    description: group.description ?? null,
    filters: group.filters,
    links: selfLink(request, 'OS-EP-FILTER/endpoint_groups', group.id),
  };
}

/** Attribute names beyond an endpoint group's own (Keystone refuses them). */
function extraNames(body: Record<string, unknown>): string[] {
  return Object.keys(body).filter((key) => !GROUP_FIELDS.has(key));
}

/** OS-EP-FILTER: endpoint groups and project ↔ endpoint (group) associations. */
export function registerEndpointFilterRoutes(app: App, api: IdentityApi): void {
  // ---- endpoint groups -----------------------------------------------------------------------
  app.get(`${PREFIX}/endpoint_groups`, { schema: { querystring: GroupListQuery, response: { 200: many('endpoint_groups', EndpointGroupEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_endpoint_groups');
      const groups = await api.endpointFilter.listGroups(stringParameter(request.query.name));
      return { endpoint_groups: groups.map((group) => renderGroup(request, group)), links: collectionLinks(request) };
    },
  );

  app.post(`${PREFIX}/endpoint_groups`, { schema: { body: EndpointGroupCreate, response: { 201: one('endpoint_group', EndpointGroupEntity) } } },
    async (request, reply) => {
      authorize(api, request, 'identity:create_endpoint_group');
      const body = request.body.endpoint_group;
      const group = await api.endpointFilter.createGroup({
        name: body.name,
        description: body.description,
        filters: body.filters as Json | undefined,
        extra: extraNames(body),
      });
      reply.code(201);
      return { endpoint_group: renderGroup(request, group) };
    },
  );

  app.get(`${PREFIX}/endpoint_groups/:endpoint_group_id`, { schema: { params: GroupParams, response: { 200: one('endpoint_group', EndpointGroupEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:get_endpoint_group');
      return { endpoint_group: renderGroup(request, await api.endpointFilter.getGroup(request.params.endpoint_group_id)) };
    },
  );

  app.patch(
    `${PREFIX}/endpoint_groups/:endpoint_group_id`,
    { schema: { params: GroupParams, body: EndpointGroupUpdate, response: { 200: one('endpoint_group', EndpointGroupEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_endpoint_group');
      const body = request.body.endpoint_group;
      const group = await api.endpointFilter.updateGroup(request.params.endpoint_group_id, {
        name: body.name,
        description: body.description,
        filters: body.filters as Json | undefined,
        extra: extraNames(body),
      });
      return { endpoint_group: renderGroup(request, group) };
    },
  );

  app.delete(`${PREFIX}/endpoint_groups/:endpoint_group_id`, { schema: { params: GroupParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_endpoint_group');
    await api.endpointFilter.deleteGroup(request.params.endpoint_group_id);
    return noContent(reply);
  });

  app.get(`${PREFIX}/endpoint_groups/:endpoint_group_id/endpoints`, { schema: { params: GroupParams, response: { 200: many('endpoints', EndpointEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_endpoints_associated_with_endpoint_group');
      const endpoints = await api.endpointFilter.endpointsOfGroup(request.params.endpoint_group_id);
      return { endpoints: endpoints.map((endpoint) => renderEndpoint(request, endpoint)), links: collectionLinks(request) };
    },
  );

  app.get(`${PREFIX}/endpoint_groups/:endpoint_group_id/projects`, { schema: { params: GroupParams, response: { 200: many('projects', ProjectEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_projects_associated_with_endpoint_group');
      const projects = await api.endpointFilter.projectsOfGroup(request.params.endpoint_group_id);
      return { projects: projects.map((project) => renderProject(request, project)), links: collectionLinks(request) };
    },
  );

  // ---- project ↔ endpoint group ------------------------------------------------------------
  app.put(`${PREFIX}/endpoint_groups/:endpoint_group_id/projects/:project_id`, { schema: { params: GroupProjectParams } }, async (request, reply) => {
    authorize(api, request, 'identity:add_endpoint_group_to_project');
    await api.endpointFilter.addGroupToProject(request.params.endpoint_group_id, request.params.project_id);
    return noContent(reply);
  });

  // GET and HEAD answer 200 with the association (HEAD without its body); Keystone's self link is a bare path.
  app.get(`${PREFIX}/endpoint_groups/:endpoint_group_id/projects/:project_id`, { schema: { params: GroupProjectParams, response: { 200: ProjectEndpointGroupBody } } },
    async (request) => {
      authorize(api, request, 'identity:get_endpoint_group_in_project');
      const { endpoint_group_id: groupId, project_id: projectId } = request.params;
      await api.endpointFilter.checkGroupInProject(groupId, projectId);
      return {
        project_endpoint_group: {
          endpoint_group_id: groupId,
          project_id: projectId,
          links: { self: `/OS-EP-FILTER/endpoint_groups/${groupId}/projects/${projectId}` },
        },
      };
    },
  );

  app.delete(`${PREFIX}/endpoint_groups/:endpoint_group_id/projects/:project_id`, { schema: { params: GroupProjectParams } }, async (request, reply) => {
    authorize(api, request, 'identity:remove_endpoint_group_from_project');
    await api.endpointFilter.removeGroupFromProject(request.params.endpoint_group_id, request.params.project_id);
    return noContent(reply);
  });

  app.get(`${PREFIX}/projects/:project_id/endpoint_groups`, { schema: { params: ProjectParams, response: { 200: many('endpoint_groups', EndpointGroupEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_endpoint_groups_for_project');
      const groups = await api.endpointFilter.groupsOfProject(request.params.project_id);
      return { endpoint_groups: groups.map((group) => renderGroup(request, group)), links: collectionLinks(request) };
    },
  );

  // ---- project ↔ endpoint ------------------------------------------------------------------
  app.put(`${PREFIX}/projects/:project_id/endpoints/:endpoint_id`, { schema: { params: ProjectEndpointParams } }, async (request, reply) => {
    authorize(api, request, 'identity:add_endpoint_to_project');
    await api.endpointFilter.addEndpointToProject(request.params.project_id, request.params.endpoint_id);
    return noContent(reply);
  });

  // GET and HEAD: 204 when associated.
  app.get(`${PREFIX}/projects/:project_id/endpoints/:endpoint_id`, { schema: { params: ProjectEndpointParams } }, async (request, reply) => {
    authorize(api, request, 'identity:check_endpoint_in_project');
    await api.endpointFilter.checkEndpointInProject(request.params.project_id, request.params.endpoint_id);
    return noContent(reply);
  });

  app.delete(`${PREFIX}/projects/:project_id/endpoints/:endpoint_id`, { schema: { params: ProjectEndpointParams } }, async (request, reply) => {
    authorize(api, request, 'identity:remove_endpoint_from_project');
    await api.endpointFilter.removeEndpointFromProject(request.params.project_id, request.params.endpoint_id);
    return noContent(reply);
  });

  app.get(`${PREFIX}/projects/:project_id/endpoints`, { schema: { params: ProjectParams, response: { 200: many('endpoints', EndpointEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_endpoints_for_project');
      const endpoints = await api.endpointFilter.endpointsOfProject(request.params.project_id);
      return { endpoints: endpoints.map((endpoint) => renderEndpoint(request, endpoint)), links: collectionLinks(request) };
    },
  );

  app.get(`${PREFIX}/endpoints/:endpoint_id/projects`, { schema: { params: EndpointParams, response: { 200: many('projects', ProjectEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:list_projects_for_endpoint');
      const projects = await api.endpointFilter.projectsOfEndpoint(request.params.endpoint_id);
      return { projects: projects.map((project) => renderProject(request, project)), links: collectionLinks(request) };
    },
  );
}
