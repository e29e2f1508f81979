import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { LimitRow, RegisteredLimitRow } from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { LimitRepository, type LimitQuery, type RegisteredLimitQuery, type ResourceKey } from './limit-repository.ts';

export type RegisteredLimit = RegisteredLimitRow;
export type Limit = LimitRow;

export interface RegisteredLimitInput {
  serviceId: string;
  regionId?: string | null | undefined;
  resourceName: string;
  defaultLimit: number;
  description?: string | null | undefined;
}

export type RegisteredLimitPatch = Partial<RegisteredLimitInput>;

/** Exactly one of projectId and domainId (the HTTP schema says so, as Keystone's does). */
export interface LimitInput {
  projectId?: string | undefined;
  domainId?: string | undefined;
  serviceId: string;
  regionId?: string | undefined;
  resourceName: string;
  resourceLimit: number;
  description?: string | null | undefined;
}

export interface LimitPatch {
  resourceLimit?: number | undefined;
  description?: string | null | undefined;
}

/** Whose limits a caller sees in a list (Keystone filters the list by the token's scope). */
export type LimitViewer = { type: 'system' } | { type: 'domain'; domainId: string } | { type: 'project'; projectId: string } | { type: 'none' };

/** Keystone's enforcement models; Keystone's default, and the only one here, is flat. */
export const FLAT_MODEL = {
  name: 'flat',
  description: 'Limit enforcement and validation does not take project hierarchy into consideration.',
} as const;

const REGISTERED = 'registered_limit';
const LIMIT = 'limit';

/** Keystone's unified limits: registered limits (defaults per service and resource) and project or domain limits. */
export class LimitService {
  private readonly repository = new LimitRepository();

  constructor(private readonly store: Store) {}

  get model(): typeof FLAT_MODEL {
    return FLAT_MODEL;
  }

  // ---- registered limits -----------------------------------------------------------------

  async getRegisteredLimit(id: string, em: EntityManager = this.store.reader()): Promise<RegisteredLimit> {
    const row = await this.repository.findRegisteredLimit(em, id);
    if (!row) throw new NotFoundError(`Could not find registered limit for ${id}.`);
    return row;
  }

  listRegisteredLimits(filter: RegisteredLimitQuery): Promise<RegisteredLimit[]> {
    return this.repository.listRegisteredLimits(this.store.reader(), filter);
  }

  /** All or none: one bad item (unknown service or region, a duplicate) and nothing is written. */
  createRegisteredLimits(inputs: RegisteredLimitInput[]): Promise<RegisteredLimit[]> {
    return this.store
      .transaction(async (em) => {
        for (const input of inputs) await this.assertReferencesExist(em, REGISTERED, input);
        const rows = inputs.map((input) => ({
          id: newId(),
          serviceId: input.serviceId,
          regionId: input.regionId ?? null,
          resourceName: input.resourceName,
          defaultLimit: input.defaultLimit,
          description: input.description ?? null,
        }));
        const seen = new Set<string>();
        for (const row of rows) {
          const key = keyString(row);
          if (seen.has(key) || (await this.repository.findRegisteredLimitFor(em, row))) throw duplicate(REGISTERED);
          seen.add(key);
        }
        return this.repository.insertRegisteredLimits(em, rows);
      })
      .catch(conflictOnUnique(REGISTERED));
  }

  /** Refused (403) while any limit refers to it, whatever the change: Keystone's rule. */
  updateRegisteredLimit(id: string, patch: RegisteredLimitPatch): Promise<RegisteredLimit> {
    return this.store
      .transaction(async (em) => {
        await this.assertReferencesExist(em, REGISTERED, patch);
        const row = await this.getRegisteredLimit(id, em);
        await this.refuseWhileReferenced(em, row);
        const next: ResourceKey = {
          serviceId: patch.serviceId ?? row.serviceId,
          regionId: patch.regionId === undefined ? row.regionId : patch.regionId,
          resourceName: patch.resourceName ?? row.resourceName,
        };
        if (keyString(next) !== keyString(row)) {
          const other = await this.repository.findRegisteredLimitFor(em, next);
          if (other && other.id !== row.id) throw duplicate(REGISTERED);
        }
        row.serviceId = next.serviceId;
        row.regionId = next.regionId;
        row.resourceName = next.resourceName;
        if (patch.defaultLimit !== undefined) row.defaultLimit = patch.defaultLimit;
        if (patch.description !== undefined) row.description = patch.description;
        await this.repository.saveChanges(em);
        return row;
      })
      .catch(conflictOnUnique(REGISTERED));
  }

  deleteRegisteredLimit(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getRegisteredLimit(id, em);
      await this.refuseWhileReferenced(em, row);
      await this.repository.delete(em, row);
    });
  }

  private async refuseWhileReferenced(em: EntityManager, row: RegisteredLimit): Promise<void> {
    if ((await this.repository.countLimitsOf(em, row)) > 0) {
      throw new ForbiddenError(`Unable to update or delete registered limit ${row.id} because there are project limits associated with it.`);
    }
  }

  // ---- limits ----------------------------------------------------------------------------

  async getLimit(id: string, em: EntityManager = this.store.reader()): Promise<Limit> {
    const row = await this.repository.findLimit(em, id);
    if (!row) throw new NotFoundError(`Could not find limit for ${id}.`);
    return row;
  }

  /**
   * Whose limit this is, for the policy of GET /v3/limits/{id} (Keystone's target.limit.project and
   * target.limit.domain); null when there is no such limit (the policy then sees no target).
   */
  async ownerOf(id: string): Promise<{ project: { id: string; domainId: string } } | { domain: { id: string } } | null> {
    const em = this.store.reader();
    const row = await this.repository.findLimit(em, id);
    if (!row) return null;
    if (row.domainId) return { domain: { id: row.domainId } };
    const project = row.projectId ? await this.repository.findProject(em, row.projectId) : null;
    return project?.domainId ? { project: { id: project.id, domainId: project.domainId } } : null;
  }

  /** The limits the viewer may see, filtered as asked (a project-scoped caller sees only its project's). */
  async listLimits(filter: LimitQuery, viewer: LimitViewer): Promise<Limit[]> {
    const em = this.store.reader();
    switch (viewer.type) {
      case 'system':
        return this.repository.listLimits(em, filter);
      case 'domain':
        return this.repository.listLimits(em, {
          ...filter,
          within: { projectIds: await this.repository.projectIdsInDomain(em, viewer.domainId), domainId: viewer.domainId },
        });
      case 'project':
        if (filter.projectId !== undefined && filter.projectId !== viewer.projectId) return [];
        return this.repository.listLimits(em, { ...filter, projectId: viewer.projectId });
      case 'none':
        return [];
    }
  }

  /**
   * All or none. Each limit's service, region and project or domain must exist (400); a project id
   * naming a domain makes a domain limit, as in Keystone; a registered limit must exist for the
   * same service, region and resource (403); a duplicate is 409.
   */
  createLimits(inputs: LimitInput[]): Promise<Limit[]> {
    return this.store
      .transaction(async (em) => {
        const rows: Limit[] = [];
        for (const input of inputs) {
          await this.assertReferencesExist(em, LIMIT, input);
          let projectId: string | null = null;
          let domainId: string | null = null;
          if (input.projectId !== undefined) {
            const project = await this.repository.findProject(em, input.projectId);
            if (!project) throw ValidationError.expecting('project_id', LIMIT);
            if (project.isDomain) domainId = project.id;
            else projectId = project.id;
          } else if (input.domainId !== undefined) {
            const domain = await this.repository.findProject(em, input.domainId);
            if (!domain?.isDomain) throw ValidationError.expecting('domain_id', LIMIT);
            domainId = domain.id;
          }
          rows.push({
            id: newId(),
            projectId,
            domainId,
            serviceId: input.serviceId,
            regionId: input.regionId ?? null,
            resourceName: input.resourceName,
            resourceLimit: input.resourceLimit,
            description: input.description ?? null,
          });
        }
        for (const row of rows) {
          if (!(await this.repository.findRegisteredLimitFor(em, row))) {
            throw new ForbiddenError('Unable to create a limit that has no corresponding registered limit.');
          }
        }
        const seen = new Set<string>();
        for (const row of rows) {
          const key = `${row.projectId ?? ''}\u0000${row.domainId ?? ''}\u0000${keyString(row)}`;
          if (seen.has(key)) throw duplicate(LIMIT);
          seen.add(key);
        }
        return this.repository.insertLimits(em, rows);
      })
      .catch(conflictOnUnique(LIMIT));
  }

  updateLimit(id: string, patch: LimitPatch): Promise<Limit> {
    return this.store.transaction(async (em) => {
      const row = await this.getLimit(id, em);
      if (patch.resourceLimit !== undefined) row.resourceLimit = patch.resourceLimit;
      if (patch.description !== undefined) row.description = patch.description;
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteLimit(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      await this.repository.delete(em, await this.getLimit(id, em));
    });
  }

  // ---- shared ----------------------------------------------------------------------------

  /** Keystone's "Expecting to find service_id in registered_limit." (400) for an unknown service or region. */
  private async assertReferencesExist(em: EntityManager, target: string, input: { serviceId?: string | undefined; regionId?: string | null | undefined }): Promise<void> {
    if (input.serviceId !== undefined && !(await this.repository.serviceExists(em, input.serviceId))) {
      throw ValidationError.expecting('service_id', target);
    }
    if (input.regionId != null && !(await this.repository.regionExists(em, input.regionId))) {
      throw ValidationError.expecting('region_id', target);
    }
  }
}

function keyString(key: ResourceKey): string {
  return `${key.serviceId}\u0000${key.regionId ?? ''}\u0000${key.resourceName}`;
}

function duplicate(type: string): ConflictError {
  return new ConflictError(type, 'Duplicate entry');
}

/** Two writers racing past the checks: the unique index decides, with Keystone's answer. */
function conflictOnUnique(type: string): (error: unknown) => never {
  return (error: unknown) => {
    if (isUniqueViolation(error)) throw duplicate(type);
    throw error;
  };
}
