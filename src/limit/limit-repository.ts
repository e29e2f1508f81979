import { raw } from '@mikro-orm/core';
import type { EntityManager } from '../store/database.ts';
import {
  LimitEntity,
  ProjectEntity,
  RegionEntity,
  RegisteredLimitEntity,
  ServiceEntity,
  type LimitRow,
  type ProjectRow,
  type RegisteredLimitRow,
} from '../store/entities.ts';

export interface RegisteredLimitQuery {
  serviceId?: string;
  regionId?: string;
  resourceName?: string;
}

export interface LimitQuery extends RegisteredLimitQuery {
  projectId?: string;
  domainId?: string;
  /** Only the limits of these projects, or of this domain (a domain-scoped caller's view). */
  within?: { projectIds: string[]; domainId: string };
}

/** What a registered limit is known by, and what a limit refers to it by. */
export interface ResourceKey {
  serviceId: string;
  /** null or absent: every region. */
  regionId?: string | null | undefined;
  resourceName: string;
}

/** Storage of registered limits and limits, and the existence checks they need. */
export class LimitRepository {
  // ---- what limits refer to --------------------------------------------------------------

  async serviceExists(em: EntityManager, id: string): Promise<boolean> {
    return (await em.count(ServiceEntity, { id })) > 0;
  }

  async regionExists(em: EntityManager, id: string): Promise<boolean> {
    return (await em.count(RegionEntity, { id })) > 0;
  }

  /** A project or a domain (one table, as in Keystone). */
  findProject(em: EntityManager, id: string): Promise<ProjectRow | null> {
    return em.findOne(ProjectEntity, { id });
  }

  async projectIdsInDomain(em: EntityManager, domainId: string): Promise<string[]> {
    const rows = await em.find(ProjectEntity, { domainId, isDomain: false }, { fields: ['id'] });
    return rows.map((row) => row.id);
  }

  // ---- registered limits -----------------------------------------------------------------

  findRegisteredLimit(em: EntityManager, id: string): Promise<RegisteredLimitRow | null> {
    return em.findOne(RegisteredLimitEntity, { id });
  }

  findRegisteredLimitFor(em: EntityManager, key: ResourceKey): Promise<RegisteredLimitRow | null> {
    return em.findOne(RegisteredLimitEntity, { serviceId: key.serviceId, regionId: key.regionId ?? null, resourceName: key.resourceName });
  }

  /** In the order they were made, as Keystone lists them (the database-generated position column). */
  listRegisteredLimits(em: EntityManager, query: RegisteredLimitQuery): Promise<RegisteredLimitRow[]> {
    const where: Record<string, unknown> = {};
    if (query.serviceId !== undefined) where.serviceId = query.serviceId;
    if (query.regionId !== undefined) where.regionId = query.regionId;
    if (query.resourceName !== undefined) where.resourceName = query.resourceName;
    return em.find(RegisteredLimitEntity, where, { orderBy: { [raw('position')]: 'asc' } });
  }

  /** Writes the new rows now (a duplicate fails here, inside the caller's transaction). */
  async insertRegisteredLimits(em: EntityManager, rows: RegisteredLimitRow[]): Promise<RegisteredLimitRow[]> {
    const created = rows.map((row) => em.create(RegisteredLimitEntity, row));
    await em.flush();
    return created;
  }

  // ---- limits ----------------------------------------------------------------------------

  findLimit(em: EntityManager, id: string): Promise<LimitRow | null> {
    return em.findOne(LimitEntity, { id });
  }

  /** How many limits refer to this registered limit's (service, region, resource). */
  countLimitsOf(em: EntityManager, key: ResourceKey): Promise<number> {
    return em.count(LimitEntity, { serviceId: key.serviceId, regionId: key.regionId ?? null, resourceName: key.resourceName });
  }

  /** In the order they were made, as Keystone lists them. */
  listLimits(em: EntityManager, query: LimitQuery): Promise<LimitRow[]> {
    const where: Record<string, unknown> = {};
    if (query.serviceId !== undefined) where.serviceId = query.serviceId;
    if (query.regionId !== undefined) where.regionId = query.regionId;
    if (query.resourceName !== undefined) where.resourceName = query.resourceName;
    if (query.projectId !== undefined) where.projectId = query.projectId;
    if (query.domainId !== undefined) where.domainId = query.domainId;
    if (query.within) where.$or = [{ projectId: { $in: query.within.projectIds } }, { domainId: query.within.domainId }];
    return em.find(LimitEntity, where, { orderBy: { [raw('position')]: 'asc' } });
  }

  async insertLimits(em: EntityManager, rows: LimitRow[]): Promise<LimitRow[]> {
    const created = rows.map((row) => em.create(LimitEntity, row));
    await em.flush();
    return created;
  }

  // ---- any row ---------------------------------------------------------------------------

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  async delete(em: EntityManager, row: RegisteredLimitRow | LimitRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }
}
