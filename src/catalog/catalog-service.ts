import { GenerationCache, type CacheStats } from '../support/cache.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { EndpointRow, Json, RegionRow, ServiceRow } from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { isDatabaseUnreachable } from '../store/unavailable.ts';
import { CatalogRepository } from './catalog-repository.ts';
import type { EndpointFilterService } from './endpoint-filter-service.ts';

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
  /** The legacy `region` attribute: ignored beside `regionId`; alone, the region (created when missing). */
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

/**
 * OS-EP-FILTER: the ids of the endpoints a project's catalog is limited to, or null when its catalog
 * is not filtered (no endpoint is associated with it, directly or through an endpoint group).
 */
export type ProjectEndpointFilter = ReadonlySet<string> | null;

/** What URL templates ($(project_id)s …) are filled from. */
export interface CatalogSubstitutions {
  projectId?: string | undefined;
  userId?: string | undefined;
}

/** Regions, services and endpoints, and the catalog a token carries. */
export class CatalogService {
  private readonly repository = new CatalogRepository();

  /** The enabled services and endpoints, read once per data generation (every token body needs them). */
  private enabled: { generation: number; rows: Promise<EnabledRows> } | undefined;

  /** Built catalogs per data generation, by the substitutions their URLs actually use. */
  private readonly catalogs: GenerationCache<string, CatalogEntry[]> | undefined;

  /** Each project's endpoint filter, per data generation (associations are catalog writes). */
  private readonly filters: GenerationCache<string, ProjectEndpointFilter> | undefined;

  /** The service types each filtered project's catalog shows (null: not filtered), per data generation: the gateway's check. */
  private readonly visibleTypes: GenerationCache<string, ReadonlySet<string> | null> | undefined;

  constructor(
    private readonly store: Store,
    /** Moves whenever the catalog may have changed (ClusterSync.generationOf(CACHE_TOPICS.catalog)); without it nothing is cached. */
    private readonly generation?: () => number,
    /** True while the database is unreachable (ClusterSync.servingLastKnown): the last catalog read is served. */
    private readonly servingLastKnown?: () => boolean,
    /** OS-EP-FILTER associations; without it no catalog is filtered. */
    private readonly endpointFilter?: Pick<EndpointFilterService, 'associated'>,
  ) {
    this.catalogs = generation ? new GenerationCache(10_000, generation, undefined, servingLastKnown) : undefined;
    this.filters = generation ? new GenerationCache(10_000, generation, undefined, servingLastKnown) : undefined;
    this.visibleTypes = generation ? new GenerationCache(10_000, generation, undefined, servingLastKnown) : undefined;
  }

  /** Hits and misses of the built-catalog cache (for metrics). */
  get cacheStats(): Readonly<CacheStats> {
    return this.catalogs?.stats ?? { hits: 0, misses: 0 };
  }

  // ---- regions ---------------------------------------------------------------------------

  async getRegion(id: string, em: EntityManager = this.store.reader()): Promise<Region> {
    const row = await this.repository.findRegion(em, id);
    if (!row) throw NotFoundError.of('region', id);
    return row;
  }

  listRegions(filter: { parentRegionId?: string }): Promise<Region[]> {
    return this.repository.listRegions(this.store.reader(), filter.parentRegionId);
  }

  /** PUT /v3/regions/{id}: a new region with that id (an `id` in the body must be the same). */
  createRegionAt(id: string, input: RegionInput): Promise<Region> {
    if (input.id !== undefined && input.id !== id) {
      return Promise.reject(new ValidationError(`Conflicting region IDs specified: "${id}" != "${input.id}"`));
    }
    return this.createRegion({ ...input, id });
  }

  createRegion(input: RegionInput): Promise<Region> {
    const id = input.id ?? newId();
    return this.store
      .transaction(async (em) => {
        if (await this.repository.findRegion(em, id)) throw new ConflictError('region', `Duplicate ID, ${id}.`);
        if (input.parentRegionId) await this.getRegion(input.parentRegionId, em);
        return this.repository.insertRegion(em, {
          id,
          description: input.description ?? '',
          parentRegionId: input.parentRegionId ?? null,
          extra: input.extra ?? {},
        });
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) throw new ConflictError('region', `Duplicate ID, ${id}.`);
        throw error;
      });
  }

  updateRegion(id: string, patch: RegionInput): Promise<Region> {
    return this.store.transaction(async (em) => {
      const row = await this.getRegion(id, em);
      if (patch.id !== undefined && patch.id !== id) throw ValidationError.idChange();
      if (patch.parentRegionId !== undefined) {
        if (patch.parentRegionId) await this.refuseRegionCycle(em, id, patch.parentRegionId);
        row.parentRegionId = patch.parentRegionId;
      }
      if (patch.description !== undefined) row.description = patch.description ?? '';
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteRegion(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getRegion(id, em);
      const family = [id, ...(await this.repository.descendantRegionIds(em, id))];
      if ((await this.repository.countEndpointsInRegions(em, family)) > 0) {
        throw new ForbiddenError(`Unable to delete region ${id} because it or its child regions have associated endpoints.`);
      }
      // Its subtree goes with it, as in Keystone (deepest first: children refer to their parents).
      await this.repository.deleteRegions(em, family.slice(1).reverse());
      await this.repository.delete(em, row);
    });
  }

  private async refuseRegionCycle(em: EntityManager, id: string, parentRegionId: string): Promise<void> {
    let current: string | null = parentRegionId;
    const seen = new Set<string>();
    while (current && !seen.has(current)) {
      if (current === id) {
        // Keystone names the region the walk came back to, i.e. the one being updated.
        throw new ValidationError(`The specified parent region ${id} would create a circular region hierarchy.`);
      }
      seen.add(current);
      const region: Region = await this.getRegion(current, em);
      current = region.parentRegionId ?? null;
    }
  }

  // ---- services --------------------------------------------------------------------------

  async getService(id: string, em: EntityManager = this.store.reader()): Promise<Service> {
    const row = await this.repository.findService(em, id);
    if (!row) throw NotFoundError.of('service', id);
    return row;
  }

  listServices(filter: { type?: string; name?: string }): Promise<Service[]> {
    return this.repository.listServices(this.store.reader(), filter);
  }

  createService(input: ServiceInput): Promise<Service> {
    return this.store.transaction(async (em) => {
      return this.repository.insertService(em, {
        id: newId(),
        type: input.type,
        name: input.name ?? '',
        description: input.description ?? null,
        enabled: input.enabled ?? true,
        extra: input.extra ?? {},
      });
    });
  }

  updateService(id: string, patch: Partial<ServiceInput> & { id?: string | undefined }): Promise<Service> {
    return this.store.transaction(async (em) => {
      const row = await this.getService(id, em);
      if (patch.id !== undefined && patch.id !== id) throw ValidationError.idChange();
      if (patch.type !== undefined) row.type = patch.type;
      if (patch.name !== undefined) row.name = patch.name;
      if (patch.description !== undefined) row.description = patch.description;
      if (patch.enabled !== undefined) row.enabled = patch.enabled;
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteService(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getService(id, em);
      await this.repository.delete(em, row);
    });
  }

  // ---- endpoints -------------------------------------------------------------------------

  async getEndpoint(id: string, em: EntityManager = this.store.reader()): Promise<Endpoint> {
    const row = await this.repository.findEndpoint(em, id);
    if (!row) throw NotFoundError.of('endpoint', id);
    return row;
  }

  listEndpoints(filter: { interface?: string; serviceId?: string; regionId?: string }): Promise<Endpoint[]> {
    return this.repository.listEndpoints(this.store.reader(), filter);
  }

  createEndpoint(input: EndpointInput): Promise<Endpoint> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.findService(em, input.serviceId))) {
        throw ValidationError.expecting('endpoint service_id', 'service table');
      }
      const regionId = await this.endpointRegion(em, input.regionId, input.legacyRegion);
      return this.repository.insertEndpoint(em, {
        id: newId(),
        serviceId: input.serviceId,
        interface: input.interface,
        regionId,
        url: input.url,
        enabled: input.enabled ?? true,
        extra: input.extra ?? {},
      });
    });
  }

  updateEndpoint(id: string, patch: EndpointPatch): Promise<Endpoint> {
    return this.store.transaction(async (em) => {
      const row = await this.getEndpoint(id, em);
      if (patch.id !== undefined && patch.id !== id) throw ValidationError.idChange();
      if (patch.serviceId !== undefined && patch.serviceId !== row.serviceId) {
        if (!(await this.repository.findService(em, patch.serviceId))) {
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
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteEndpoint(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getEndpoint(id, em);
      await this.repository.delete(em, row);
    });
  }

  private async endpointRegion(em: EntityManager, regionId: string | null | undefined, legacyRegion: string | null | undefined): Promise<string | null> {
    if (regionId) {
      if (!(await this.repository.findRegion(em, regionId))) throw ValidationError.expecting('endpoint region_id', 'region table');
      return regionId;
    }
    if (!legacyRegion) return null;
    // The legacy `region` alone (v2-style clients, `openstack endpoint create --region`): the
    // region is created when it does not exist, as Keystone does for backward compatibility.
    if (!(await this.repository.findRegion(em, legacyRegion))) {
      await this.repository.insertRegion(em, { id: legacyRegion, description: '', parentRegionId: null, extra: {} });
    }
    return legacyRegion;
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
    // Only a project-scoped token's catalog is filtered (Keystone's get_v3_catalog).
    const filter = substitutions.projectId === undefined ? null : await this.projectEndpointFilter(substitutions.projectId);
    if (!this.catalogs || generation === undefined || rows.stale) return buildCatalog(rows, substitutions, filter);
    // Only the values the URL templates use, and a project's own filter, tell two catalogs apart.
    const key = `${rows.usesProject || filter ? (substitutions.projectId ?? '\u0001') : ''}\u0000${rows.usesUser ? (substitutions.userId ?? '\u0001') : ''}`;
    const cached = this.catalogs.get(key);
    if (cached) return cached;
    const built = buildCatalog(rows, substitutions, filter);
    this.catalogs.set(key, built, generation);
    return built;
  }

  /**
   * OS-EP-FILTER: the endpoints a project's catalog is limited to (null: not filtered). Keystone's
   * rule: when any endpoint (enabled or not) is associated with the project, directly or through an
   * endpoint group, the catalog holds only those, and services left without endpoints are dropped;
   * otherwise the whole catalog ([endpoint_filter] return_all_endpoints_if_no_filter, true by default).
   * Answered without a promise when cached for the current generation (the gateway's hot path).
   */
  projectEndpointFilter(projectId: string): ProjectEndpointFilter | Promise<ProjectEndpointFilter> {
    if (!this.endpointFilter) return null;
    const cached = this.filters?.getIfCurrent(projectId);
    if (cached !== undefined) return cached;
    return this.readProjectEndpointFilter(projectId);
  }

  /**
   * OS-EP-FILTER for the gateway: the types of the enabled services that keep an enabled endpoint in
   * a project's filtered catalog, or null when its catalog is not filtered. Answered without a promise
   * when cached for the current generation, so a request of a known project costs one map lookup.
   */
  projectServiceTypes(projectId: string): ReadonlySet<string> | null | Promise<ReadonlySet<string> | null> {
    if (!this.endpointFilter) return null;
    const cached = this.visibleTypes?.getIfCurrent(projectId);
    if (cached !== undefined) return cached;
    return this.readProjectServiceTypes(projectId);
  }

  private async readProjectServiceTypes(projectId: string): Promise<ReadonlySet<string> | null> {
    const generation = this.generation?.();
    const filter = await this.projectEndpointFilter(projectId);
    const rows = await this.enabledRows();
    let types: Set<string> | null = null;
    if (filter) {
      types = new Set();
      const typeOf = new Map(rows.services.map((service) => [service.id, service.type]));
      for (const endpoint of rows.endpoints) {
        const type = filter.has(endpoint.id) ? typeOf.get(endpoint.serviceId) : undefined;
        if (type !== undefined) types.add(type);
      }
    }
    if (generation !== undefined && !rows.stale) this.visibleTypes?.set(projectId, types, generation);
    return types;
  }

  private async readProjectEndpointFilter(projectId: string): Promise<ProjectEndpointFilter> {
    const generation = this.generation?.();
    const associated = await this.endpointFilter!.associated(this.store.reader(), projectId);
    const filter = associated.length ? new Set(associated.map((endpoint) => endpoint.id)) : null;
    if (generation !== undefined) this.filters?.set(projectId, filter, generation);
    return filter;
  }

  /**
   * Whether a URL of the catalog last read has $(user_id)s: then two users of one project get
   * different catalogs. True until the catalog has been read, so a cache keyed by it errs safe.
   */
  usesUserSubstitution(): boolean {
    return this.lastEnabledRows?.usesUser ?? true;
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
    const services = await this.repository.enabledServices(em);
    const endpoints = await this.repository.enabledEndpoints(em);
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

// Keystone fills both spellings: it turns $( into %( and applies Python's %-formatting, so a
// Nova endpoint registered as http://nova:8774/v2.1/%(tenant_id)s carries the project id too.
const TEMPLATE = /[$%]\((\w+)\)s/g;

/** The catalog of these rows for these substitutions (shared when cached: read-only). */
function buildCatalog({ services, endpoints }: EnabledRows, substitutions: CatalogSubstitutions, filter: ProjectEndpointFilter = null): CatalogEntry[] {
  const byService = new Map<string, CatalogEntry['endpoints']>();
  for (const endpoint of endpoints) {
    if (filter && !filter.has(endpoint.id)) continue;
    const url = substitute(endpoint.url, substitutions);
    if (url === undefined) continue;
    const list = byService.get(endpoint.serviceId) ?? [];
    list.push({ id: endpoint.id, interface: endpoint.interface, regionId: endpoint.regionId ?? null, url });
    byService.set(endpoint.serviceId, list);
  }
  const catalog = services.map((service) => ({ service, endpoints: byService.get(service.id) ?? [] }));
  // A filtered catalog drops the services it leaves without endpoints; the whole one keeps them (as Keystone).
  return filter ? catalog.filter((entry) => entry.endpoints.length) : catalog;
}

/** Fills $(project_id)s, $(tenant_id)s and $(user_id)s (or %(…)s); undefined when a needed value is missing. */
export function substitute(url: string, substitutions: CatalogSubstitutions): string | undefined {
  let missing = false;
  const resolved = url.replace(TEMPLATE, (template, name: string) => {
    const value = name === 'project_id' || name === 'tenant_id' ? substitutions.projectId : name === 'user_id' ? substitutions.userId : undefined;
    if (value === undefined) {
      missing = true;
      return template;
    }
    return value;
  });
  return missing ? undefined : resolved;
}
