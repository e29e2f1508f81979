import { ConflictError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { EndpointGroupRow, EndpointRow, Json, ProjectRow } from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { EndpointFilterRepository } from './endpoint-filter-repository.ts';

export type EndpointGroup = EndpointGroupRow;

/** The endpoint attributes an endpoint group may filter on (Keystone's list, in its words' order). */
const FILTER_KEYS = ['service_id', 'region_id', 'interface'] as const;

export interface EndpointGroupInput {
  name?: string | undefined;
  description?: string | null | undefined;
  filters?: Json | undefined;
  /** Attributes beyond these: Keystone refuses them ("… is an invalid keyword argument for EndpointGroup"). */
  extra?: string[] | undefined;
}

/** Whether an endpoint matches every filter of a group (Keystone compares each attribute for equality). */
export function matchesFilters(endpoint: EndpointRow, filters: Json): boolean {
  for (const [key, value] of Object.entries(filters)) {
    const actual = key === 'interface' ? endpoint.interface : key === 'service_id' ? endpoint.serviceId : key === 'region_id' ? (endpoint.regionId ?? null) : undefined;
    if (actual !== value) return false;
  }
  return true;
}

/**
 * The endpoints associated with a project: directly, then through its endpoint groups (Keystone's
 * list_endpoints_for_project), enabled or not. `all` is every endpoint.
 */
export function associatedEndpoints(all: readonly EndpointRow[], direct: ReadonlySet<string>, groups: readonly EndpointGroupRow[]): EndpointRow[] {
  const byId = new Map<string, EndpointRow>();
  for (const endpoint of all) if (direct.has(endpoint.id)) byId.set(endpoint.id, endpoint);
  for (const group of groups) {
    for (const endpoint of all) if (!byId.has(endpoint.id) && matchesFilters(endpoint, group.filters)) byId.set(endpoint.id, endpoint);
  }
  return [...byId.values()];
}

/** OS-EP-FILTER: endpoint groups and which endpoints a project's catalog holds. */
export class EndpointFilterService {
  private readonly repository = new EndpointFilterRepository();

  constructor(private readonly store: Store) {}

  // ---- endpoint groups -------------------------------------------------------------------

  async getGroup(id: string, em: EntityManager = this.store.reader()): Promise<EndpointGroup> {
    const row = await this.repository.findGroup(em, id);
    if (!row) throw NotFoundError.of('Endpoint Group', id);
    return row;
  }

  listGroups(name?: string): Promise<EndpointGroup[]> {
    return this.repository.listGroups(this.store.reader(), name);
  }

  createGroup(input: EndpointGroupInput): Promise<EndpointGroup> {
    refuseExtra(input.extra);
    const filters = checkFilters(input.filters ?? {});
    return this.store.transaction((em) =>
      this.repository.insertGroup(em, { id: newId(), name: input.name ?? '', description: input.description ?? null, filters }),
    );
  }

  updateGroup(id: string, patch: EndpointGroupInput): Promise<EndpointGroup> {
    return this.store.transaction(async (em) => {
      const row = await this.getGroup(id, em);
      refuseExtra(patch.extra);
      if (patch.filters !== undefined) row.filters = checkFilters(patch.filters);
      if (patch.name !== undefined) row.name = patch.name;
      if (patch.description !== undefined) row.description = patch.description;
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteGroup(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      await this.getGroup(id, em);
      await this.repository.deleteGroup(em, id);
    });
  }

  /** The endpoints a group's filters match, enabled or not. */
  async endpointsOfGroup(id: string): Promise<EndpointRow[]> {
    const em = this.store.reader();
    const group = await this.getGroup(id, em);
    return (await this.repository.allEndpoints(em)).filter((endpoint) => matchesFilters(endpoint, group.filters));
  }

  async projectsOfGroup(id: string): Promise<ProjectRow[]> {
    const em = this.store.reader();
    await this.getGroup(id, em);
    return this.repository.projectsById(em, await this.repository.projectIdsOfGroup(em, id));
  }

  // ---- project ↔ endpoint ------------------------------------------------------------------

  addEndpointToProject(projectId: string, endpointId: string): Promise<void> {
    return this.store
      .transaction(async (em) => {
        await this.project(em, projectId);
        await this.endpoint(em, endpointId);
        if (await this.repository.hasProjectEndpoint(em, projectId, endpointId)) throw new ConflictError('project_endpoint', 'Duplicate entry');
        await this.repository.insertProjectEndpoint(em, projectId, endpointId);
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw new ConflictError('project_endpoint', 'Duplicate entry');
        throw error;
      });
  }

  async checkEndpointInProject(projectId: string, endpointId: string): Promise<void> {
    const em = this.store.reader();
    await this.project(em, projectId);
    await this.endpoint(em, endpointId);
    if (!(await this.repository.hasProjectEndpoint(em, projectId, endpointId))) throw endpointNotInProject(endpointId, projectId);
  }

  removeEndpointFromProject(projectId: string, endpointId: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteProjectEndpoint(em, projectId, endpointId))) throw endpointNotInProject(endpointId, projectId);
    });
  }

  /** GET /v3/OS-EP-FILTER/projects/{id}/endpoints: direct associations, then the groups' endpoints. */
  async endpointsOfProject(projectId: string): Promise<EndpointRow[]> {
    const em = this.store.reader();
    await this.project(em, projectId);
    return this.associated(em, projectId);
  }

  /** The endpoints associated with a project (no check that it exists). */
  async associated(em: EntityManager, projectId: string): Promise<EndpointRow[]> {
    const direct = new Set(await this.repository.endpointIdsOfProject(em, projectId));
    const groups = await this.repository.groupsById(em, await this.repository.groupIdsOfProject(em, projectId));
    if (!direct.size && !groups.length) return [];
    return associatedEndpoints(await this.repository.allEndpoints(em), direct, groups);
  }

  async projectsOfEndpoint(endpointId: string): Promise<ProjectRow[]> {
    const em = this.store.reader();
    await this.endpoint(em, endpointId);
    return this.repository.projectsById(em, await this.repository.projectIdsOfEndpoint(em, endpointId));
  }

  // ---- project ↔ endpoint group ------------------------------------------------------------

  addGroupToProject(groupId: string, projectId: string): Promise<void> {
    return this.store
      .transaction(async (em) => {
        await this.getGroup(groupId, em);
        await this.project(em, projectId);
        if (await this.repository.hasProjectGroup(em, projectId, groupId)) throw new ConflictError('project_endpoint_group', 'Duplicate entry');
        await this.repository.insertProjectGroup(em, projectId, groupId);
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw new ConflictError('project_endpoint_group', 'Duplicate entry');
        throw error;
      });
  }

  async checkGroupInProject(groupId: string, projectId: string): Promise<void> {
    const em = this.store.reader();
    await this.project(em, projectId);
    await this.getGroup(groupId, em);
    if (!(await this.repository.hasProjectGroup(em, projectId, groupId))) throw groupNotInProject();
  }

  removeGroupFromProject(groupId: string, projectId: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteProjectGroup(em, projectId, groupId))) throw groupNotInProject();
    });
  }

  async groupsOfProject(projectId: string): Promise<EndpointGroup[]> {
    const em = this.store.reader();
    await this.project(em, projectId);
    return this.repository.groupsById(em, await this.repository.groupIdsOfProject(em, projectId));
  }

  private async project(em: EntityManager, id: string): Promise<ProjectRow> {
    const row = await this.repository.findProject(em, id);
    if (!row) throw NotFoundError.of('project', id);
    return row;
  }

  private async endpoint(em: EntityManager, id: string): Promise<EndpointRow> {
    const row = await this.repository.findEndpoint(em, id);
    if (!row) throw NotFoundError.of('endpoint', id);
    return row;
  }
}

function refuseExtra(extra: string[] | undefined): void {
  const first = extra?.[0];
  if (first !== undefined) throw new ValidationError(`'${first}' is an invalid keyword argument for EndpointGroup`);
}

function checkFilters(filters: Json): Json {
  const keys = Object.keys(filters);
  if (!keys.length) throw new ValidationError('filters field is required and cannot be empty');
  if (keys.some((key) => !(FILTER_KEYS as readonly string[]).includes(key))) {
    throw ValidationError.expecting(FILTER_KEYS.join(' or '), 'endpoint_group');
  }
  return filters;
}

function endpointNotInProject(endpointId: string, projectId: string): NotFoundError {
  return new NotFoundError(`Endpoint ${endpointId} not found in project ${projectId}`);
}

function groupNotInProject(): NotFoundError {
  return new NotFoundError('Endpoint Group Project Association not found');
}
