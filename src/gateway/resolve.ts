import type { CatalogService } from '../catalog/catalog-service.ts';
import type { InternalEndpoint, InternalEndpoints } from '../catalog/internal-endpoints.ts';
import { Refusal } from './outcome.ts';
import { then, type Step } from './pipeline.ts';
import type { ProxiedRequest } from './proxied-request.ts';

/**
 * Stage 3: the internal endpoint of /{service_type} (404 for none), from the catalog's endpoint
 * table: at once while the table read is current. A project whose catalog is filtered (OS-EP-FILTER)
 * and does not show the service gets the same 404 as for a service that does not exist, so a
 * project learns nothing of the services hidden from it; the project's visible types are cached
 * per catalog generation (no database query on a hit).
 */
export class Resolver {
  constructor(
    private readonly endpoints: InternalEndpoints,
    private readonly catalog?: Pick<CatalogService, 'projectServiceTypes'>,
  ) {}

  resolve(proxied: ProxiedRequest): Step<Refusal | undefined> {
    return then(this.endpoints.resolve(proxied.route!.serviceType), proxied, this.resolved);
  }

  /** Made once (passed to then() without a closure per request). */
  private readonly resolved = (proxied: ProxiedRequest, upstream: InternalEndpoint | undefined): Step<Refusal | undefined> => {
    if (!upstream) return notFound(proxied, 'no internal endpoint');
    proxied.upstream = upstream;
    const scope = proxied.caller!.user.scope;
    if (!this.catalog || scope.type !== 'project') return undefined;
    return then(this.catalog.projectServiceTypes(scope.project.id), proxied, shown);
  };
}

function shown(proxied: ProxiedRequest, types: ReadonlySet<string> | null): Refusal | undefined {
  if (types === null || types.has(proxied.route!.serviceType)) return undefined;
  // Not forwarded: nothing of the upstream is recorded either.
  proxied.upstream = undefined;
  return notFound(proxied, "not in the project's catalog");
}

function notFound(proxied: ProxiedRequest, reason: string): Refusal {
  return new Refusal(404, `Could not find an internal endpoint for service type: ${proxied.route!.serviceType}.`, reason);
}
