import { cacheRow, LoadingCache, type CacheEpoch } from '../support/cache.ts';
import type { AccessEpoch } from '../events/access-epoch.ts';
import type { Revocations } from '../events/revocation.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import type { IdentityService } from '../identity/identity-service.ts';
import { newId } from '../support/ids.ts';
import { cleanOptions, type ResourceService } from '../resource/resource-service.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { AssignmentRow, Json, RoleRow } from '../store/entities.ts';
import { isUniqueViolation, type StringMatch } from '../store/filters.ts';
import { pagesOf, type Page } from '../store/keyset.ts';
import {
  AssignmentRepository,
  SYSTEM_TARGET_ID,
  type ActorType,
  type AssignmentQuery,
  type TargetType,
} from './assignment-repository.ts';

export { SYSTEM_TARGET_ID, type ActorType, type TargetType } from './assignment-repository.ts';

export type Role = RoleRow;

export interface RoleInput {
  name: string;
  domainId?: string | null | undefined;
  description?: string | null | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface RolePatch {
  id?: string | undefined;
  name?: string | undefined;
  domainId?: string | null | undefined;
  description?: string | null | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface RoleFilter {
  name?: StringMatch[];
  domainId?: string | null;
}

export interface Grant {
  actorType: ActorType;
  actorId: string;
  targetType: TargetType;
  /** Project or domain id; SYSTEM_TARGET_ID for the system. */
  targetId: string;
  roleId: string;
  inherited?: boolean;
}

export interface RoleImplication {
  prior: Role;
  implied: Role;
}

export interface AssignmentFilter {
  userId?: string;
  groupId?: string;
  roleId?: string;
  projectId?: string;
  domainId?: string;
  system?: boolean;
  /** Only assignments inherited to projects (scope.OS-INHERIT:inherited_to=projects). */
  inheritedOnly?: boolean;
  effective?: boolean;
  includeSubtree?: boolean;
}

/** One entry of GET /v3/role_assignments, before rendering. */
export interface AssignmentEntry {
  actorType: ActorType;
  actorId: string;
  targetType: TargetType;
  targetId: string;
  roleId: string;
  inherited: boolean;
  /** For effective group-derived entries: the group the user is a member of. */
  viaGroupId?: string;
  /** For implied entries: the role that implied this one. */
  priorRoleId?: string;
  /** The grant the entry comes from (differs from the entry for effective expansions). */
  source: Grant & { inherited: boolean };
}

/** Keystone's default [assignment] prohibited_implied_role. */
const PROHIBITED_IMPLIED_ROLES = ['admin'];

/** Roles, implied roles and role assignments; computes the effective roles that scope tokens. */
export class AssignmentService {
  private readonly repository = new AssignmentRepository();

  /** Effective roles per (user, scope), dropped on a change of what they are made of; one computation per miss. */
  private readonly roleCache: LoadingCache<string, Role[]>;

  constructor(
    private readonly store: Store,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    private readonly revocations?: Revocations,
    /** Moves with assignments, memberships, roles and the project tree (CACHE_TOPICS.effectiveRoles). */
    epoch?: CacheEpoch,
    /** Bumped by every change that takes roles away (other nodes' polls notice it). */
    private readonly accessEpoch?: AccessEpoch,
  ) {
    this.roleCache = new LoadingCache(50_000, epoch);
  }

  // ---- roles -----------------------------------------------------------------------------

  async getRole(id: string, em: EntityManager = this.store.reader()): Promise<Role> {
    const row = await this.repository.findRole(em, id);
    if (!row) throw NotFoundError.of('role', id);
    return row;
  }

  /** `em`: the caller's transaction (the reader otherwise). */
  listRoles(filter: RoleFilter & { ids?: string[] }, em: EntityManager = this.store.reader()): Promise<Role[]> {
    return this.repository.listRoles(em, filter);
  }

  createRole(input: RoleInput): Promise<Role> {
    return this.store
      .transaction(async (em) => {
        if (input.domainId) {
          const domain = await this.resources.findAny(input.domainId, em);
          if (!domain?.isDomain) throw NotFoundError.of('domain', input.domainId);
        }
        return this.repository.insertRole(em, {
          id: newId(),
          name: input.name,
          domainId: input.domainId ?? null,
          description: input.description ?? null,
          options: cleanOptions({}, input.options),
          extra: input.extra ?? {},
        });
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw duplicateRole(input.name, input.domainId);
        throw error;
      });
  }

  updateRole(id: string, patch: RolePatch): Promise<Role> {
    return this.store
      .transaction(async (em) => {
        const row = await this.getRole(id, em);
        if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change role ID');
        if (patch.domainId !== undefined && patch.domainId !== row.domainId) throw new ValidationError('Update of `domain_id` is not allowed.');
        if (row.options.immutable === true && !(patch.options && patch.options.immutable === false)) {
          throw new ForbiddenError(`Unable to update immutable role resource: \`${id}. Set resource option "immutable" to false first.`);
        }
        if (patch.name !== undefined) row.name = patch.name;
        if (patch.description !== undefined) row.description = patch.description;
        if (patch.options !== undefined) row.options = cleanOptions(row.options, patch.options);
        if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
        await this.repository.saveChanges(em);
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw duplicateRole(patch.name ?? '', patch.domainId);
        throw error;
      });
  }

  deleteRole(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getRole(id, em);
      if (row.options.immutable === true) {
        throw new ForbiddenError(`Unable to delete immutable role resource: \`${id}. Set resource option "immutable" to false first.`);
      }
      // Assignments and implications go by foreign-key cascade.
      await this.repository.deleteRole(em, row);
      await this.accessEpoch?.bump(em);
    });
  }

  // ---- implied roles ---------------------------------------------------------------------

  async createImplication(priorRoleId: string, impliedRoleId: string): Promise<RoleImplication> {
    return this.store.transaction(async (em) => {
      const prior = await this.getRole(priorRoleId, em);
      const implied = await this.getRole(impliedRoleId, em);
      if (PROHIBITED_IMPLIED_ROLES.includes(implied.name)) throw new ForbiddenError(`${impliedRoleId} cannot be an implied roles.`);
      // As Keystone 22: a domain-specific role may imply a role of any domain or a global one; only a
      // global role implying a domain-specific one is refused (with the same text as above).
      if (!prior.domainId && implied.domainId) throw new ForbiddenError(`${impliedRoleId} cannot be an implied roles.`);
      if (!(await this.repository.findImplication(em, priorRoleId, impliedRoleId))) {
        await this.repository.insertImplication(em, { priorRoleId, impliedRoleId });
      }
      return { prior, implied };
    });
  }

  async getImplication(priorRoleId: string, impliedRoleId: string): Promise<RoleImplication> {
    const em = this.store.reader();
    const prior = await this.getRole(priorRoleId, em);
    const implied = await this.getRole(impliedRoleId, em);
    if (!(await this.repository.findImplication(em, priorRoleId, impliedRoleId))) {
      throw NotFoundError.implication(priorRoleId, impliedRoleId);
    }
    return { prior, implied };
  }

  async deleteImplication(priorRoleId: string, impliedRoleId: string): Promise<void> {
    await this.store.transaction(async (em) => {
      await this.getRole(priorRoleId, em);
      await this.getRole(impliedRoleId, em);
      const row = await this.repository.findImplication(em, priorRoleId, impliedRoleId);
      if (!row) throw NotFoundError.implication(priorRoleId, impliedRoleId);
      await this.repository.deleteImplication(em, row);
      await this.accessEpoch?.bump(em);
    });
  }

  /** Direct implications, grouped by prior role (one prior role when given). */
  async listImplications(priorRoleId?: string): Promise<{ prior: Role; implied: Role[] }[]> {
    const em = this.store.reader();
    if (priorRoleId) await this.getRole(priorRoleId, em);
    const rows = await this.repository.implications(em, priorRoleId);
    const roleIds = [...new Set(rows.flatMap((row) => [row.priorRoleId, row.impliedRoleId]))];
    const roles = new Map((await this.repository.listRoles(em, { ids: roleIds })).map((role) => [role.id, role]));
    const grouped = new Map<string, { prior: Role; implied: Role[] }>();
    for (const row of rows) {
      const prior = roles.get(row.priorRoleId);
      const implied = roles.get(row.impliedRoleId);
      if (!prior || !implied) continue;
      const entry = grouped.get(prior.id) ?? { prior, implied: [] };
      entry.implied.push(implied);
      grouped.set(prior.id, entry);
    }
    if (priorRoleId && !grouped.has(priorRoleId)) {
      return [{ prior: await this.getRole(priorRoleId, em), implied: [] }];
    }
    return [...grouped.values()];
  }

  // ---- grants ----------------------------------------------------------------------------

  async grant(grant: Grant): Promise<void> {
    await this.store.transaction(async (em) => {
      await this.assertGrantParties(em, grant, true);
      if ((await this.findGrant(em, grant)) === null) {
        await this.repository.insertAssignment(em, { ...grant, inherited: grant.inherited ?? false });
      }
    });
  }

  /** A grant made in the caller's transaction `em` (a federated login's provisioned projects); one already there is kept. */
  async grantIn(em: EntityManager, grant: Grant): Promise<void> {
    await this.assertGrantParties(em, grant, true);
    if ((await this.findGrant(em, grant)) === null) await this.repository.insertAssignment(em, { ...grant, inherited: grant.inherited ?? false });
  }

  async checkGrant(grant: Grant): Promise<void> {
    const em = this.store.reader();
    await this.assertGrantParties(em, grant);
    if ((await this.findGrant(em, grant)) === null) throw missingGrant(grant);
  }

  async revokeGrant(grant: Grant): Promise<void> {
    await this.store.transaction(async (em) => {
      // One removal of a user's grants at a time: two concurrent removals of the last two roles
      // would each still see the other's (READ COMMITTED) and neither would record the event.
      if (grant.actorType === 'user') await this.repository.lockUserGrants(em, grant.actorId);
      await this.assertGrantParties(em, grant);
      const row = await this.findGrant(em, grant);
      if (!row) throw missingGrant(grant);
      await this.repository.deleteAssignment(em, row);
      // As Keystone 22: no revocation while roles remain. A token's roles are computed when it is
      // validated, and the commit drops every cached validation, so the user's tokens carry what is
      // left from the next request on. When nothing is left on the project, its tokens go for good
      // (validation would refuse them anyway; the event keeps them refused if a role comes back, and
      // on a node that answers from its last known validations while the database is unreachable).
      // A domain event is not used: it would also match every token of a user of that domain. Only a
      // user's direct project grant is checked; other removals that leave nothing (group, inherited,
      // domain) write no event, and their tokens are refused while nothing is left. Other nodes learn
      // of every removal through the access epoch.
      let revoked = false;
      if (grant.actorType === 'user' && grant.targetType === 'project' && !grant.inherited) {
        const left = await this.computeEffectiveRoles(grant.actorId, 'project', grant.targetId, em);
        if (left.length === 0 && this.revocations) {
          await this.revocations.record(em, { userId: grant.actorId, projectId: grant.targetId });
          revoked = true;
        }
      }
      // The event reaches the other nodes (and their revocation poll) itself; without one the epoch
      // does. Last: the counter's row is locked until the commit.
      if (!revoked) await this.accessEpoch?.bump(em);
    });
  }

  /** Roles granted directly to the actor on the target (GET …/users/{u}/roles). */
  async listGrantedRoles(actorType: ActorType, actorId: string, targetType: TargetType, targetId: string, inherited = false): Promise<Role[]> {
    const em = this.store.reader();
    await this.assertActor(em, actorType, actorId);
    await this.assertTarget(em, targetType, targetId);
    const rows = await this.repository.findAssignments(em, {
      actors: [{ type: actorType, ids: [actorId] }],
      targets: [{ type: targetType, ids: [targetId], inherited }],
    });
    if (!rows.length) return [];
    return this.repository.listRoles(em, { ids: rows.map((row) => row.roleId) });
  }

  private findGrant(em: EntityManager, grant: Grant): Promise<AssignmentRow | null> {
    return this.repository.findAssignment(em, {
      actorType: grant.actorType,
      actorId: grant.actorId,
      targetType: grant.targetType,
      targetId: grant.targetId,
      roleId: grant.roleId,
      inherited: grant.inherited ?? false,
    });
  }

  /**
   * The role, actor and target exist. On a new grant (`granting`), as Keystone 22: a domain-specific
   * role goes to a project only in the role's domain, to any domain, and never to the system. A
   * check or a removal of such a grant is only a missing grant (404), as there.
   */
  private async assertGrantParties(em: EntityManager, grant: Grant, granting = false): Promise<void> {
    const role = await this.getRole(grant.roleId, em);
    await this.assertActor(em, grant.actorType, grant.actorId);
    const target = await this.assertTarget(em, grant.targetType, grant.targetId);
    if (!granting || !role.domainId) return;
    if (grant.targetType === 'system') {
      throw new ValidationError(`Role ${role.id} is a domain-specific role. Unable to use a domain-specific role in a system assignment.`);
    }
    if (grant.targetType === 'project' && target && target.domainId !== role.domainId) {
      throw new ForbiddenError(`Project ${target.id} must be in the same domain as the role ${role.id} being assigned.`);
    }
  }

  private async assertActor(em: EntityManager, actorType: ActorType, actorId: string): Promise<void> {
    if (actorType === 'user') await this.identity.getUser(actorId, em);
    else await this.identity.getGroup(actorId, em);
  }

  private async assertTarget(em: EntityManager, targetType: TargetType, targetId: string) {
    if (targetType === 'system') return null;
    return targetType === 'domain' ? this.resources.getDomain(targetId, em) : this.resources.getProject(targetId, em);
  }

  // ---- listing and effective roles -------------------------------------------------------

  /** GET /v3/role_assignments: direct grants, or the effective ones a token would carry. */
  async listAssignments(filter: AssignmentFilter): Promise<AssignmentEntry[]> {
    checkAssignmentFilter(filter);
    if (!filter.effective) return this.directAssignments(this.store.reader(), filter);
    // Without a page size the whole listing is one page (no spread: it may hold 100k+ entries).
    const { value: page } = await this.effectivePages(filter, undefined).next();
    return page?.rows ?? [];
  }

  /**
   * listAssignments read `pageSize` grants at a time (keyset pages): the pages in order are its
   * answer. An effective page is the expansion of a page of grants (group members, inheritance,
   * implied roles), so a page may hold more or fewer entries than `pageSize`.
   */
  async assignmentPages(filter: AssignmentFilter, pageSize: number): Promise<AsyncGenerator<Page<AssignmentEntry>, void, undefined>> {
    checkAssignmentFilter(filter);
    if (filter.effective) return this.effectivePages(filter, pageSize);
    const query = await this.directQuery(filter);
    return pagesOf<AssignmentRow, AssignmentEntry>(pageSize, (page) => this.repository.findAssignments(this.store.reader(), query, page), (rows) => rows.map(directEntry));
  }

  private async directAssignments(em: EntityManager, filter: AssignmentFilter): Promise<AssignmentEntry[]> {
    const rows = await this.repository.findAssignments(em, await this.directQuery(filter));
    return rows.map(directEntry);
  }

  private async directQuery(filter: AssignmentFilter): Promise<AssignmentQuery> {
    const query: AssignmentQuery = {};
    if (filter.userId) query.actors = [{ type: 'user', ids: [filter.userId] }];
    if (filter.groupId) query.actors = [{ type: 'group', ids: [filter.groupId] }];
    if (filter.roleId) query.roleIds = [filter.roleId];
    if (filter.projectId) {
      const ids = [filter.projectId];
      if (filter.includeSubtree) ids.push(...(await this.resources.descendants(filter.projectId)).map((project) => project.id));
      query.targets = [{ type: 'project', ids }];
    } else if (filter.domainId) {
      query.targets = [{ type: 'domain', ids: [filter.domainId] }];
    } else if (filter.system) {
      query.targets = [{ type: 'system', ids: [SYSTEM_TARGET_ID] }];
    }
    if (filter.inheritedOnly) query.inherited = true;
    return query;
  }

  /**
   * The effective listing, expanded one page of grants at a time (`pageSize` undefined: all grants
   * in one page). Group grants become one entry per member, inherited grants land on the projects
   * below their target, implied roles are added and domain-specific roles dropped (only what they
   * imply counts), as Keystone's effective listing does.
   *
   * Entries repeat only within one grant source (actor and target: the de-duplication key names
   * both), and ASSIGNMENT_ORDER keeps a source's grants together, so duplicates are dropped with a
   * set that is emptied when the source changes: memory stays bounded by a page, not the list.
   */
  private async *effectivePages(filter: AssignmentFilter, pageSize: number | undefined): AsyncGenerator<Page<AssignmentEntry>, void, undefined> {
    const { query, projectsInScope } = await this.effectiveQuery(this.store.reader(), filter);
    const implications = await this.implicationMap(this.store.reader());
    const duplicates = new SourceDuplicates();
    const expand = async (rows: AssignmentRow[]): Promise<AssignmentEntry[]> => {
      const em = this.store.reader();
      const placed = await this.placeInherited(this.perUser(rows, await this.identity.membersOfGroups(groupIdsOf(rows)), filter), projectsInScope);
      const expanded = await this.expandImplied(em, placed, implications);
      // Keystone 22's effective listing has no system entries (even with scope.system=all).
      return expanded.filter(
        (entry) => entry.targetType !== 'system' && (!filter.roleId || entry.roleId === filter.roleId) && duplicates.isFirst(entry),
      );
    };
    if (pageSize === undefined) {
      yield { rows: await expand(await this.repository.findAssignments(this.store.reader(), query)), last: true };
      return;
    }
    yield* pagesOf<AssignmentRow, AssignmentEntry>(pageSize, (page) => this.repository.findAssignments(this.store.reader(), query, page), expand);
  }

  /** The grants an effective listing starts from, and the projects it is narrowed to (scope.project.id). */
  private async effectiveQuery(em: EntityManager, filter: AssignmentFilter): Promise<{ query: AssignmentQuery; projectsInScope?: Set<string> }> {
    const query: AssignmentQuery = {};
    if (filter.userId) {
      const groupIds = await this.identity.groupIdsOfUser(filter.userId);
      query.actors = [{ type: 'user', ids: [filter.userId] }];
      if (groupIds.length) query.actors.push({ type: 'group', ids: groupIds });
    }
    if (filter.projectId) {
      const project = await this.resources.getProject(filter.projectId, em);
      const subtree = filter.includeSubtree ? await this.resources.descendants(project.id) : [];
      const projectsInScope = new Set([project.id, ...subtree.map((row) => row.id)]);
      const ancestors = await this.resources.ancestors(project);
      query.targets = [
        { type: 'project', ids: [...projectsInScope] },
        { type: 'project', ids: ancestors.filter((row) => !row.isDomain).map((row) => row.id), inherited: true },
        { type: 'domain', ids: project.domainId ? [project.domainId] : [], inherited: true },
      ];
      return { query, projectsInScope };
    }
    if (filter.domainId) query.targets = [{ type: 'domain', ids: [filter.domainId] }];
    else if (filter.system) query.targets = [{ type: 'system', ids: [SYSTEM_TARGET_ID] }];
    return { query };
  }

  /** Group grants become one entry per member (only the filtered user's, with user.id). */
  private perUser(rows: AssignmentRow[], members: Map<string, string[]>, filter: AssignmentFilter): AssignmentEntry[] {
    const entries: AssignmentEntry[] = [];
    for (const row of rows) {
      const source = rowGrant(row);
      if (row.actorType === 'user') {
        entries.push({ ...source, source });
        continue;
      }
      for (const userId of members.get(row.actorId) ?? []) {
        if (filter.userId && userId !== filter.userId) continue;
        entries.push({ ...source, actorType: 'user', actorId: userId, viaGroupId: row.actorId, source });
      }
    }
    return entries;
  }

  /** Inherited grants land on the projects below their target (within `projectsInScope` when given). */
  private async placeInherited(entries: AssignmentEntry[], projectsInScope: Set<string> | undefined): Promise<AssignmentEntry[]> {
    const placed: AssignmentEntry[] = [];
    // Many entries of a page share a target (a group's members, a domain's grants): one read each.
    const projectsBelow = new Map<string, Promise<{ id: string }[]>>();
    for (const entry of entries) {
      if (!entry.inherited) {
        placed.push(entry);
        continue;
      }
      const key = `${entry.targetType} ${entry.targetId}`;
      let projects = projectsBelow.get(key);
      if (!projects) {
        projects = entry.targetType === 'domain' ? this.resources.listProjects({ domainId: entry.targetId }) : this.resources.descendants(entry.targetId);
        projectsBelow.set(key, projects);
      }
      for (const project of await projects) {
        if (projectsInScope && !projectsInScope.has(project.id)) continue;
        // Keystone 22 keeps the inherited mark on the project entry ("OS-INHERIT:inherited_to").
        placed.push({ ...entry, targetType: 'project', targetId: project.id, inherited: true });
      }
    }
    return placed;
  }

  private async expandImplied(em: EntityManager, entries: AssignmentEntry[], implications: Map<string, string[]>): Promise<AssignmentEntry[]> {
    const roleIds = new Set(entries.map((entry) => entry.roleId));
    for (const implied of implications.values()) for (const id of implied) roleIds.add(id);
    const roles = new Map((await this.repository.listRoles(em, { ids: [...roleIds] })).map((role) => [role.id, role]));
    const result: AssignmentEntry[] = [];
    for (const entry of entries) {
      const role = roles.get(entry.roleId);
      if (role && !role.domainId) result.push(entry);
      // Walk the implication graph; Keystone allows cycles, so remember what was visited.
      const visited = new Set([entry.roleId]);
      const queue = [entry.roleId];
      while (queue.length) {
        const priorRoleId = queue.shift() as string;
        for (const impliedId of implications.get(priorRoleId) ?? []) {
          if (visited.has(impliedId)) continue;
          visited.add(impliedId);
          queue.push(impliedId);
          if (roles.get(impliedId)?.domainId) continue;
          result.push({ ...entry, roleId: impliedId, priorRoleId });
        }
      }
    }
    return result;
  }

  private async implicationMap(em: EntityManager): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>();
    for (const row of await this.repository.implications(em)) {
      const implied = map.get(row.priorRoleId);
      if (implied) implied.push(row.impliedRoleId);
      else map.set(row.priorRoleId, [row.impliedRoleId]);
    }
    return map;
  }

  /**
   * The roles a token scoped to the target carries for this user: direct and group grants, grants
   * inherited from the project's domain and ancestors, implied roles; never domain-specific roles.
   */
  async effectiveRoles(userId: string, targetType: TargetType, targetId: string): Promise<Role[]> {
    return this.roleCache.get(`${userId} ${targetType} ${targetId}`, async () =>
      (await this.computeEffectiveRoles(userId, targetType, targetId)).map((role) => cacheRow(role)),
    );
  }

  /**
   * The roles `roleIds` name with every role they imply, in the order of the first found (Keystone's
   * add_implied_roles); domain-specific roles are left out, as from a token.
   */
  async withImpliedRoles(roleIds: readonly string[], em: EntityManager = this.store.reader()): Promise<Role[]> {
    const implications = await this.implicationMap(em);
    const ordered: string[] = [];
    const queue = [...roleIds];
    while (queue.length) {
      const roleId = queue.shift() as string;
      if (ordered.includes(roleId)) continue;
      ordered.push(roleId);
      queue.push(...(implications.get(roleId) ?? []));
    }
    const roles = await this.repository.listRoles(em, { ids: ordered });
    const byId = new Map(roles.map((role) => [role.id, role]));
    return ordered.map((id) => byId.get(id)).filter((role): role is Role => role !== undefined && !role.domainId);
  }

  /** `em`: a transaction whose own changes count (the reader otherwise). */
  private async computeEffectiveRoles(userId: string, targetType: TargetType, targetId: string, em: EntityManager = this.store.reader()): Promise<Role[]> {
    const groupIds = await this.identity.groupIdsOfUser(userId, em);
    const actors: AssignmentQuery['actors'] = [{ type: 'user', ids: [userId] }];
    if (groupIds.length) actors.push({ type: 'group', ids: groupIds });
    return this.effectiveRolesOfActors(actors, targetType, targetId, em);
  }

  /**
   * A federated token's group roles (Keystone's get_roles_for_groups): what these groups hold on
   * the project (inherited grants included) or domain, with implied roles; none without groups.
   * Not cached: the validated token that holds them is.
   */
  async effectiveRolesOfGroups(groupIds: readonly string[], targetType: 'project' | 'domain', targetId: string): Promise<Role[]> {
    if (!groupIds.length) return [];
    return this.effectiveRolesOfActors([{ type: 'group', ids: [...groupIds] }], targetType, targetId, this.store.reader());
  }

  /** The roles granted on the system to these actors directly (Keystone's list_system_grants_for_*). */
  async systemGrantRoles(actorType: ActorType, actorIds: readonly string[]): Promise<Role[]> {
    if (!actorIds.length) return [];
    const em = this.store.reader();
    const rows = await this.repository.findAssignments(em, { actors: [{ type: actorType, ids: [...actorIds] }], targets: [{ type: 'system', ids: [SYSTEM_TARGET_ID] }] });
    if (!rows.length) return [];
    return this.repository.listRoles(em, { ids: [...new Set(rows.map((row) => row.roleId))] });
  }

  /**
   * Projects (or domains) on which these groups hold any role (Keystone's list_projects_for_groups
   * and list_domains_for_groups): direct grants, and for projects those inherited from a domain or
   * a parent project.
   */
  async targetsOfGroups(groupIds: readonly string[], targetType: 'project' | 'domain'): Promise<string[]> {
    if (!groupIds.length) return [];
    const rows = await this.repository.findAssignments(this.store.reader(), { actors: [{ type: 'group', ids: [...groupIds] }] });
    // Inherited grants land on the projects below their target, as in the effective listing.
    const placed = await this.placeInherited(rows.map(directEntry), undefined);
    return [...new Set(placed.filter((entry) => entry.targetType === targetType).map((entry) => entry.targetId))];
  }

  private async effectiveRolesOfActors(actors: NonNullable<AssignmentQuery['actors']>, targetType: TargetType, targetId: string, em: EntityManager): Promise<Role[]> {
    let targets: NonNullable<AssignmentQuery['targets']>;
    if (targetType === 'project') {
      const project = await this.resources.findAny(targetId, em);
      if (!project || project.isDomain) return [];
      const ancestors = await this.resources.ancestors(project, em);
      targets = [{ type: 'project', ids: [targetId], inherited: false }];
      const parentProjects = ancestors.filter((row) => !row.isDomain).map((row) => row.id);
      if (parentProjects.length) targets.push({ type: 'project', ids: parentProjects, inherited: true });
      if (project.domainId) targets.push({ type: 'domain', ids: [project.domainId], inherited: true });
    } else {
      targets = [{ type: targetType, ids: [targetId], inherited: false }];
    }
    const rows = await this.repository.findAssignments(em, { actors, targets });
    if (!rows.length) return [];
    const implications = await this.implicationMap(em);
    const roleIds = new Set<string>();
    const queue = rows.map((row) => row.roleId);
    while (queue.length) {
      const roleId = queue.shift() as string;
      if (roleIds.has(roleId)) continue;
      roleIds.add(roleId);
      queue.push(...(implications.get(roleId) ?? []));
    }
    const roles = await this.repository.listRoles(em, { ids: [...roleIds] });
    return roles.filter((role) => !role.domainId);
  }

  /** Projects (or domains) on which the user holds any effective role. */
  async targetsOfUser(userId: string, targetType: 'project' | 'domain'): Promise<string[]> {
    const entries = await this.listAssignments({ userId, effective: true });
    return [...new Set(entries.filter((entry) => entry.targetType === targetType).map((entry) => entry.targetId))];
  }

  /** Whether the user holds any role on the system scope. */
  async hasSystemRole(userId: string): Promise<boolean> {
    return (await this.effectiveRoles(userId, 'system', SYSTEM_TARGET_ID)).length > 0;
  }
}

/** Keystone's refusals of contradictory role_assignments filters. */
function checkAssignmentFilter(filter: AssignmentFilter): void {
  if (filter.projectId && filter.domainId) throw new ValidationError('Specify a domain or project, not both');
  if (filter.system && (filter.projectId || filter.domainId)) {
    throw new ValidationError(`Specify system or ${filter.projectId ? 'project' : 'domain'}, not both`);
  }
  if (filter.userId && filter.groupId) throw new ValidationError('Specify a user or group, not both');
  if (filter.effective && filter.groupId) {
    throw new ValidationError('Combining effective and group filter will always result in an empty list.');
  }
  if (filter.includeSubtree && !filter.projectId) {
    throw new ValidationError('scope.project.id must be specified if include_subtree is also specified');
  }
}

/** A direct assignment's entry: the grant is its own source. */
function directEntry(row: AssignmentRow): AssignmentEntry {
  const source = { ...rowGrant(row) };
  return { ...source, source };
}

/**
 * A row's grant. A class, not an object literal: V8 tenures a literal's allocation site when one
 * young-generation collection finds a page of them in use, and every later grant of a long
 * listing would then be old-generation garbage (see JsonNode in http/render.ts).
 */
class RowGrant implements Grant {
  constructor(
    readonly actorType: ActorType,
    readonly actorId: string,
    readonly targetType: TargetType,
    readonly targetId: string,
    readonly roleId: string,
    readonly inherited: boolean,
  ) {}
}

function rowGrant(row: AssignmentRow): Grant & { inherited: boolean } {
  return new RowGrant(row.actorType as ActorType, row.actorId, row.targetType as TargetType, row.targetId, row.roleId, row.inherited);
}

function groupIdsOf(rows: AssignmentRow[]): string[] {
  return [...new Set(rows.filter((row) => row.actorType === 'group').map((row) => row.actorId))];
}

/**
 * Drops repeated effective entries of one grant source (see effectivePages). Most sources give a
 * few entries (a grant and the roles it implies): those are compared field by field, and only a
 * source with many (a group's members, an inherited grant's projects) gets a set of keys. A key
 * string per entry, kept by this long-lived object, was V8's largest direct old-generation
 * allocation in a 200k-entry listing (bench/README.md).
 */
class SourceDuplicates {
  /** Entries of one source past which they are looked up by key. */
  private static readonly FEW = 16;
  private source: Grant | undefined;
  private readonly entries: AssignmentEntry[] = [];
  private keys: Set<string> | undefined;

  isFirst(entry: AssignmentEntry): boolean {
    if (!this.source || !sameSource(this.source, entry.source)) {
      this.source = entry.source;
      this.entries.length = 0;
      this.keys = undefined;
    }
    if (this.keys) {
      const key = duplicateKey(entry);
      if (this.keys.has(key)) return false;
      this.keys.add(key);
      return true;
    }
    if (this.entries.some((seen) => sameEntry(seen, entry))) return false;
    this.entries.push(entry);
    if (this.entries.length > SourceDuplicates.FEW) {
      this.keys = new Set(this.entries.map(duplicateKey));
      this.entries.length = 0;
    }
    return true;
  }
}

/** Grant sources are the same actor on the same target. */
function sameSource(a: Grant, b: Grant): boolean {
  return a.targetId === b.targetId && a.actorId === b.actorId && a.targetType === b.targetType && a.actorType === b.actorType;
}

/** Entries of one source repeat when these agree. */
function sameEntry(a: AssignmentEntry, b: AssignmentEntry): boolean {
  return (
    a.actorId === b.actorId &&
    a.targetType === b.targetType &&
    a.targetId === b.targetId &&
    a.roleId === b.roleId &&
    (a.priorRoleId ?? '') === (b.priorRoleId ?? '')
  );
}

function duplicateKey(entry: AssignmentEntry): string {
  return [entry.actorId, entry.targetType, entry.targetId, entry.roleId, entry.priorRoleId ?? ''].join('\u0000');
}

function duplicateRole(name: string, domainId: string | null | undefined): ConflictError {
  return ConflictError.duplicateName('role', name, domainId || undefined);
}

function missingGrant(grant: Grant): NotFoundError {
  // Keystone names the system target 'system', not its 'all'.
  const target = grant.targetType === 'system' ? 'system' : grant.targetId;
  return new NotFoundError(
    `Could not find role assignment with role: ${grant.roleId}, user or group: ${grant.actorId}, project, domain, or system: ${target}.`,
  );
}
