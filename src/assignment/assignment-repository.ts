import { raw } from '@mikro-orm/core';
import type { EntityManager } from '../store/database.ts';
import {
  AssignmentEntity,
  ImpliedRoleEntity,
  RoleEntity,
  type AssignmentRow,
  type ImpliedRoleRow,
  type RoleRow,
} from '../store/entities.ts';
import { stringConditions, type StringMatch } from '../store/filters.ts';
import { after, orderByOf, type PageRequest, type SortKey } from '../store/keyset.ts';
import { plainRows } from '../store/plain-rows.ts';

export type ActorType = 'user' | 'group';
export type TargetType = 'project' | 'domain' | 'system';
export const SYSTEM_TARGET_ID = 'all';

export interface RoleQuery {
  ids?: string[];
  name?: StringMatch[];
  /** null: global roles only. */
  domainId?: string | null;
}

export interface AssignmentQuery {
  actors?: { type: ActorType; ids: string[] }[];
  roleIds?: string[];
  targets?: { type: TargetType; ids: string[]; inherited?: boolean }[];
  inherited?: boolean;
}

/**
 * The order of assignment lists: by target, users before groups, then actor and role; `inherited`
 * last makes it total (it is the last column of the primary key).
 */
export const ASSIGNMENT_ORDER: readonly SortKey<AssignmentRow>[] = [
  { property: 'targetType', column: 'target_type', direction: 'asc' },
  { property: 'targetId', column: 'target_id', direction: 'asc' },
  { property: 'actorType', column: 'actor_type', direction: 'desc' },
  { property: 'actorId', column: 'actor_id', direction: 'asc' },
  { property: 'roleId', column: 'role_id', direction: 'asc' },
  { property: 'inherited', column: 'inherited', direction: 'asc' },
];

/** Storage of roles, role implications and role assignments. */
export class AssignmentRepository {
  // ---- roles -----------------------------------------------------------------------------

  findRole(em: EntityManager, id: string): Promise<RoleRow | null> {
    return em.findOne(RoleEntity, { id });
  }

  listRoles(em: EntityManager, query: RoleQuery): Promise<RoleRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.ids) and.push({ id: { $in: query.ids } });
    if (query.name) and.push(...stringConditions('name', query.name));
    if (query.domainId !== undefined) and.push({ domainId: query.domainId });
    // Creation order, as Keystone lists roles (bootstrap's reader, member, admin first); the
    // position column is database-generated and not part of the entity.
    return em.find(RoleEntity, and.length ? { $and: and } : {}, { orderBy: { [raw('position')]: 'asc' } });
  }

  /** Writes the new role now (a duplicate name fails here, inside the caller's transaction). */
  async insertRole(em: EntityManager, row: RoleRow): Promise<RoleRow> {
    const role = em.create(RoleEntity, row);
    await em.flush();
    return role;
  }

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes the role; its assignments and implications go by foreign-key cascade. */
  async deleteRole(em: EntityManager, row: RoleRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }

  // ---- implied roles ---------------------------------------------------------------------

  implications(em: EntityManager, priorRoleId?: string): Promise<ImpliedRoleRow[]> {
    return em.find(ImpliedRoleEntity, priorRoleId ? { priorRoleId } : {}, { orderBy: { priorRoleId: 'asc', impliedRoleId: 'asc' } });
  }

  findImplication(em: EntityManager, priorRoleId: string, impliedRoleId: string): Promise<ImpliedRoleRow | null> {
    return em.findOne(ImpliedRoleEntity, { priorRoleId, impliedRoleId });
  }

  async insertImplication(em: EntityManager, row: ImpliedRoleRow): Promise<void> {
    em.create(ImpliedRoleEntity, row);
    await em.flush();
  }

  async deleteImplication(em: EntityManager, row: ImpliedRoleRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }

  // ---- assignments -----------------------------------------------------------------------

  /** The one assignment with exactly these columns (all six form the primary key). */
  findAssignment(em: EntityManager, key: AssignmentRow): Promise<AssignmentRow | null> {
    return em.findOne(AssignmentEntity, key);
  }

  async insertAssignment(em: EntityManager, row: AssignmentRow): Promise<void> {
    em.create(AssignmentEntity, row);
    await em.flush();
  }

  async deleteAssignment(em: EntityManager, row: AssignmentRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }

  /**
   * Holds the user's grant lock until the transaction ends: removals of one user's grants run one
   * at a time.
   */
  async lockUserGrants(em: EntityManager, userId: string): Promise<void> {
    await em.execute('select pg_advisory_xact_lock(hashtext(?))', [userId]);
  }

  /** The assignments matching `query` in ASSIGNMENT_ORDER; with `page`, only that page of them. */
  findAssignments(em: EntityManager, query: AssignmentQuery, page?: PageRequest<AssignmentRow>): Promise<AssignmentRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.actors) {
      and.push({ $or: query.actors.map((actor) => ({ actorType: actor.type, actorId: { $in: actor.ids } })) });
    }
    if (query.roleIds) and.push({ roleId: { $in: query.roleIds } });
    if (query.targets) {
      and.push({
        $or: query.targets.map((target) => ({
          targetType: target.type,
          targetId: { $in: target.ids },
          ...(target.inherited === undefined ? {} : { inherited: target.inherited }),
        })),
      });
    }
    if (query.inherited !== undefined) and.push({ inherited: query.inherited });
    if (page?.after) and.push(after(ASSIGNMENT_ORDER, page.after));
    return plainRows<AssignmentRow>(em, AssignmentEntity, and.length ? { $and: and } : {}, { orderBy: orderByOf(ASSIGNMENT_ORDER), limit: page?.limit });
  }
}
