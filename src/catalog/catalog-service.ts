import { GenerationCache, type CacheStats } from '../support/cache.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import {
  EndpointEntity,
  RegionEntity,
  ServiceEntity,
  type EndpointRow,
  type Json,
  type RegionRow,
  type ServiceRow,
} from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { isDatabaseUnreachable } from '../store/unavailable.ts';

export type Region = RegionRow;
export type Service = ServiceRow;
export type Endpoint = EndpointRow;
export type EndpointInterface = 'public' | 'internal' | 'admin';

export interface RegionInput {
  id?: string | undefined;
  description?: string | null | undefined;
  parentRegionId?: string | null | undefined;
  extra?: Json | undefined;
}

export interface ServiceInput {
  type: string;
  name?: string | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
  extra?: Json | undefined;
}

export interface EndpointInput {
  serviceId: string;
  interface: EndpointInterface;
  url: string;
  regionId?: string | null | undefined;
  /** The legacy `region` attribute: stored as the region id without checking it exists. */
  legacyRegion?: string | null | undefined;
  enabled?: boolean | undefined;
  extra?: Json | undefined;
}

export type EndpointPatch = Partial<Omit<EndpointInput, 'serviceId'>> & { serviceId?: string | undefined; id?: string | undefined };

/** A service with the endpoints a token's catalog shows, URLs already resolved. */
export interface CatalogEntry {
  service: Service;
  endpoints: { id: string; interface: string; regionId: string | null; url: string }[];
}

/** What URL templates ($(project_id)s …) are filled from. */
export interface CatalogSubstitutions {
  projectId?: string | undefined;
  userId?: string | undefined;
}

/** Regions, services and endpoints, and the catalog a token carries. */
export class CatalogService {
  /** The enabled services and endpoints, read once per data generation (every token body needs them). */
  private enabled: { generation: number; rows: Promise<EnabledRows> } | undefined;

  /** Built catalogs per data generation, by the substitutions their URLs actually use. */
  private readonly catalogs: GenerationCache<string, CatalogEntry[]> | undefined;

  constructor(
    private readonly store: Store,
    /** Changes whenever the data may have changed (ClusterSync.generation); without it nothing is cached. */
    private readonly generation?: () => number,
    /** True while the database is unreachable (ClusterSync.servingLastKnown): the last catalog read is served. */
    private readonly servingLastKnown?: () => boolean,
  ) {
    this.catalogs = generation ? new GenerationCache(10_000, generation, undefined, servingLastKnown) : undefined;
  }

  /** Hits and misses of the built-catalog cache (for metrics). */
  get cacheStats(): Readonly<CacheStats> {
    return this.catalogs?.stats ?? { hits: 0, misses: 0 };
  }

  // ---- regions ---------------------------------------------------------------------------

  async getRegion(id: string, em: EntityManager = this.store.reader()): Promise<Region> {
    const row = await em.findOne(RegionEntity, { id });
    if (!row) throw NotFoundError.of('region', id);
    return row;
  }

  listRegions(filter: { parentRegionId?: string }): Promise<Region[]> {
    return this.store.reader().find(RegionEntity, filter.parentRegionId === undefined ? {} : { parentRegionId: filter.parentRegionId }, {
      orderBy: { id: 'asc' },
    });
  }

  createRegion(input: RegionInput): Promise<Region> {
    const id = input.id ?? newId();
    return this.store
      .transaction(async (em) => {
        if (await em.findOne(RegionEntity, { id })) throw new ConflictError('region', `Duplicate ID, ${id}.`);
        if (input.parentRegionId) await this.getRegion(input.parentRegionId, em);
        const row = em.create(RegionEntity, {
          id,
          description: input.description ?? '',
          parentRegionId: input.parentRegionId ?? null,
          extra: input.extra ?? {},
        });
        await em.flush();
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw new ConflictError('region', `Duplicate ID, ${id}.`);
        throw error;
      });
  }

  updateRegion(id: string, patch: RegionInput): Promise<Region> {
    return this.store.transaction(async (em) => {
      const row = await this.getRegion(id, em);
      if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change region ID');
      if (patch.parentRegionId !== undefined) {
        if (patch.parentRegionId) await this.refuseRegionCycle(em, id, patch.parentRegionId);
        row.parentRegionId = patch.parentRegionId;
      }
      if (patch.description !== undefined) row.description = patch.description ?? '';
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await em.flush();
      return row;
    });
  }

  deleteRegion(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getRegion(id, em);
      const family = [id, ...(await this.childRegionIds(em, id))];
      if ((await em.count(EndpointEntity, { regionId: { $in: family } })) > 0) {
        throw new ForbiddenError(`Unable to delete region ${id} because it or its child regions have associated endpoints.`);
      }
      // Children are detached rather than deleted, as in Keystone.
      await em.nativeUpdate(RegionEntity, { parentRegionId: id }, { parentRegionId: null });
      em.remove(row);
      await em.flush();
    });
  }

  private async refuseRegionCycle(em: EntityManager, id: string, parentRegionId: string): Promise<void> {
    let current: string | null = parentRegionId;
    const seen = new Set<string>();
    while (current && !seen.has(current)) {
      if (current === id) {
        throw new ValidationError(`The specified parent region ${parentRegionId} would create a circular region hierarchy.`);
      }
      seen.add(current);
      const region: Region = await this.getRegion(current, em);
      current = region.parentRegionId ?? null;
    }
  }

  private async childRegionIds(em: EntityManager, id: string): Promise<string[]> {
    const found: string[] = [];
    let frontier = [id];
    while (frontier.length) {
      const children = await em.find(RegionEntity, { parentRegionId: { $in: frontier } });
      frontier = children.map((child) => child.id).filter((childId) => !found.includes(childId) && childId !== id);
      found.push(...frontier);
    }
    return found;
  }

  // ---- services --------------------------------------------------------------------------

  async getService(id: string, em: EntityManager = this.store.reader()): Promise<Service> {
    const row = await em.findOne(ServiceEntity, { id });
    if (!row) throw NotFoundError.of('service', id);
    return row;
  }

  listServices(filter: { type?: string; name?: string }): Promise<Service[]> {
    const where: Record<string, unknown> = {};
    if (filter.type !== undefined) where.type = filter.type;
    if (filter.name !== undefined) where.name = filter.name;
    return this.store.reader().find(ServiceEntity, where, { orderBy: { type: 'asc', id: 'asc' } });
  }

  createService(input: ServiceInput): Promise<Service> {
    return this.store.transaction(async (em) => {
      const row = em.create(ServiceEntity, {
        id: newId(),
        type: input.type,
        name: input.name ?? '',
        description: input.description ?? null,
        enabled: input.enabled ?? true,
        extra: input.extra ?? {},
      });
      await em.flush();
      return row;
    });
  }

  updateService(id: string, patch: Partial<ServiceInput> & { id?: string | undefined }): Promise<Service> {
    return this.store.transaction(async (em) => {
      const row = await this.getService(id, em);
      if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change service ID');
      if (patch.type !== undefined) row.type = patch.type;
      if (patch.name !== undefined) row.name = patch.name;
      if (patch.description !== undefined) row.description = patch.description;
      if (patch.enabled !== undefined) row.enabled = patch.enabled;
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await em.flush();
      return row;
    });
  }

  deleteService(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getService(id, em);
      em.remove(row);
      await em.flush();
    });
  }

  // ---- endpoints -------------------------------------------------------------------------

  async getEndpoint(id: string, em: EntityManager = this.store.reader()): Promise<Endpoint> {
    const row = await em.findOne(EndpointEntity, { id });
    if (!row) throw NotFoundError.of('endpoint', id);
    return row;
  }

  listEndpoints(filter: { interface?: string; serviceId?: string; regionId?: string }): Promise<Endpoint[]> {
    const where: Record<string, unknown> = {};
    if (filter.interface !== undefined) where.interface = filter.interface;
    if (filter.serviceId !== undefined) where.serviceId = filter.serviceId;
    if (filter.regionId !== undefined) where.regionId = filter.regionId;
    return this.store.reader().find(EndpointEntity, where, { orderBy: { serviceId: 'asc', interface: 'asc', id: 'asc' } });
  }

  createEndpoint(input: EndpointInput): Promise<Endpoint> {
    return this.store.transaction(async (em) => {
      if (!(await em.findOne(ServiceEntity, { id: input.serviceId }))) {
        throw ValidationError.expecting('endpoint service_id', 'service table');
      }
      const regionId = await this.endpointRegion(em, input.regionId, input.legacyRegion);
      const row = em.create(EndpointEntity, {
        id: newId(),
        serviceId: input.serviceId,
        interface: input.interface,
        regionId,
        url: input.url,
        enabled: input.enabled ?? true,
        extra: input.extra ?? {},
      });
      await em.flush();
      return row;
    });
  }

  updateEndpoint(id: string, patch: EndpointPatch): Promise<Endpoint> {
    return this.store.transaction(async (em) => {
      const row = await this.getEndpoint(id, em);
      if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change endpoint ID');
      if (patch.serviceId !== undefined && patch.serviceId !== row.serviceId) {
        if (!(await em.findOne(ServiceEntity, { id: patch.serviceId }))) {
          throw ValidationError.expecting('endpoint service_id', 'service table');
        }
        row.serviceId = patch.serviceId;
      }
      if (patch.regionId !== undefined || patch.legacyRegion !== undefined) {
        row.regionId = await this.endpointRegion(em, patch.regionId, patch.legacyRegion);
      }
      if (patch.interface !== undefined) row.interface = patch.interface;
      if (patch.url !== undefined) row.url = patch.url;
      if (patch.enabled !== undefined) row.enabled = patch.enabled;
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await em.flush();
      return row;
    });
  }

  deleteEndpoint(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getEndpoint(id, em);
      em.remove(row);
      await em.flush();
    });
  }

  private async endpointRegion(em: EntityManager, regionId: string | null | undefined, legacyRegion: string | null | undefined): Promise<string | null> {
    if (regionId) {
      if (!(await em.findOne(RegionEntity, { id: regionId }))) throw ValidationError.expecting('endpoint region_id', 'region table');
      return regionId;
    }
    return legacyRegion ?? null;
  }

  // ---- the catalog -----------------------------------------------------------------------

  /**
   * Enabled services with their enabled endpoints, URL templates filled in. Endpoints whose URL
   * needs a project id are dropped when there is none (domain and system tokens). Built once per
   * data generation and scope: the result is shared, read-only.
   */
  async catalog(substitutions: CatalogSubstitutions): Promise<CatalogEntry[]> {
    const generation = this.generation?.();
    const rows = await this.enabledRows();
    if (!this.catalogs || generation === undefined || rows.stale) return buildCatalog(rows, substitutions);
    // Only the values the URL templates use tell two catalogs apart (usually none, or the project).
    const key = `${rows.usesProject ? (substitutions.projectId ?? '\u0001') : ''}\u0000${rows.usesUser ? (substitutions.userId ?? '\u0001') : ''}`;
    const cached = this.catalogs.get(key);
    if (cached) return cached;
    const built = buildCatalog(rows, substitutions);
    this.catalogs.set(key, built, generation);
    return built;
  }

  private enabledRows(): Promise<EnabledRows> {
    const generation = this.generation?.();
    if (generation !== undefined && this.enabled?.generation === generation) return this.enabled.rows;
    // Not asked while unreachable: the last rows read, as a cache hit (and catalogs built from them are cached).
    if (this.lastEnabledRows && this.servingLastKnown?.()) return Promise.resolve(this.lastEnabledRows);
    const rows = this.readEnabledRows().then(
      (read) => {
        this.lastEnabledRows = read;
        return read;
      },
      (error: unknown) => {
        // The database is unreachable: token bodies keep the last catalog read rather than fail, and
        // nothing built from it is kept (the next call reads again).
        if (!this.lastEnabledRows || !isDatabaseUnreachable(error)) throw error;
        if (this.enabled?.rows === rows) this.enabled = undefined;
        return { ...this.lastEnabledRows, stale: true };
      },
    );
    if (generation !== undefined) {
      this.enabled = { generation, rows };
      // A failed read is not kept: the next call tries again.
      rows.catch(() => {
        if (this.enabled?.rows === rows) this.enabled = undefined;
      });
    }
    return rows;
  }

  /** The last catalog rows read from the database. */
  private lastEnabledRows: EnabledRows | undefined;

  private async readEnabledRows(): Promise<EnabledRows> {
    const em = this.store.reader();
    const services = await em.find(ServiceEntity, { enabled: true }, { orderBy: { type: 'asc', id: 'asc' } });
    const endpoints = await em.find(EndpointEntity, { enabled: true }, { orderBy: { interface: 'asc', id: 'asc' } });
    const templates = endpoints.flatMap((endpoint) => [...endpoint.url.matchAll(TEMPLATE)].map((match) => match[1]));
    return {
      services,
      endpoints,
      usesProject: templates.some((name) => name === 'project_id' || name === 'tenant_id'),
      usesUser: templates.some((name) => name === 'user_id'),
    };
  }
}

interface EnabledRows {
  services: Service[];
  endpoints: Endpoint[];
  /** Whether any URL has $(project_id)s / $(tenant_id)s, or $(user_id)s. */
  usesProject: boolean;
  usesUser: boolean;
  /** The last rows read, returned while the database is unreachable. */
  stale?: boolean;
}

const TEMPLATE = /\$\((\w+)\)s/g;

/** The catalog of these rows for these substitutions (shared when cached: read-only). */
function buildCatalog({ services, endpoints }: EnabledRows, substitutions: CatalogSubstitutions): CatalogEntry[] {
  const byService = new Map<string, CatalogEntry['endpoints']>();
  for (const endpoint of endpoints) {
    const url = substitute(endpoint.url, substitutions);
    if (url === undefined) continue;
    const list = byService.get(endpoint.serviceId) ?? [];
    list.push({ id: endpoint.id, interface: endpoint.interface, regionId: endpoint.regionId ?? null, url });
    byService.set(endpoint.serviceId, list);
  }
  return services.map((service) => ({ service, endpoints: byService.get(service.id) ?? [] }));
}

/** Fills $(project_id)s, $(tenant_id)s and $(user_id)s; undefined when a needed value is missing. */
export function substitute(url: string, substitutions: CatalogSubstitutions): string | undefined {
  let missing = false;
  const resolved = url.replace(/\$\((\w+)\)s/g, (template, name: string) => {
    const value = name === 'project_id' || name === 'tenant_id' ? substitutions.projectId : name === 'user_id' ? substitutions.userId : undefined;
    if (value === undefined) {
      missing = true;
      return template;
    }
    return value;
  });
  return missing ? undefined : resolved;
}
