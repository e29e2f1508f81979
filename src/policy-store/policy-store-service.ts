import type { CatalogService, Endpoint } from '../catalog/catalog-service.ts';
import { NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { Json, PolicyRow } from '../store/entities.ts';
import { isForeignKeyViolation, isUniqueViolation, type StringMatch } from '../store/filters.ts';
import { PolicyStoreRepository, type AssociationTarget } from './policy-store-repository.ts';

export type Policy = PolicyRow;
export type { AssociationTarget } from './policy-store-repository.ts';

export interface PolicyInput {
  type: string;
  blob: string;
  extra?: Json | undefined;
}

export interface PolicyPatch {
  /** Any JSON value: only the policy's own id is accepted. */
  id?: unknown;
  type?: string | undefined;
  blob?: string | undefined;
  extra?: Json | undefined;
}

/**
 * Keystone's policy store (/v3/policies): blobs this service keeps and hands out but never
 * enforces (the identity API's own policy is policy/), and the OS-ENDPOINT-POLICY associations that
 * say which blob an endpoint uses.
 */
export class PolicyStoreService {
  private readonly repository = new PolicyStoreRepository();

  constructor(
    private readonly store: Store,
    private readonly catalog: CatalogService,
  ) {}

  // ---- policies ----------------------------------------------------------------------------

  async getPolicy(id: string, em: EntityManager = this.store.reader()): Promise<Policy> {
    const row = await this.repository.findPolicy(em, id);
    if (!row) throw NotFoundError.of('policy', id);
    return row;
  }

  listPolicies(type: StringMatch[]): Promise<Policy[]> {
    return this.repository.listPolicies(this.store.reader(), type);
  }

  createPolicy(input: PolicyInput): Promise<Policy> {
    return this.store.transaction((em) =>
      this.repository.insertPolicy(em, { id: newId(), type: input.type, blob: input.blob, extra: input.extra ?? {} }),
    );
  }

  updatePolicy(id: string, patch: PolicyPatch): Promise<Policy> {
    // Keystone refuses another id before it looks the policy up.
    if (patch.id !== undefined && patch.id !== id) return Promise.reject(new ValidationError('Cannot change policy ID'));
    return this.store.transaction(async (em) => {
      const row = await this.getPolicy(id, em);
      if (patch.type !== undefined) row.type = patch.type;
      if (patch.blob !== undefined) row.blob = patch.blob;
      if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
      await this.repository.saveChanges(em);
      return row;
    });
  }

  /** Its associations go with it. */
  deletePolicy(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      await this.repository.deletePolicy(em, await this.getPolicy(id, em));
    });
  }

  // ---- OS-ENDPOINT-POLICY ------------------------------------------------------------------

  /** PUT: the target now uses this policy (replacing the one it had, as Keystone does). */
  async associate(policyId: string, target: AssociationTarget): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.store.transaction(async (em) => {
          await this.checkExist(em, policyId, target);
          await this.repository.associate(em, policyId, target);
        });
      } catch (error) {
        // The policy or the target was deleted meanwhile (run again: its 404); a unique violation
        // should not happen (writers of one target take turns) but would mean the same.
        if (attempt < 3 && (isUniqueViolation(error) || isForeignKeyViolation(error))) continue;
        throw error;
      }
    }
  }

  /** GET/HEAD: 404 unless the target's association names this policy. */
  async checkAssociation(policyId: string, target: AssociationTarget): Promise<void> {
    const em = this.store.reader();
    await this.checkExist(em, policyId, target);
    if (!(await this.repository.hasAssociation(em, policyId, target))) throw new NotFoundError('Could not find policy association.');
  }

  /** DELETE: removes the association if it names this policy (no association is not an error, as in Keystone). */
  dissociate(policyId: string, target: AssociationTarget): Promise<void> {
    return this.store.transaction(async (em) => {
      await this.checkExist(em, policyId, target);
      await this.repository.dissociate(em, policyId, target);
    });
  }

  /**
   * The endpoints that use this policy, association by association (oldest first), as Keystone
   * lists them: an endpoint's own; every endpoint of a service; a service's endpoints in a region and
   * in the regions below it. An endpoint reached by two associations is listed twice.
   */
  async endpointsForPolicy(policyId: string): Promise<Endpoint[]> {
    const em = this.store.reader();
    await this.getPolicy(policyId, em);
    const associations = await this.repository.associationsOf(em, policyId);
    if (!associations.length) return [];
    const endpoints = await this.catalog.listEndpoints({});
    const regions = await this.catalog.listRegions({});
    const found: Endpoint[] = [];
    for (const association of associations) {
      if (association.endpointId) {
        const endpoint = endpoints.find((candidate) => candidate.id === association.endpointId);
        if (endpoint) found.push(endpoint);
      } else if (association.serviceId && !association.regionId) {
        found.push(...endpoints.filter((endpoint) => endpoint.serviceId === association.serviceId));
      } else if (association.serviceId && association.regionId) {
        // Down the region tree: the region's endpoints, then each child's (a cycle is not followed).
        const examined = new Set<string>();
        const walk = (regionId: string) => {
          if (examined.has(regionId)) return;
          examined.add(regionId);
          found.push(...endpoints.filter((endpoint) => endpoint.serviceId === association.serviceId && endpoint.regionId === regionId));
          for (const region of regions) if (region.parentRegionId === regionId) walk(region.id);
        };
        walk(association.regionId);
      }
    }
    return found;
  }

  /**
   * The policy an endpoint uses: its own association; else its service's in its region or the
   * nearest region above; else its service's.
   */
  async policyForEndpoint(endpointId: string): Promise<Policy> {
    const em = this.store.reader();
    const own = await this.repository.findAssociation(em, { endpointId });
    if (own) return this.getPolicy(own.policyId, em);
    const endpoint = await this.catalog.getEndpoint(endpointId, em);
    const examined = new Set<string>();
    let regionId = endpoint.regionId ?? null;
    while (regionId !== null && !examined.has(regionId)) {
      const inRegion = await this.repository.findAssociation(em, { serviceId: endpoint.serviceId, regionId });
      if (inRegion) return this.getPolicy(inRegion.policyId, em);
      examined.add(regionId);
      regionId = (await this.catalog.getRegion(regionId, em)).parentRegionId ?? null;
    }
    const ofService = await this.repository.findAssociation(em, { serviceId: endpoint.serviceId });
    if (ofService) return this.getPolicy(ofService.policyId, em);
    throw new NotFoundError(`No policy is associated with endpoint ${endpointId}.`);
  }

  /** Keystone's order of 404s: the policy, then the endpoint, or the service then the region. */
  private async checkExist(em: EntityManager, policyId: string, target: AssociationTarget): Promise<void> {
    await this.getPolicy(policyId, em);
    if ('endpointId' in target) {
      await this.catalog.getEndpoint(target.endpointId, em);
      return;
    }
    await this.catalog.getService(target.serviceId, em);
    if (target.regionId !== undefined) await this.catalog.getRegion(target.regionId, em);
  }
}
