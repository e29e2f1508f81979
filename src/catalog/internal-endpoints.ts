import type { CatalogService, Endpoint } from './catalog-service.ts';
import { isDatabaseUnreachable } from '../store/unavailable.ts';

/** Where the gateway sends a request for a service: its internal endpoint, split for path joining. */
export interface InternalEndpoint {
  serviceType: string;
  endpointId: string;
  /** scheme://host:port */
  origin: string;
  /** host:port, the Host header the upstream is sent */
  host: string;
  /** The endpoint URL's path up to its first template, without a trailing slash ('' for none). */
  basePath: string;
}

export interface InternalEndpointsOptions {
  region: string;
  /** Moves whenever the catalog may have changed (ClusterSync.generationOf(CACHE_TOPICS.catalog)). */
  generation: () => number;
  /** True while the database is unreachable (ClusterSync.servingLastKnown): the last table read is current. */
  servingLastKnown?: () => boolean;
}

/**
 * Resolves a service type to its internal endpoint: the one in the gateway's region, else one
 * registered without a region; never an endpoint of another region (crossing regions silently
 * would surprise operators). Read from the catalog once per data generation, so catalog changes
 * take effect without a restart and requests never query the database.
 */
export class InternalEndpoints {
  private table: Map<string, InternalEndpoint> | undefined;
  private tableGeneration = -1;
  private loading: Promise<Map<string, InternalEndpoint>> | undefined;

  constructor(
    private readonly catalog: CatalogService,
    private readonly options: InternalEndpointsOptions,
  ) {}

  /**
   * The internal endpoint of `serviceType` (undefined for none). Answered at once, without a promise,
   * when the table read is current (the hot path); a promise only when the table must be read.
   */
  resolve(serviceType: string): InternalEndpoint | undefined | Promise<InternalEndpoint | undefined> {
    const generation = this.options.generation();
    if (this.table && (this.tableGeneration === generation || this.options.servingLastKnown?.())) return this.table.get(serviceType);
    return this.reloadAndResolve(generation, serviceType);
  }

  /**
   * The whole table, service type → internal endpoint, read as resolve() reads it (the client
   * catalog asks which types the gateway serves). A new Map after each read.
   */
  endpoints(): ReadonlyMap<string, InternalEndpoint> | Promise<ReadonlyMap<string, InternalEndpoint>> {
    const generation = this.options.generation();
    if (this.table && (this.tableGeneration === generation || this.options.servingLastKnown?.())) return this.table;
    return this.reload(generation).catch((error: unknown) => {
      if (this.table && isDatabaseUnreachable(error)) return this.table;
      throw error;
    });
  }

  /** True when the last table read has `serviceType` (no load: for labelling metrics of any request). */
  known(serviceType: string): boolean {
    return this.table?.has(serviceType) ?? false;
  }

  private async reloadAndResolve(generation: number, serviceType: string): Promise<InternalEndpoint | undefined> {
    try {
      return (await this.reload(generation)).get(serviceType);
    } catch (error) {
      // The database is unreachable: keep forwarding by the last table read.
      if (this.table && isDatabaseUnreachable(error)) return this.table.get(serviceType);
      throw error;
    }
  }

  private reload(generation: number): Promise<Map<string, InternalEndpoint>> {
    this.loading ??= this.load(generation).finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async load(generation: number): Promise<Map<string, InternalEndpoint>> {
    const [services, endpoints] = await Promise.all([this.catalog.listServices({}), this.catalog.listEndpoints({ interface: 'internal' })]);
    const enabledTypes = new Map(services.filter((service) => service.enabled).map((service) => [service.id, service.type]));
    const chosen = new Map<string, Endpoint>();
    const rank = (endpoint: Endpoint) => regionRank(endpoint.regionId, this.options.region);
    for (const endpoint of endpoints) {
      const type = enabledTypes.get(endpoint.serviceId);
      if (!type || !endpoint.enabled || rank(endpoint) === 2) continue;
      const existing = chosen.get(type);
      if (!existing || rank(endpoint) < rank(existing)) chosen.set(type, endpoint);
    }
    const table = new Map<string, InternalEndpoint>();
    for (const [serviceType, endpoint] of chosen) {
      const split = internalEndpointOf(serviceType, endpoint);
      if (split) table.set(serviceType, split);
    }
    this.table = table;
    this.tableGeneration = generation;
    return table;
  }
}

/**
 * How near an endpoint's region is to the gateway's: 0 in its region, 1 registered without a
 * region, 2 another region (never used by this gateway).
 */
export function regionRank(regionId: string | null | undefined, gatewayRegion: string): 0 | 1 | 2 {
  return (regionId ?? null) === gatewayRegion ? 0 : regionId ? 2 : 1;
}

/** Splits an endpoint URL once; an unusable URL (not http/https) leaves the service unrouted. */
function internalEndpointOf(serviceType: string, endpoint: Endpoint): InternalEndpoint | undefined {
  let url: URL;
  try {
    // Templates such as $(project_id)s or %(tenant_id)s belong to the part after the base path.
    url = new URL(endpoint.url.split(/[$%]\(/)[0]!);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  return { serviceType, endpointId: endpoint.id, origin: url.origin, host: url.host, basePath: url.pathname.replace(/\/+$/, '') };
}
