import type { CatalogService, Endpoint } from '../catalog/catalog-service.ts';
import { isDatabaseUnreachable } from '../store/unavailable.ts';

/** Where a request for a service goes: the internal endpoint, split for path joining. */
export interface Upstream {
  serviceType: string;
  endpointId: string;
  /** scheme://host:port */
  origin: string;
  /** host:port, the Host header the upstream is sent */
  host: string;
  /** The endpoint URL's path up to its first template, without a trailing slash ('' for none). */
  basePath: string;
}

export interface UpstreamDirectoryOptions {
  region: string;
  /** Changes whenever the catalog may have changed (see ClusterSync.generation). */
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
export class UpstreamDirectory {
  private table: Map<string, Upstream> | undefined;
  private tableGeneration = -1;
  private loading: Promise<Map<string, Upstream>> | undefined;

  constructor(
    private readonly catalog: CatalogService,
    private readonly options: UpstreamDirectoryOptions,
  ) {}

  async resolve(serviceType: string): Promise<Upstream | undefined> {
    const generation = this.options.generation();
    if (this.table && (this.tableGeneration === generation || this.options.servingLastKnown?.())) return this.table.get(serviceType);
    try {
      return (await this.reload(generation)).get(serviceType);
    } catch (error) {
      // The database is unreachable: keep forwarding by the last table read.
      if (this.table && isDatabaseUnreachable(error)) return this.table.get(serviceType);
      throw error;
    }
  }

  /**
   * resolve() without a promise when the table is current and has `serviceType` (the hot path);
   * undefined otherwise: then call resolve().
   */
  resolveCached(serviceType: string): Upstream | undefined {
    if (this.table === undefined) return undefined;
    return this.tableGeneration === this.options.generation() || this.options.servingLastKnown?.() ? this.table.get(serviceType) : undefined;
  }

  /** True when the last table read has `serviceType` (no load: for labelling metrics of any request). */
  known(serviceType: string): boolean {
    return this.table?.has(serviceType) ?? false;
  }

  private reload(generation: number): Promise<Map<string, Upstream>> {
    this.loading ??= this.load(generation).finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async load(generation: number): Promise<Map<string, Upstream>> {
    const [services, endpoints] = await Promise.all([this.catalog.listServices({}), this.catalog.listEndpoints({ interface: 'internal' })]);
    const enabledTypes = new Map(services.filter((service) => service.enabled).map((service) => [service.id, service.type]));
    const chosen = new Map<string, Endpoint>();
    const rank = (endpoint: Endpoint) => ((endpoint.regionId ?? null) === this.options.region ? 0 : endpoint.regionId ? 2 : 1);
    for (const endpoint of endpoints) {
      const type = enabledTypes.get(endpoint.serviceId);
      if (!type || !endpoint.enabled || rank(endpoint) === 2) continue;
      const existing = chosen.get(type);
      if (!existing || rank(endpoint) < rank(existing)) chosen.set(type, endpoint);
    }
    const table = new Map<string, Upstream>();
    for (const [serviceType, endpoint] of chosen) {
      const upstream = upstreamOf(serviceType, endpoint);
      if (upstream) table.set(serviceType, upstream);
    }
    this.table = table;
    this.tableGeneration = generation;
    return table;
  }
}

/** Splits an endpoint URL once; an unusable URL (not http/https) leaves the service unrouted. */
function upstreamOf(serviceType: string, endpoint: Endpoint): Upstream | undefined {
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

/**
 * The upstream path for `rest` (the canonical path after /{service_type}): when the client's path
 * already starts with the endpoint's base path (catalog URLs usually carry the API version, e.g.
 * http://nova:8774/v2.1 and /compute/v2.1/servers) it is used as is, else the base path is
 * prepended (a service mounted under a prefix, e.g. http://ctl/placement).
 */
export function joinPath(upstream: Upstream, encodedRest: string): string {
  const base = upstream.basePath;
  if (!base || encodedRest === base || encodedRest.startsWith(`${base}/`)) return encodedRest || '/';
  return `${base}${encodedRest === '/' ? '' : encodedRest}` || '/';
}
