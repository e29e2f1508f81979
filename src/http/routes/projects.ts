import { Type, type Static } from 'typebox';
import type { FastifyRequest } from 'fastify';
import type { Limit } from '../../limit/limit-service.ts';
import type { Project, ProjectFilter } from '../../resource/resource-service.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { NotFoundError, ValidationError } from '../../support/errors.ts';
import { authorize, caller, defaultDomainOf, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { sentField } from '../decision-order.ts';
import { baseUrl } from '../links.ts';
import { sendList } from '../list-stream.ts';
import { listingTarget, projectTarget } from '../targets.ts';
import { booleanFilter, listParameter, matchParameters, presenceFlag, querySchema, stringMatches, stringParameter } from '../query.ts';
import { renderLimit, renderProject } from '../render.ts';
import { ProjectCreate, ProjectEntity, ProjectUpdate, TagsBody, many, one, params } from '../schemas.ts';

const PROJECT_FIELDS = ['id', 'name', 'domain_id', 'parent_id', 'is_domain', 'description', 'enabled', 'tags', 'options', 'explicit_domain_id', 'links'] as const;
const Params = params('project_id');
const ProjectList = many('projects', ProjectEntity);
const TagParams = params('project_id', 'tag');
const ProjectListQuery = querySchema(
  ...matchParameters('name'),
  'enabled',
  'is_domain',
  'domain_id',
  'parent_id',
  'tags',
  'tags-any',
  'not-tags',
  'not-tags-any',
);

/** GET /v3/projects: Keystone's filters; a domain-scoped caller only sees its own domain's projects. */
function projectFilter(query: Static<typeof ProjectListQuery>, auth: TokenContext): ProjectFilter {
  const enabled = booleanFilter(query.enabled);
  const isDomain = booleanFilter(query.is_domain);
  const domainId = auth.scope.type === 'domain' ? auth.scope.domain.id : stringParameter(query.domain_id);
  const parentId = stringParameter(query.parent_id);
  return {
    name: stringMatches(query, 'name'),
    ...(enabled === undefined ? {} : { enabled }),
    ...(isDomain === undefined ? {} : { isDomain }),
    ...(domainId === undefined ? {} : { domainId }),
    ...(parentId === undefined ? {} : { parentId }),
    tagsAll: listParameter(query.tags),
    tagsAny: listParameter(query['tags-any']),
    notTagsAll: listParameter(query['not-tags']),
    notTagsAny: listParameter(query['not-tags-any']),
  };
}

const ProjectShowQuery = querySchema('parents_as_list', 'parents_as_ids', 'subtree_as_list', 'subtree_as_ids', 'include_limits');

/**
 * GET /v3/projects/{id}'s hierarchy flags, as Keystone's _expand_project_ref: the ids above or below
 * as nested objects (`_as_ids`), or the projects themselves (`_as_list`), only those the caller
 * holds a role on, each with its limits when `include_limits` is asked.
 */
async function hierarchyOf(api: IdentityApi, request: FastifyRequest, auth: TokenContext, project: Project, query: Static<typeof ProjectShowQuery>) {
  const flags = {
    parentsAsList: presenceFlag(query.parents_as_list),
    parentsAsIds: presenceFlag(query.parents_as_ids),
    subtreeAsList: presenceFlag(query.subtree_as_list),
    subtreeAsIds: presenceFlag(query.subtree_as_ids),
  };
  if (flags.parentsAsList && flags.parentsAsIds) throw new ValidationError('Cannot use parents_as_list and parents_as_ids query params at the same time.');
  if (flags.subtreeAsList && flags.subtreeAsIds) throw new ValidationError('Cannot use subtree_as_list and subtree_as_ids query params at the same time.');
  const expanded: { parents?: unknown; subtree?: unknown } = {};
  if (flags.parentsAsIds) expanded.parents = await api.resources.parentIds(project);
  if (flags.subtreeAsIds) expanded.subtree = await api.resources.subtreeIds(project.id);
  if (flags.parentsAsList || flags.subtreeAsList) {
    const held = new Set(await api.assignments.targetsOfUser(auth.user.id, 'project'));
    const includeLimits = presenceFlag(query.include_limits);
    const listed = async (projects: Project[]) =>
      Promise.all(
        projects
          .filter((row) => held.has(row.id))
          .map(async (row) => ({
            project: {
              ...renderProject(request, row),
              ...(includeLimits ? { limits: (await api.limits.listLimits({ projectId: row.id }, { type: 'system' })).map((limit) => limitAsStored(request, limit)) } : {}),
            },
          })),
      );
    if (flags.parentsAsList) expanded.parents = await listed(await api.resources.ancestors(project));
    if (flags.subtreeAsList) expanded.subtree = await listed(await api.resources.descendants(project.id));
  }
  return expanded;
}

/** A limit as Keystone's driver gives it, which is how _include_limits adds it: no links. */
function limitAsStored(request: FastifyRequest, limit: Limit) {
  const { links: _links, ...stored } = renderLimit(request, limit);
  return stored;
}

const TagsResponse = Type.Object({ tags: Type.Array(Type.String()), links: Type.Object({ self: Type.String() }) });

export function registerProjectRoutes(app: App, api: IdentityApi): void {
  // The whole list, as Keystone; read and written LIST_PAGE_SIZE projects at a time (list-stream.ts).
  app.get('/v3/projects', { schema: { querystring: ProjectListQuery, response: { 200: ProjectList } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:list_projects', listingTarget(request));
    const pages = api.resources.listProjectPages(projectFilter(request.query, auth), api.config.listPageSize);
    return sendList(request, reply, 'projects', ProjectList, pages, (projects) => projects.map((project) => renderProject(request, project)));
  });

  app.post('/v3/projects', { schema: { body: ProjectCreate, response: { 201: one('project', ProjectEntity) } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:create_project', { project: { domainId: sentField(request, 'project', 'domain_id') ?? defaultDomainOf(caller(request)) } });
    const body = request.body.project;
    const project = await api.resources.createProject({
      id: body.is_domain && body.explicit_domain_id ? body.explicit_domain_id : undefined,
      name: body.name,
      // A project acting as a domain has no domain: one given is refused, none is taken from the token.
      domainId: body.is_domain ? (body.domain_id ?? '') : (body.domain_id ?? defaultDomainOf(auth)),
      parentId: body.parent_id,
      isDomain: body.is_domain,
      description: body.description,
      enabled: body.enabled,
      tags: body.tags,
      options: body.options,
      extra: extraAttributes(body, PROJECT_FIELDS),
    });
    reply.code(201);
    return { project: renderProject(request, project) };
  });

  app.get('/v3/projects/:project_id', { schema: { params: Params, querystring: ProjectShowQuery, response: { 200: one('project', ProjectEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_project', { project: await projectTarget(api, request.params.project_id) });
    const project = await api.resources.getProject(request.params.project_id);
    return { project: { ...renderProject(request, project), ...(await hierarchyOf(api, request, auth, project, request.query)) } };
  });

  app.patch('/v3/projects/:project_id', { schema: { params: Params, body: ProjectUpdate, response: { 200: one('project', ProjectEntity) } } },
    async (request) => {
      authorize(api, request, 'identity:update_project', { project: await projectTarget(api, request.params.project_id) });
      const body = request.body.project;
      const project = await api.resources.updateProject(request.params.project_id, {
        id: typeof body.id === 'string' ? body.id : undefined,
        name: body.name,
        domainId: body.domain_id,
        parentId: body.parent_id,
        isDomain: body.is_domain,
        description: body.description,
        enabled: body.enabled,
        tags: body.tags,
        options: body.options,
        extra: extraAttributes(body, PROJECT_FIELDS),
      });
      // Keystone's update answer also carries the extra attributes as `extra` (only this one does).
      return { project: { ...renderProject(request, project), extra: { ...project.extra } } };
    },
  );

  app.delete('/v3/projects/:project_id', { schema: { params: Params } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_project', { project: await projectTarget(api, request.params.project_id) });
    await api.resources.deleteProject(request.params.project_id);
    return noContent(reply);
  });

  // ---- tags --------------------------------------------------------------------------------

  app.get('/v3/projects/:project_id/tags', { schema: { params: Params, response: { 200: TagsResponse } } }, async (request) => {
    authorize(api, request, 'identity:list_project_tags', { project: await projectTarget(api, request.params.project_id) });
    const project = await api.resources.getProject(request.params.project_id);
    return { tags: project.tags, links: { self: `${baseUrl(request)}/v3/projects/${project.id}/tags` } };
  });

  app.put('/v3/projects/:project_id/tags', { schema: { params: Params, body: TagsBody, response: { 200: TagsResponse } } },
    async (request) => {
      authorize(api, request, 'identity:update_project_tags', { project: await projectTarget(api, request.params.project_id) });
      const tags = await api.resources.replaceTags(request.params.project_id, request.body.tags);
      return { tags, links: { self: `${baseUrl(request)}/v3/projects/${request.params.project_id}/tags` } };
    },
  );

  app.delete('/v3/projects/:project_id/tags', { schema: { params: Params } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_project_tags', { project: await projectTarget(api, request.params.project_id) });
    await api.resources.replaceTags(request.params.project_id, []);
    return noContent(reply);
  });

  app.get('/v3/projects/:project_id/tags/:tag', { schema: { params: TagParams } }, async (request, reply) => {
    authorize(api, request, 'identity:get_project_tag', { project: await projectTarget(api, request.params.project_id) });
    const project = await api.resources.getProject(request.params.project_id);
    if (!project.tags.includes(request.params.tag)) throw new NotFoundError(`Could not find project tag: ${request.params.tag}.`);
    return noContent(reply);
  });

  app.put('/v3/projects/:project_id/tags/:tag', { schema: { params: TagParams } }, async (request, reply) => {
    authorize(api, request, 'identity:create_project_tag', { project: await projectTarget(api, request.params.project_id) });
    await api.resources.addTag(request.params.project_id, request.params.tag);
    const location = `${baseUrl(request)}/v3/projects/${request.params.project_id}/tags/${encodeURIComponent(request.params.tag)}`;
    return reply.code(201).header('Location', location).send();
  });

  app.delete('/v3/projects/:project_id/tags/:tag', { schema: { params: TagParams } }, async (request, reply) => {
    authorize(api, request, 'identity:delete_project_tag', { project: await projectTarget(api, request.params.project_id) });
    await api.resources.removeTag(request.params.project_id, request.params.tag);
    return noContent(reply);
  });
}
