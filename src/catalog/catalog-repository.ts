import type { EntityManager } from '../store/database.ts';
import { EndpointEntity, RegionEntity, ServiceEntity, type EndpointRow, type RegionRow, type ServiceRow } from '../store/entities.ts';

export interface ServiceQuery {
  type?: string;
  name?: string;
}

export interface EndpointQuery {
  interface?: string;
  serviceId?: string;
  regionId?: string;
}

/** Storage of regions, services and endpoints. */
export class CatalogRepository {
  // ---- regions ---------------------------------------------------------------------------

  findRegion(em: EntityManager, id: string): Promise<RegionRow | null> {
    return em.findOne(RegionEntity, { id });
  }

  /** By id; only the children of `parentRegionId` when given. */
  listRegions(em: EntityManager, parentRegionId?: string): Promise<RegionRow[]> {
    return em.find(RegionEntity, parentRegionId === undefined ? {} : { parentRegionId }, { orderBy: { id: 'asc' } });
  }

  /** The ids of every region below the given one, level by level (a cycle is not followed). */
  async descendantRegionIds(em: EntityManager, id: string): Promise<string[]> {
    const found: string[] = [];
    let frontier = [id];
    while (frontier.length) {
      const children = await em.find(RegionEntity, { parentRegionId: { $in: frontier } });
      frontier = children.map((child) => child.id).filter((childId) => !found.includes(childId) && childId !== id);
      found.push(...frontier);
    }
    return found;
  }

  /** Writes the new region now (a duplicate id fails here, inside the caller's transaction). */
  async insertRegion(em: EntityManager, row: RegionRow): Promise<RegionRow> {
    const region = em.create(RegionEntity, row);
    await em.flush();
    return region;
  }

  /** Deletes these regions one by one, in the order given (children before their parents). */
  async deleteRegions(em: EntityManager, ids: string[]): Promise<void> {
    for (const id of ids) await em.nativeDelete(RegionEntity, { id });
  }

  // ---- services --------------------------------------------------------------------------

  findService(em: EntityManager, id: string): Promise<ServiceRow | null> {
    return em.findOne(ServiceEntity, { id });
  }

  /** By type, then id. */
  listServices(em: EntityManager, query: ServiceQuery): Promise<ServiceRow[]> {
    const where: Record<string, unknown> = {};
    if (query.type !== undefined) where.type = query.type;
    if (query.name !== undefined) where.name = query.name;
    return em.find(ServiceEntity, where, { orderBy: { type: 'asc', id: 'asc' } });
  }

  /** The enabled services, in the order a token's catalog lists them. */
  enabledServices(em: EntityManager): Promise<ServiceRow[]> {
    return em.find(ServiceEntity, { enabled: true }, { orderBy: { type: 'asc', id: 'asc' } });
  }

  async insertService(em: EntityManager, row: ServiceRow): Promise<ServiceRow> {
    const service = em.create(ServiceEntity, row);
    await em.flush();
    return service;
  }

  // ---- endpoints -------------------------------------------------------------------------

  findEndpoint(em: EntityManager, id: string): Promise<EndpointRow | null> {
    return em.findOne(EndpointEntity, { id });
  }

  /** By service, interface, then id. */
  listEndpoints(em: EntityManager, query: EndpointQuery): Promise<EndpointRow[]> {
    const where: Record<string, unknown> = {};
    if (query.interface !== undefined) where.interface = query.interface;
    if (query.serviceId !== undefined) where.serviceId = query.serviceId;
    if (query.regionId !== undefined) where.regionId = query.regionId;
    return em.find(EndpointEntity, where, { orderBy: { serviceId: 'asc', interface: 'asc', id: 'asc' } });
  }

  /** The enabled endpoints, in the order a token's catalog lists them within a service. */
  enabledEndpoints(em: EntityManager): Promise<EndpointRow[]> {
    return em.find(EndpointEntity, { enabled: true }, { orderBy: { interface: 'asc', id: 'asc' } });
  }

  /** How many endpoints are in any of these regions. */
  countEndpointsInRegions(em: EntityManager, regionIds: string[]): Promise<number> {
    return em.count(EndpointEntity, { regionId: { $in: regionIds } });
  }

  async insertEndpoint(em: EntityManager, row: EndpointRow): Promise<EndpointRow> {
    const endpoint = em.create(EndpointEntity, row);
    await em.flush();
    return endpoint;
  }

  // ---- any row ---------------------------------------------------------------------------

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes a region, service or endpoint read in `em` (a service's endpoints go by foreign-key cascade). */
  async delete(em: EntityManager, row: RegionRow | ServiceRow | EndpointRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }
}
