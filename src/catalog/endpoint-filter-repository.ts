import type { EntityManager } from '../store/database.ts';
import {
  EndpointEntity,
  EndpointGroupEntity,
  ProjectEndpointEntity,
  ProjectEndpointGroupEntity,
  ProjectEntity,
  type EndpointGroupRow,
  type EndpointRow,
  type ProjectRow,
} from '../store/entities.ts';

/** Storage of OS-EP-FILTER: endpoint groups and the project ↔ endpoint (group) associations. */
export class EndpointFilterRepository {
  findProject(em: EntityManager, id: string): Promise<ProjectRow | null> {
    return em.findOne(ProjectEntity, { id });
  }

  findEndpoint(em: EntityManager, id: string): Promise<EndpointRow | null> {
    return em.findOne(EndpointEntity, { id });
  }

  /** Every endpoint, enabled or not, in the order of /v3/endpoints. */
  allEndpoints(em: EntityManager): Promise<EndpointRow[]> {
    return em.find(EndpointEntity, {}, { orderBy: { serviceId: 'asc', interface: 'asc', id: 'asc' } });
  }

  endpointsById(em: EntityManager, ids: string[]): Promise<EndpointRow[]> {
    if (!ids.length) return Promise.resolve([]);
    return em.find(EndpointEntity, { id: { $in: ids } }, { orderBy: { serviceId: 'asc', interface: 'asc', id: 'asc' } });
  }

  projectsById(em: EntityManager, ids: string[]): Promise<ProjectRow[]> {
    if (!ids.length) return Promise.resolve([]);
    return em.find(ProjectEntity, { id: { $in: ids } }, { orderBy: { name: 'asc', id: 'asc' } });
  }

  // ---- endpoint groups -------------------------------------------------------------------

  findGroup(em: EntityManager, id: string): Promise<EndpointGroupRow | null> {
    return em.findOne(EndpointGroupEntity, { id });
  }

  listGroups(em: EntityManager, name?: string): Promise<EndpointGroupRow[]> {
    return em.find(EndpointGroupEntity, name === undefined ? {} : { name }, { orderBy: { name: 'asc', id: 'asc' } });
  }

  groupsById(em: EntityManager, ids: string[]): Promise<EndpointGroupRow[]> {
    if (!ids.length) return Promise.resolve([]);
    return em.find(EndpointGroupEntity, { id: { $in: ids } }, { orderBy: { name: 'asc', id: 'asc' } });
  }

  async insertGroup(em: EntityManager, row: EndpointGroupRow): Promise<EndpointGroupRow> {
    const group = em.create(EndpointGroupEntity, row);
    await em.flush();
    return group;
  }

  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes the group; its project associations go by foreign-key cascade. */
  async deleteGroup(em: EntityManager, id: string): Promise<void> {
    await em.nativeDelete(EndpointGroupEntity, { id });
  }

  // ---- project ↔ endpoint ------------------------------------------------------------------

  async hasProjectEndpoint(em: EntityManager, projectId: string, endpointId: string): Promise<boolean> {
    return (await em.count(ProjectEndpointEntity, { projectId, endpointId })) > 0;
  }

  async insertProjectEndpoint(em: EntityManager, projectId: string, endpointId: string): Promise<void> {
    await em.insert(ProjectEndpointEntity, { projectId, endpointId });
  }

  /** How many rows went. */
  deleteProjectEndpoint(em: EntityManager, projectId: string, endpointId: string): Promise<number> {
    return em.nativeDelete(ProjectEndpointEntity, { projectId, endpointId });
  }

  async endpointIdsOfProject(em: EntityManager, projectId: string): Promise<string[]> {
    const rows = await em.find(ProjectEndpointEntity, { projectId });
    return rows.map((row) => row.endpointId);
  }

  async projectIdsOfEndpoint(em: EntityManager, endpointId: string): Promise<string[]> {
    const rows = await em.find(ProjectEndpointEntity, { endpointId });
    return rows.map((row) => row.projectId);
  }

  // ---- project ↔ endpoint group ------------------------------------------------------------

  async hasProjectGroup(em: EntityManager, projectId: string, endpointGroupId: string): Promise<boolean> {
    return (await em.count(ProjectEndpointGroupEntity, { projectId, endpointGroupId })) > 0;
  }

  async insertProjectGroup(em: EntityManager, projectId: string, endpointGroupId: string): Promise<void> {
    await em.insert(ProjectEndpointGroupEntity, { projectId, endpointGroupId });
  }

  deleteProjectGroup(em: EntityManager, projectId: string, endpointGroupId: string): Promise<number> {
    return em.nativeDelete(ProjectEndpointGroupEntity, { projectId, endpointGroupId });
  }

  async groupIdsOfProject(em: EntityManager, projectId: string): Promise<string[]> {
    const rows = await em.find(ProjectEndpointGroupEntity, { projectId });
    return rows.map((row) => row.endpointGroupId);
  }

  async projectIdsOfGroup(em: EntityManager, endpointGroupId: string): Promise<string[]> {
    const rows = await em.find(ProjectEndpointGroupEntity, { endpointGroupId });
    return rows.map((row) => row.projectId);
  }
}
