import type { CatalogEntry, CatalogService, CatalogSubstitutions } from './catalog-service.ts';
import { regionRank, type InternalEndpoint, type InternalEndpoints } from './internal-endpoints.ts';

/** The catalog clients receive: token bodies and GET /v3/auth/catalog. */
export interface ClientCatalog {
  catalog(substitutions: CatalogSubstitutions): Promise<CatalogEntry[]>;
}

/** The live gateway policy, as far as the catalog needs it; a reload gives a new object. */
export interface ServedTypes {
  hasService(serviceType: string): boolean;
}

export interface GatewayCatalogOptions {
  /** PUBLIC_URL (no trailing slash): where clients reach the gateway. */
  publicUrl: string;
  /** GATEWAY_REGION: public endpoints of other regions belong to other gateways. */
  region: string;
  /** The live gateway policy. */
  policy: () => ServedTypes;
}

/**
 * The identity API: never rewritten. `/identity` is a mount of this process's identity API, not a
 * gateway route (no internal endpoint, no policy file), and its registered public endpoint is
 * already PUBLIC_URL/v3 (bootstrap), where clients authenticate and discover versions directly.
 */
const IDENTITY = 'identity';

/**
 * The gateway's view of the registered catalog: the public endpoint of every service the gateway
 * serves becomes `{PUBLIC_URL}/{service_type}` followed by the registered URL's path, so a client
 * that follows its catalog goes through the gateway. A service is served when the gateway resolves
 * it (an enabled internal endpoint in its region or without one: InternalEndpoints, the gateway's
 * own resolution) and the live policy has a file for its type. Everything else is as registered:
 * other services, internal and admin endpoints (services talk to each other directly), endpoint ids.
 */
export class GatewayCatalog implements ClientCatalog {
  /**
   * Views by the registered catalog they were made from (cached and shared per catalog generation
   * and substitutions), each valid for the policy and endpoint table it was made with: a policy
   * reload or a new table makes a new view.
   */
  private readonly views = new WeakMap<CatalogEntry[], { policy: ServedTypes; table: ReadonlyMap<string, InternalEndpoint>; view: CatalogEntry[] }>();

  constructor(
    private readonly registered: Pick<CatalogService, 'catalog'>,
    private readonly internalEndpoints: Pick<InternalEndpoints, 'endpoints'>,
    private readonly options: GatewayCatalogOptions,
  ) {}

  async catalog(substitutions: CatalogSubstitutions): Promise<CatalogEntry[]> {
    const [registered, table] = await Promise.all([this.registered.catalog(substitutions), this.internalEndpoints.endpoints()]);
    const policy = this.options.policy();
    const made = this.views.get(registered);
    if (made && made.policy === policy && made.table === table) return made.view;
    const view = gatewayView(registered, (serviceType) => (serviceType !== IDENTITY && policy.hasService(serviceType) ? table.get(serviceType) : undefined), this.options);
    this.views.set(registered, { policy, table, view });
    return view;
  }
}

/** `served(type)`: the internal endpoint the gateway forwards the type to, when it serves it. */
function gatewayView(registered: CatalogEntry[], served: (serviceType: string) => InternalEndpoint | undefined, options: GatewayCatalogOptions): CatalogEntry[] {
  return registered.map((entry) => {
    const serviceType = entry.service.type;
    const internal = served(serviceType);
    if (!internal) return entry;
    return {
      service: entry.service,
      endpoints: entry.endpoints.map((endpoint) => {
        if (endpoint.interface !== 'public' || regionRank(endpoint.regionId, options.region) === 2) return endpoint;
        const url = throughGateway(endpoint.url, options.publicUrl, internal);
        return url === undefined ? endpoint : { ...endpoint, url };
      }),
    };
  });
}

const ORIGIN = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * `{publicUrl}/{serviceType}` and what follows the registered URL's origin (path and query, templates
 * already filled): `http://nova:8774/v2.1/<project>` → `{publicUrl}/compute/v2.1/<project>`, which the
 * gateway forwards to the internal endpoint without prefixing its path twice. A path that begins with
 * `/{serviceType}` where the internal endpoint's does not was written for a proxy mounting the service
 * there (such as a gateway): that segment is the mount, not the service's path, and is not repeated.
 * Undefined for a URL without an origin (left as registered).
 */
function throughGateway(url: string, publicUrl: string, internal: InternalEndpoint): string | undefined {
  const origin = ORIGIN.exec(url);
  if (!origin) return undefined;
  const mount = `/${internal.serviceType}`;
  let rest = url.slice(origin[0].length);
  if (isUnder(rest, mount) && !isUnder(internal.basePath, mount)) rest = rest.slice(mount.length);
  return `${publicUrl}${mount}${rest}`;
}

/** Whether `path` is `prefix` or goes on below it (`/echo/v1` is under `/echo`, `/echoes` is not). */
function isUnder(path: string, prefix: string): boolean {
  return path.startsWith(prefix) && (path.length === prefix.length || '/?#'.includes(path[prefix.length]!));
}
