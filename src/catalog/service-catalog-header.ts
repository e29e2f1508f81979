import { GenerationCache } from '../support/cache.ts';
import type { CatalogService } from './catalog-service.ts';

/**
 * keystonemiddleware's X-Service-Catalog: a token's catalog in the v2 shape, built once per project
 * (and user, when a URL has $(user_id)s) and catalog generation. `encode` turns the JSON text into the header value as sent (the gateway's
 * wire encoding of text beyond ASCII), so a cached value goes out as is.
 */
export class ServiceCatalogHeaders {
  private readonly values: GenerationCache<string, string>;
  /** Whether the catalog last built has $(user_id)s URLs (values are then per user too); until known, it has. */
  private perUser = true;

  constructor(
    private readonly catalog: CatalogService,
    generation: () => number,
    private readonly encode: (text: string) => string,
  ) {
    this.values = new GenerationCache(10_000, generation);
  }

  /**
   * The header value for a token of `projectId` ('' for a token scoped otherwise) and `userId`: at
   * once when cached, else a promise while the catalog is read.
   */
  valueFor(projectId: string, userId: string): string | Promise<string> {
    return this.values.get(this.perUser ? `${projectId}\u0000${userId}` : projectId) ?? this.build(projectId, userId);
  }

  private async build(projectId: string, userId: string): Promise<string> {
    const generation = this.values.generation();
    const entries = await this.catalog.catalog({ projectId: projectId || undefined, userId });
    const v2 = entries.map(({ service, endpoints }) => {
      const byRegion = new Map<string, Record<string, string>>();
      for (const endpoint of endpoints) {
        const region = endpoint.regionId ?? '';
        const entry = byRegion.get(region) ?? { region };
        entry[`${endpoint.interface}URL`] = endpoint.url;
        byRegion.set(region, entry);
      }
      return { type: service.type, name: service.name, endpoints: [...byRegion.values()] };
    });
    const value = this.encode(JSON.stringify(v2));
    // A change of the catalog since `generation` makes this entry stale whatever its key.
    this.perUser = this.catalog.usesUserSubstitution();
    this.values.set(this.perUser ? `${projectId}\u0000${userId}` : projectId, value, generation);
    return value;
  }
}
