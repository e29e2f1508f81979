import type { EntityManager } from '../store/database.ts';
import { PolicyAssociationEntity, PolicyEntity, type PolicyAssociationRow, type PolicyRow } from '../store/entities.ts';
import { stringConditions, type StringMatch } from '../store/filters.ts';

/** What an association is for: an endpoint, a service, or a service in a region. */
export type AssociationTarget = { endpointId: string } | { serviceId: string; regionId?: string | undefined };

/** The row's columns for a target (the absent ones null: a target is matched exactly). */
function targetColumns(target: AssociationTarget): { endpointId: string | null; serviceId: string | null; regionId: string | null } {
  return 'endpointId' in target
    ? { endpointId: target.endpointId, serviceId: null, regionId: null }
    : { endpointId: null, serviceId: target.serviceId, regionId: target.regionId ?? null };
}

/** Storage of policy blobs and their OS-ENDPOINT-POLICY associations. */
export class PolicyStoreRepository {
  // ---- policies ----------------------------------------------------------------------------

  findPolicy(em: EntityManager, id: string): Promise<PolicyRow | null> {
    return em.findOne(PolicyEntity, { id });
  }

  /** By id; only those whose type matches every condition given. */
  listPolicies(em: EntityManager, type: StringMatch[]): Promise<PolicyRow[]> {
    const conditions = stringConditions('type', type);
    return em.find(PolicyEntity, conditions.length ? { $and: conditions } : {}, { orderBy: { id: 'asc' } });
  }

  async insertPolicy(em: EntityManager, row: PolicyRow): Promise<PolicyRow> {
    const policy = em.create(PolicyEntity, row);
    await em.flush();
    return policy;
  }

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes a policy read in `em` (its associations go by foreign-key cascade). */
  async deletePolicy(em: EntityManager, row: PolicyRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }

  // ---- associations ------------------------------------------------------------------------

  /** The association of a target, whichever policy it names. */
  findAssociation(em: EntityManager, target: AssociationTarget): Promise<PolicyAssociationRow | null> {
    return em.findOne(PolicyAssociationEntity, targetColumns(target));
  }

  /** Whether this policy is the one associated with the target. */
  async hasAssociation(em: EntityManager, policyId: string, target: AssociationTarget): Promise<boolean> {
    return (await em.count(PolicyAssociationEntity, { policyId, ...targetColumns(target) })) > 0;
  }

  /**
   * The target's association now names this policy (any other it had is replaced). Writers of one
   * target take turns (a transaction lock on the target), so the later one replaces the earlier's row.
   */
  async associate(em: EntityManager, policyId: string, target: AssociationTarget): Promise<void> {
    const columns = targetColumns(target);
    await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`policy_association:${columns.endpointId ?? ''}:${columns.serviceId ?? ''}:${columns.regionId ?? ''}`]);
    await em.nativeDelete(PolicyAssociationEntity, columns);
    await em.insert(PolicyAssociationEntity, { policyId, ...columns });
  }

  /** Removes the target's association if it names this policy. */
  async dissociate(em: EntityManager, policyId: string, target: AssociationTarget): Promise<void> {
    await em.nativeDelete(PolicyAssociationEntity, { policyId, ...targetColumns(target) });
  }

  /** The policy's associations, oldest written first. */
  associationsOf(em: EntityManager, policyId: string): Promise<PolicyAssociationRow[]> {
    return em.find(PolicyAssociationEntity, { policyId }, { orderBy: { id: 'asc' } });
  }
}
