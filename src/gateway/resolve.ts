import type { InternalEndpoint, InternalEndpoints } from '../catalog/internal-endpoints.ts';
import { Refusal } from './outcome.ts';
import { then, type Step } from './pipeline.ts';
import type { ProxiedRequest } from './proxied-request.ts';

/**
 * Stage 3: the internal endpoint of /{service_type} (404 for none), from the catalog's endpoint
 * table: at once while the table read is current.
 */
export class Resolver {
  constructor(private readonly endpoints: InternalEndpoints) {}

  resolve(proxied: ProxiedRequest): Step<Refusal | undefined> {
    return then(this.endpoints.resolve(proxied.route!.serviceType), proxied, resolved);
  }
}

function resolved(proxied: ProxiedRequest, upstream: InternalEndpoint | undefined): Refusal | undefined {
  if (!upstream) return new Refusal(404, `Could not find an internal endpoint for service type: ${proxied.route!.serviceType}.`, 'no internal endpoint');
  proxied.upstream = upstream;
  return undefined;
}
