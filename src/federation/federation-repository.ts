import type { EntityManager } from '../store/database.ts';
import {
  FederatedUserEntity,
  FederationProtocolEntity,
  IdentityProviderEntity,
  IdpRemoteIdEntity,
  MappingEntity,
  ServiceProviderEntity,
  type FederatedUserRow,
  type FederationProtocolRow,
  type IdentityProviderRow,
  type MappingRow,
  type ServiceProviderRow,
} from '../store/federation-entities.ts';
import { stringConditions, type StringMatch } from '../store/filters.ts';

/** Keystone's list filters on identity and service providers: `id` (and its inexact forms), `enabled`. */
export interface ProviderFilter {
  id?: StringMatch[];
  enabled?: boolean;
}

function providerConditions(filter: ProviderFilter): Record<string, unknown> {
  const conditions: Record<string, unknown>[] = [...stringConditions('id', filter.id ?? [])];
  if (filter.enabled !== undefined) conditions.push({ enabled: filter.enabled });
  return conditions.length ? { $and: conditions } : {};
}

/** Storage of the OS-FEDERATION resources. Lists are ordered by id. */
export class FederationRepository {
  // ---- identity providers --------------------------------------------------------------------

  findIdentityProvider(em: EntityManager, id: string): Promise<IdentityProviderRow | null> {
    return em.findOne(IdentityProviderEntity, { id });
  }

  listIdentityProviders(em: EntityManager, filter: ProviderFilter): Promise<IdentityProviderRow[]> {
    return em.find(IdentityProviderEntity, providerConditions(filter), { orderBy: { id: 'asc' } });
  }

  async insertIdentityProvider(em: EntityManager, row: IdentityProviderRow): Promise<void> {
    await em.insert(IdentityProviderEntity, row);
  }

  /** The remote ids of these providers, by provider (each list sorted, as Keystone orders them). */
  async remoteIdsOf(em: EntityManager, idpIds: string[]): Promise<Map<string, string[]>> {
    const byIdp = new Map<string, string[]>(idpIds.map((id) => [id, []]));
    if (!idpIds.length) return byIdp;
    const rows = await em.find(IdpRemoteIdEntity, { idpId: { $in: idpIds } }, { orderBy: { remoteId: 'asc' } });
    for (const row of rows) byIdp.get(row.idpId)?.push(row.remoteId);
    return byIdp;
  }

  /** Which of these remote ids belong to another provider than `idpId`. */
  async remoteIdsTakenByOthers(em: EntityManager, remoteIds: string[], idpId: string): Promise<Set<string>> {
    if (!remoteIds.length) return new Set();
    const rows = await em.find(IdpRemoteIdEntity, { remoteId: { $in: remoteIds }, idpId: { $ne: idpId } });
    return new Set(rows.map((row) => row.remoteId));
  }

  /** The provider's remote ids become exactly these. */
  async replaceRemoteIds(em: EntityManager, idpId: string, remoteIds: string[]): Promise<void> {
    await em.nativeDelete(IdpRemoteIdEntity, { idpId });
    if (remoteIds.length) await em.insertMany(IdpRemoteIdEntity, remoteIds.map((remoteId) => ({ remoteId, idpId })));
  }

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes a provider: its remote ids, protocols and federated users go by foreign-key cascade. */
  async deleteIdentityProvider(em: EntityManager, id: string): Promise<number> {
    return em.nativeDelete(IdentityProviderEntity, { id });
  }

  // ---- mappings ------------------------------------------------------------------------------

  findMapping(em: EntityManager, id: string): Promise<MappingRow | null> {
    return em.findOne(MappingEntity, { id });
  }

  listMappings(em: EntityManager): Promise<MappingRow[]> {
    return em.find(MappingEntity, {}, { orderBy: { id: 'asc' } });
  }

  async insertMapping(em: EntityManager, row: MappingRow): Promise<void> {
    await em.insert(MappingEntity, row);
  }

  async deleteMapping(em: EntityManager, id: string): Promise<number> {
    return em.nativeDelete(MappingEntity, { id });
  }

  // ---- protocols -----------------------------------------------------------------------------

  findProtocol(em: EntityManager, idpId: string, id: string): Promise<FederationProtocolRow | null> {
    return em.findOne(FederationProtocolEntity, { idpId, id });
  }

  listProtocols(em: EntityManager, idpId: string): Promise<FederationProtocolRow[]> {
    return em.find(FederationProtocolEntity, { idpId }, { orderBy: { id: 'asc' } });
  }

  async insertProtocol(em: EntityManager, row: FederationProtocolRow): Promise<void> {
    await em.insert(FederationProtocolEntity, row);
  }

  /** Deletes a protocol: its federated users go by foreign-key cascade. */
  async deleteProtocol(em: EntityManager, idpId: string, id: string): Promise<number> {
    return em.nativeDelete(FederationProtocolEntity, { idpId, id });
  }

  // ---- federated users (shadow users) --------------------------------------------------------

  findFederatedUser(em: EntityManager, idpId: string, protocolId: string, uniqueId: string): Promise<FederatedUserRow | null> {
    return em.findOne(FederatedUserEntity, { idpId, protocolId, uniqueId });
  }

  async insertFederatedUser(em: EntityManager, row: Omit<FederatedUserRow, 'id'>): Promise<void> {
    // The id is the database's (serial).
    await em.insert(FederatedUserEntity, row as FederatedUserRow);
  }

  /** Keystone's update_federated_user_display_name: only a changed name is written. */
  async updateFederatedUserDisplayName(em: EntityManager, idpId: string, protocolId: string, uniqueId: string, displayName: string): Promise<void> {
    await em.nativeUpdate(FederatedUserEntity, { idpId, protocolId, uniqueId, displayName: { $ne: displayName } }, { displayName });
  }

  /** A user's federated_user rows, by provider then protocol and unique id. */
  federatedUsersOf(em: EntityManager, userId: string): Promise<FederatedUserRow[]> {
    return em.find(FederatedUserEntity, { userId }, { orderBy: { id: 'asc' } });
  }

  /** The users with a federated_user row matching every condition given (Keystone's idp_id, protocol_id, unique_id filters). */
  async federatedUserIds(em: EntityManager, filter: { idpId?: string; protocolId?: string; uniqueId?: string }): Promise<string[]> {
    const where: Record<string, string> = {};
    if (filter.idpId !== undefined) where.idpId = filter.idpId;
    if (filter.protocolId !== undefined) where.protocolId = filter.protocolId;
    if (filter.uniqueId !== undefined) where.uniqueId = filter.uniqueId;
    const rows = await em.find(FederatedUserEntity, where, { fields: ['userId'], orderBy: { id: 'asc' } });
    return [...new Set(rows.map((row) => row.userId))];
  }

  /** Deletes a user's federated_user rows (Keystone's delete_federated_object). */
  async deleteFederatedUsersOf(em: EntityManager, userId: string): Promise<void> {
    await em.nativeDelete(FederatedUserEntity, { userId });
  }

  // ---- service providers ---------------------------------------------------------------------

  findServiceProvider(em: EntityManager, id: string): Promise<ServiceProviderRow | null> {
    return em.findOne(ServiceProviderEntity, { id });
  }

  listServiceProviders(em: EntityManager, filter: ProviderFilter): Promise<ServiceProviderRow[]> {
    return em.find(ServiceProviderEntity, providerConditions(filter), { orderBy: { id: 'asc' } });
  }

  async insertServiceProvider(em: EntityManager, row: ServiceProviderRow): Promise<void> {
    await em.insert(ServiceProviderEntity, row);
  }

  async deleteServiceProvider(em: EntityManager, id: string): Promise<number> {
    return em.nativeDelete(ServiceProviderEntity, { id });
  }
}
