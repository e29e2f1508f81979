import type { CatalogService, Endpoint } from '../catalog/catalog-service.ts';

/** Where a request for a service goes: the internal endpoint, split for path joining. */
export interface Upstream {
  serviceType: string;
  endpointId: string;
  /** scheme://host:port */
  origin: string;
  /** The endpoint URL's path up to its first template, without a trailing slash ('' for none). */
  basePath: string;
}

export interface UpstreamDirectoryOptions {
  region: string;
  /** Changes whenever the catalog may have changed (see ClusterSync.generation). */
  generation: () => number;
}

/**
 * Resolves a service type to its internal endpoint: the one in the gateway's region, else one
 * registered without a region; never an endpoint of another region (crossing regions silently
 * would surprise operators). Read from the catalog once per data generation, so catalog changes
 * take effect without a restart and requests never query the database.
 */
export class UpstreamDirectory {
  private table: Map<string, Endpoint> | undefined;
  private tableGeneration = -1;
  private loading: Promise<Map<string, Endpoint>> | undefined;

  constructor(
    private readonly catalog: CatalogService,
    private readonly options: UpstreamDirectoryOptions,
  ) {}

  async resolve(serviceType: string): Promise<Upstream | undefined> {
    const table = await this.current();
    const endpoint = table.get(serviceType);
    if (!endpoint) return undefined;
    let url: URL;
    try {
      // Templates such as $(project_id)s belong to the part after the base path; see joinPath.
      url = new URL(endpoint.url.split('$(')[0]!);
    } catch {
      return undefined;
    }
    return {
      serviceType,
      endpointId: endpoint.id,
      origin: url.origin,
      basePath: url.pathname.replace(/\/+$/, ''),
    };
  }

  private async current(): Promise<Map<string, Endpoint>> {
    const generation = this.options.generation();
    if (this.table && this.tableGeneration === generation) return this.table;
    this.loading ??= this.load(generation).finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async load(generation: number): Promise<Map<string, Endpoint>> {
    const [services, endpoints] = await Promise.all([this.catalog.listServices({}), this.catalog.listEndpoints({ interface: 'internal' })]);
    const enabledTypes = new Map(services.filter((service) => service.enabled).map((service) => [service.id, service.type]));
    const table = new Map<string, Endpoint>();
    const rank = (endpoint: Endpoint) => ((endpoint.regionId ?? null) === this.options.region ? 0 : endpoint.regionId ? 2 : 1);
    for (const endpoint of endpoints) {
      const type = enabledTypes.get(endpoint.serviceId);
      if (!type || !endpoint.enabled || rank(endpoint) === 2) continue;
      const existing = table.get(type);
      if (!existing || rank(endpoint) < rank(existing)) table.set(type, endpoint);
    }
    this.table = table;
    this.tableGeneration = generation;
    return table;
  }
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
