import type { Static } from 'typebox';
import type { ActorType, AssignmentEntry, AssignmentFilter, Grant, TargetType } from '../../assignment/assignment-service.ts';
import { SYSTEM_TARGET_ID } from '../../assignment/assignment-service.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { collectionLinks } from '../links.ts';
import { sendList } from '../list-stream.ts';
import { groupTarget, listingTarget, projectTarget, roleTarget, userTarget } from '../targets.ts';
import type { IdentityTarget } from '../../policy/identity-policy.ts';
import { presenceFlag, querySchema, stringParameter } from '../query.ts';
import { renderAssignment, renderRole, type AssignmentNames } from '../render.ts';
import { RoleAssignments, RoleEntity, many, params } from '../schemas.ts';

type GrantParamValues = { target_id?: string; actor_id: string; role_id: string };

interface GrantRoute {
  target: TargetType;
  actor: ActorType;
  inherited: boolean;
  /** Path up to the role id, with :target_id and :actor_id. */
  path: string;
}

function grantRoutes(): GrantRoute[] {
  const routes: GrantRoute[] = [];
  for (const actor of ['user', 'group'] as const) {
    const actors = `${actor}s/:actor_id/roles`;
    routes.push({ target: 'project', actor, inherited: false, path: `/v3/projects/:target_id/${actors}` });
    routes.push({ target: 'domain', actor, inherited: false, path: `/v3/domains/:target_id/${actors}` });
    routes.push({ target: 'system', actor, inherited: false, path: `/v3/system/${actors}` });
  }
  return routes;
}

const AssignmentListQuery = querySchema(
  'user.id',
  'group.id',
  'role.id',
  'scope.project.id',
  'scope.domain.id',
  'scope.system',
  'scope.OS-INHERIT:inherited_to',
  'effective',
  'include_subtree',
  'include_names',
);

/** GET /v3/role_assignments: Keystone's filters (a domain-scoped caller's list is narrowed afterwards: inOwnDomain). */
function assignmentFilter(query: Static<typeof AssignmentListQuery>): AssignmentFilter {
  const projectId = stringParameter(query['scope.project.id']);
  const domainId = stringParameter(query['scope.domain.id']);
  return {
    userId: stringParameter(query['user.id']),
    groupId: stringParameter(query['group.id']),
    roleId: stringParameter(query['role.id']),
    projectId,
    domainId,
    system: stringParameter(query['scope.system']) !== undefined,
    inheritedOnly: stringParameter(query['scope.OS-INHERIT:inherited_to']) === 'projects',
    effective: presenceFlag(query.effective),
    includeSubtree: presenceFlag(query.include_subtree),
  };
}

const INHERITED = [
  { target: 'domain', path: 'domains' },
  { target: 'project', path: 'projects' },
] as const;

export function registerAssignmentRoutes(app: App, api: IdentityApi): void {
  const grantOf = (route: { target: TargetType; actor: ActorType; inherited: boolean }, params: GrantParamValues): Grant => ({
    actorType: route.actor,
    actorId: params.actor_id,
    targetType: route.target,
    targetId: route.target === 'system' ? SYSTEM_TARGET_ID : params.target_id!,
    roleId: params.role_id,
    inherited: route.inherited,
  });
  const action = (verb: 'create' | 'check' | 'revoke' | 'list', route: { target: TargetType; actor: ActorType }) => {
    if (route.target !== 'system') return verb === 'list' ? 'identity:list_grants' : `identity:${verb}_grant`;
    return verb === 'list' ? `identity:list_system_grants_for_${route.actor}` : `identity:${verb}_system_grant_for_${route.actor}`;
  };

  const register = (route: GrantRoute & { listPath: string }) => {
    const grantPath = `${route.path}/:role_id${route.inherited ? '/inherited_to_projects' : ''}`;
    const grantParams = route.target === 'system' ? params('actor_id', 'role_id') : params('target_id', 'actor_id', 'role_id');
    const listParams = route.target === 'system' ? params('actor_id') : params('target_id', 'actor_id');
    // Keystone's grant target: the actor, the project or domain, and the role (not for lists).
    const target = async (params: GrantParamValues): Promise<IdentityTarget> => {
      const [actor, role] = await Promise.all([
        route.actor === 'user' ? userTarget(api, params.actor_id) : groupTarget(api, params.actor_id),
        params.role_id ? roleTarget(api, params.role_id) : undefined,
      ]);
      const built: IdentityTarget = route.actor === 'user' ? { user: actor } : { group: actor };
      if (route.target === 'project') built.project = await projectTarget(api, params.target_id!);
      if (route.target === 'domain') built.domain = { id: params.target_id! };
      if (role) built.role = role;
      return built;
    };
    app.put(grantPath, { schema: { params: grantParams } }, async (request, reply) => {
      const values = request.params as GrantParamValues;
      authorize(api, request, action('create', route), await target(values));
      await api.assignments.grant(grantOf(route, values));
      return noContent(reply);
    });
    app.get(grantPath, { schema: { params: grantParams } }, async (request, reply) => {
      const values = request.params as GrantParamValues;
      authorize(api, request, action('check', route), await target(values));
      await api.assignments.checkGrant(grantOf(route, values));
      return noContent(reply);
    });
    app.delete(grantPath, { schema: { params: grantParams } }, async (request, reply) => {
      const values = request.params as GrantParamValues;
      authorize(api, request, action('revoke', route), await target(values));
      await api.assignments.revokeGrant(grantOf(route, values));
      return noContent(reply);
    });
    app.get(route.listPath, { schema: { params: listParams, response: { 200: many('roles', RoleEntity) } } }, async (request) => {
      const values = { ...(request.params as Omit<GrantParamValues, 'role_id'>), role_id: '' };
      authorize(api, request, action('list', route), await target(values));
      const roles = await api.assignments.listGrantedRoles(
        route.actor,
        values.actor_id,
        route.target,
        route.target === 'system' ? SYSTEM_TARGET_ID : values.target_id!,
        route.inherited,
      );
      return { roles: roles.map((role) => renderRole(request, role)), links: collectionLinks(request) };
    });
  };

  for (const route of grantRoutes()) register({ ...route, listPath: route.path });
  for (const actor of ['user', 'group'] as const) {
    for (const inherited of INHERITED) {
      const path = `/v3/OS-INHERIT/${inherited.path}/:target_id/${actor}s/:actor_id/roles`;
      register({ target: inherited.target, actor, inherited: true, path, listPath: `${path}/inherited_to_projects` });
    }
  }

  // The whole list, as Keystone; read and written LIST_PAGE_SIZE grants at a time (effective ones
  // expanded per page), names (include_names) looked up per page (list-stream.ts).
  app.get('/v3/role_assignments', { schema: { querystring: AssignmentListQuery, response: { 200: RoleAssignments } } }, async (request, reply) => {
    const auth = authorize(api, request, 'identity:list_role_assignments', listingTarget(request));
    const includeNames = presenceFlag(request.query.include_names);
    const pages = await api.assignments.assignmentPages(assignmentFilter(request.query), api.config.listPageSize);
    const scope = auth.scope;
    return sendList(request, reply, 'role_assignments', RoleAssignments, pages, async (page) => {
      const entries = scope.type === 'domain' ? await inOwnDomain(api, page, scope.domain.id) : page;
      const names = includeNames ? await namesFor(api, entries) : undefined;
      return entries.map((entry) => renderAssignment(request, entry, names));
    });
  });
}

/**
 * What a domain-scoped caller sees of a list of assignments, as Keystone narrows it after listing:
 * those on its domain and on the projects of its domain (whatever the query's filters named).
 */
async function inOwnDomain(api: IdentityApi, entries: AssignmentEntry[], domainId: string): Promise<AssignmentEntry[]> {
  const projectIds = [...new Set(entries.filter((entry) => entry.targetType === 'project').map((entry) => entry.targetId))];
  const projects = projectIds.length ? await api.resources.listProjects({ ids: projectIds }) : [];
  const inDomain = new Set(projects.filter((project) => project.domainId === domainId).map((project) => project.id));
  return entries.filter((entry) => (entry.targetType === 'domain' ? entry.targetId === domainId : entry.targetType === 'project' && inDomain.has(entry.targetId)));
}

async function namesFor(api: IdentityApi, entries: AssignmentEntry[]): Promise<AssignmentNames> {
  const ids = (pick: (entry: AssignmentEntry) => string | undefined) => [...new Set(entries.map(pick).filter((id): id is string => !!id))];
  const userIds = ids((entry) => (entry.actorType === 'user' ? entry.actorId : undefined));
  const groupIds = ids((entry) => (entry.actorType === 'group' ? entry.actorId : undefined));
  const targetIds = ids((entry) => (entry.targetType === 'system' ? undefined : entry.targetId));
  const roleIds = ids((entry) => entry.roleId);
  const [users, groups, roles] = await Promise.all([
    userIds.length ? api.identity.listUsers({ ids: userIds }) : [],
    groupIds.length ? api.identity.listGroups({ ids: groupIds }) : [],
    roleIds.length ? api.assignments.listRoles({ ids: roleIds }) : [],
  ]);
  const domainIds = new Set<string>(targetIds);
  for (const row of [...users, ...groups]) domainIds.add(row.domainId);
  for (const role of roles) if (role.domainId) domainIds.add(role.domainId);
  const projectRows = await api.resources.listProjects({ ids: [...domainIds], isDomain: false });
  const domainRows = await api.resources.listDomains({ ids: [...domainIds] });
  for (const project of projectRows) if (project.domainId) domainIds.add(project.domainId);
  const moreDomains = await api.resources.listDomains({ ids: [...domainIds] });
  const projects = new Map<string, { name: string; domainId: string | null; isDomain: boolean }>();
  for (const row of [...projectRows, ...domainRows, ...moreDomains]) {
    projects.set(row.id, { name: row.name, domainId: row.domainId ?? null, isDomain: row.isDomain });
  }
  return {
    users: new Map(users.map((user) => [user.id, { name: user.name, domainId: user.domainId }])),
    groups: new Map(groups.map((group) => [group.id, { name: group.name, domainId: group.domainId }])),
    projects,
    roles: new Map(roles.map((role) => [role.id, { name: role.name, domainId: role.domainId ?? null }])),
  };
}

