import { CACHE_TOPICS, type ChangeTopic } from '../events/change-topics.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { FederationProtocolRow, IdentityProviderRow, MappingRow, ServiceProviderRow } from '../store/federation-entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { ConflictError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import { FederationRepository, type ProviderFilter } from './federation-repository.ts';
import { validateMappingRules } from './mapping-rules-schema.ts';

export type { ProviderFilter } from './federation-repository.ts';

/** An identity provider as Keystone shows it (remote ids sorted). */
export interface IdentityProvider {
  id: string;
  domainId: string;
  enabled: boolean;
  description: string | null;
  authorizationTtl: number | null;
  remoteIds: string[];
}

export interface IdentityProviderInput {
  /** Absent or null: a domain is created for the provider, as Keystone does. */
  domainId?: string | null | undefined;
  enabled?: boolean | undefined;
  description?: string | null | undefined;
  authorizationTtl?: number | null | undefined;
  /** null: none. */
  remoteIds?: string[] | null | undefined;
}

export type IdentityProviderPatch = Omit<IdentityProviderInput, 'domainId'>;

/** What creating an identity provider did. */
export interface CreatedIdentityProvider {
  identityProvider: IdentityProvider;
  /** The domain created for it (none was named). */
  createdDomainId?: string;
}

export type Mapping = MappingRow;
export type Protocol = FederationProtocolRow;
export type ServiceProvider = ServiceProviderRow;

export interface ProtocolInput {
  mappingId: string;
  remoteIdAttribute?: string | undefined;
}

export interface ProtocolPatch {
  mappingId?: string | undefined;
  remoteIdAttribute?: string | undefined;
}

export interface ServiceProviderInput {
  authUrl: string;
  spUrl: string;
  enabled?: boolean | undefined;
  description?: string | null | undefined;
  /** Absent: Keystone's `[saml] relay_state_prefix` default. */
  relayStatePrefix?: string | undefined;
}

export type ServiceProviderPatch = Partial<ServiceProviderInput>;

/** A service provider as a token body lists it. */
export interface ServiceProviderRef {
  id: string;
  authUrl: string;
  spUrl: string;
}

/**
 * A user's federated objects as Keystone's users API shows and takes them (`federated`): per
 * identity provider, the protocols and the unique id the user has at each.
 */
export interface FederatedObject {
  idp_id: string;
  protocols: { protocol_id: string; unique_id: string }[];
}

/** Keystone's `[saml] relay_state_prefix` default, given to a service provider created without one. */
export const DEFAULT_RELAY_STATE_PREFIX = 'ss:mem:';

/** The description Keystone gives the domain it creates for an identity provider. */
export function identityProviderDomainDescription(idpId: string): string {
  return `Auto generated federated domain for Identity Provider: ${idpId}`;
}

/**
 * Keystone's OS-FEDERATION resources: identity providers (each in a domain, with remote ids unique
 * across all of them), mappings (rules checked against Keystone's schema), the protocols of an
 * identity provider (each naming a mapping) and service providers.
 */
export class FederationService {
  private readonly repository = new FederationRepository();

  /** The enabled service providers as token bodies list them, read once until one changes. */
  private enabledServiceProvidersRead: Promise<ServiceProviderRef[]> | undefined;
  private lastEnabledServiceProviders: ServiceProviderRef[] = [];

  constructor(
    private readonly store: Store,
    private readonly resources: ResourceService,
    /** Drops the cached enabled service providers when one changes, here or on another node. */
    changes?: { onChange(topics: readonly ChangeTopic[], listener: () => void): () => void },
  ) {
    changes?.onChange(CACHE_TOPICS.serviceProviders, () => {
      this.enabledServiceProvidersRead = undefined;
    });
  }

  // ---- identity providers --------------------------------------------------------------------

  async getIdentityProvider(id: string, em: EntityManager = this.store.reader()): Promise<IdentityProvider> {
    const row = await this.repository.findIdentityProvider(em, id);
    if (!row) throw NotFoundError.of('Identity Provider', id);
    return this.withRemoteIds(em, row);
  }

  async listIdentityProviders(filter: ProviderFilter = {}): Promise<IdentityProvider[]> {
    const em = this.store.reader();
    const rows = await this.repository.listIdentityProviders(em, filter);
    const remoteIds = await this.repository.remoteIdsOf(em, rows.map((row) => row.id));
    return rows.map((row) => shapeIdentityProvider(row, remoteIds.get(row.id) ?? []));
  }

  /**
   * Keystone's order: the named domain must exist (404), else a domain is created for the provider
   * (id and name a new uuid hex, enabled, described as Keystone does); then the id must be free and
   * the remote ids not another provider's (409). All in one transaction: a refused provider leaves
   * no domain behind.
   */
  createIdentityProvider(id: string, input: IdentityProviderInput): Promise<CreatedIdentityProvider> {
    return this.retryingConflicts(() =>
      this.store.transaction(async (em) => {
        let createdDomainId: string | undefined;
        let domainId = input.domainId;
        if (domainId) {
          await this.resources.getDomain(domainId, em);
        } else {
          createdDomainId = domainId = newId();
          await this.resources.createDomainIn(em, { id: domainId, name: domainId, description: identityProviderDomainDescription(id), enabled: true });
        }
        if (await this.repository.findIdentityProvider(em, id)) throw new ConflictError('identity_provider', `Duplicate entry: ${id}`);
        const remoteIds = input.remoteIds ?? [];
        await this.refuseTakenRemoteIds(em, id, remoteIds);
        const row: IdentityProviderRow = {
          id,
          domainId,
          enabled: input.enabled ?? false,
          description: input.description ?? null,
          authorizationTtl: input.authorizationTtl ?? null,
        };
        await this.repository.insertIdentityProvider(em, row);
        await this.repository.replaceRemoteIds(em, id, remoteIds);
        // Keystone's answer lists them as sent (a later read sorts them).
        return { identityProvider: shapeIdentityProvider(row, [...remoteIds]), ...(createdDomainId ? { createdDomainId } : {}) };
      }),
    );
  }

  updateIdentityProvider(id: string, patch: IdentityProviderPatch): Promise<IdentityProvider> {
    return this.retryingConflicts(() =>
      this.store.transaction(async (em) => {
        const row = await this.repository.findIdentityProvider(em, id);
        if (!row) throw NotFoundError.of('Identity Provider', id);
        if (patch.enabled !== undefined) row.enabled = patch.enabled;
        if (patch.description !== undefined) row.description = patch.description;
        if (patch.authorizationTtl !== undefined) row.authorizationTtl = patch.authorizationTtl;
        await this.repository.saveChanges(em);
        if (patch.remoteIds !== undefined) {
          const remoteIds = patch.remoteIds ?? [];
          await this.refuseTakenRemoteIds(em, id, remoteIds);
          await this.repository.replaceRemoteIds(em, id, remoteIds);
          // Keystone's answer lists them as sent.
          return shapeIdentityProvider(row, [...remoteIds]);
        }
        return this.withRemoteIds(em, row);
      }),
    );
  }

  /** Its remote ids, protocols and federated users go with it (its domain stays, as in Keystone). */
  deleteIdentityProvider(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteIdentityProvider(em, id))) throw NotFoundError.of('Identity Provider', id);
    });
  }

  // ---- mappings ------------------------------------------------------------------------------

  async getMapping(id: string, em: EntityManager = this.store.reader()): Promise<Mapping> {
    const row = await this.repository.findMapping(em, id);
    if (!row) throw NotFoundError.of('mapping', id);
    return row;
  }

  listMappings(): Promise<Mapping[]> {
    return this.repository.listMappings(this.store.reader());
  }

  /** `rules` is checked against Keystone's mapping schema (400 with its text). */
  async createMapping(id: string, rules: unknown, schemaVersion?: string): Promise<Mapping> {
    validateMappingRules(rules, schemaVersion);
    return this.retryingConflicts(() =>
      this.store.transaction(async (em) => {
        if (await this.repository.findMapping(em, id)) throw new ConflictError('mapping', 'Duplicate entry');
        const row: Mapping = { id, rules: rules as unknown[] };
        await this.repository.insertMapping(em, row);
        return row;
      }),
    );
  }

  /** The rules are replaced (Keystone's update needs them whole). */
  async updateMapping(id: string, rules: unknown, schemaVersion?: string): Promise<Mapping> {
    validateMappingRules(rules, schemaVersion);
    return this.store.transaction(async (em) => {
      const row = await this.getMapping(id, em);
      row.rules = rules as unknown[];
      await this.repository.saveChanges(em);
      return row;
    });
  }

  /** Keystone lets a mapping in use be deleted: its protocols keep naming it. */
  deleteMapping(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteMapping(em, id))) throw NotFoundError.of('mapping', id);
    });
  }

  // ---- protocols -----------------------------------------------------------------------------

  async getProtocol(idpId: string, id: string, em: EntityManager = this.store.reader()): Promise<Protocol> {
    const row = await this.repository.findProtocol(em, idpId, id);
    if (!row) throw protocolNotFound(idpId, id);
    return row;
  }

  /** An unknown provider has no protocols (an empty list, as in Keystone). */
  listProtocols(idpId: string): Promise<Protocol[]> {
    return this.repository.listProtocols(this.store.reader(), idpId);
  }

  /** Keystone's order: the mapping must exist (400), then the provider (404), then the id be free (409). */
  createProtocol(idpId: string, id: string, input: ProtocolInput): Promise<Protocol> {
    return this.retryingConflicts(() =>
      this.store.transaction(async (em) => {
        await this.refuseUnknownMapping(em, input.mappingId);
        if (!(await this.repository.findIdentityProvider(em, idpId))) throw NotFoundError.of('Identity Provider', idpId);
        if (await this.repository.findProtocol(em, idpId, id)) throw new ConflictError('federation_protocol', `Duplicate entry found with ID ${id}`);
        const row: Protocol = { id, idpId, mappingId: input.mappingId, remoteIdAttribute: input.remoteIdAttribute ?? null };
        await this.repository.insertProtocol(em, row);
        return row;
      }),
    );
  }

  /** The mapping named must exist (400) before the protocol is looked up (404). */
  updateProtocol(idpId: string, id: string, patch: ProtocolPatch): Promise<Protocol> {
    return this.store.transaction(async (em) => {
      if (patch.mappingId !== undefined) await this.refuseUnknownMapping(em, patch.mappingId);
      const row = await this.getProtocol(idpId, id, em);
      if (patch.mappingId !== undefined) row.mappingId = patch.mappingId;
      if (patch.remoteIdAttribute !== undefined) row.remoteIdAttribute = patch.remoteIdAttribute;
      await this.repository.saveChanges(em);
      return row;
    });
  }

  /** Its federated users go with it. */
  deleteProtocol(idpId: string, id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteProtocol(em, idpId, id))) throw protocolNotFound(idpId, id);
    });
  }

  // ---- service providers ---------------------------------------------------------------------

  async getServiceProvider(id: string, em: EntityManager = this.store.reader()): Promise<ServiceProvider> {
    const row = await this.repository.findServiceProvider(em, id);
    if (!row) throw NotFoundError.of('Service Provider', id);
    return row;
  }

  /**
   * Keystone's get_enabled_service_providers: what every token body lists as `service_providers`
   * (id, auth_url, sp_url of each enabled one), cached until a service provider changes.
   */
  enabledServiceProviders(): Promise<ServiceProviderRef[]> {
    if (!this.enabledServiceProvidersRead) {
      const read: Promise<ServiceProviderRef[]> = this.repository.listServiceProviders(this.store.reader(), {}).then(
        (rows) => (this.lastEnabledServiceProviders = rows.filter((row) => row.enabled).map((row) => ({ id: row.id, authUrl: row.authUrl, spUrl: row.spUrl }))),
        () => {
          // The database out of reach: token bodies keep what was last known (validations served
          // from cache must not fail for a list), and the next body asks again.
          if (this.enabledServiceProvidersRead === read) this.enabledServiceProvidersRead = undefined;
          return this.lastEnabledServiceProviders;
        },
      );
      this.enabledServiceProvidersRead = read;
    }
    return this.enabledServiceProvidersRead;
  }

  listServiceProviders(filter: ProviderFilter = {}): Promise<ServiceProvider[]> {
    return this.repository.listServiceProviders(this.store.reader(), filter);
  }

  createServiceProvider(id: string, input: ServiceProviderInput): Promise<ServiceProvider> {
    return this.retryingConflicts(() =>
      this.store.transaction(async (em) => {
        if (await this.repository.findServiceProvider(em, id)) throw new ConflictError('service_provider', `Duplicate entry found with ID ${id}`);
        const row: ServiceProvider = {
          id,
          enabled: input.enabled ?? false,
          description: input.description ?? null,
          authUrl: input.authUrl,
          spUrl: input.spUrl,
          relayStatePrefix: input.relayStatePrefix ?? DEFAULT_RELAY_STATE_PREFIX,
        };
        await this.repository.insertServiceProvider(em, row);
        return row;
      }),
    );
  }

  updateServiceProvider(id: string, patch: ServiceProviderPatch): Promise<ServiceProvider> {
    return this.store.transaction(async (em) => {
      const row = await this.getServiceProvider(id, em);
      if (patch.authUrl !== undefined) row.authUrl = patch.authUrl;
      if (patch.spUrl !== undefined) row.spUrl = patch.spUrl;
      if (patch.enabled !== undefined) row.enabled = patch.enabled;
      if (patch.description !== undefined) row.description = patch.description;
      if (patch.relayStatePrefix !== undefined) row.relayStatePrefix = patch.relayStatePrefix;
      await this.repository.saveChanges(em);
      return row;
    });
  }

  deleteServiceProvider(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      if (!(await this.repository.deleteServiceProvider(em, id))) throw NotFoundError.of('Service Provider', id);
    });
  }

  // ---- helpers -------------------------------------------------------------------------------

  // ---- users' federated objects (Keystone's identity core and shadow users back end) -----------

  /** A user's federated objects (Keystone's get_federated_objects): one entry per provider, in the rows' order. */
  async federatedObjectsOf(userId: string, em: EntityManager = this.store.reader()): Promise<FederatedObject[]> {
    const byIdp = new Map<string, FederatedObject>();
    for (const row of await this.repository.federatedUsersOf(em, userId)) {
      let entry = byIdp.get(row.idpId);
      if (!entry) byIdp.set(row.idpId, (entry = { idp_id: row.idpId, protocols: [] }));
      entry.protocols.push({ protocol_id: row.protocolId, unique_id: row.uniqueId });
    }
    return [...byIdp.values()];
  }

  /** The users with federated objects matching every condition given (GET /v3/users?idp_id=…&protocol_id=…&unique_id=…). */
  federatedUserIds(filter: { idpId?: string; protocolId?: string; uniqueId?: string }): Promise<string[]> {
    return this.repository.federatedUserIds(this.store.reader(), filter);
  }

  /**
   * Keystone's _validate_federated_objects: each provider and each of its protocols must exist, else
   * a 400 with Keystone's texts ("Could not find Identity Provider: <id>", "Could not find federated
   * protocol <p> for Identity Provider: <id>.").
   */
  async validateFederatedObjects(objects: readonly FederatedObject[]): Promise<void> {
    const em = this.store.reader();
    for (const object of objects) {
      if (!(await this.repository.findIdentityProvider(em, object.idp_id))) throw new ValidationError(`Could not find Identity Provider: ${object.idp_id}`);
      for (const protocol of object.protocols) {
        if (!(await this.repository.findProtocol(em, object.idp_id, protocol.protocol_id))) {
          throw new ValidationError(`Could not find federated protocol ${protocol.protocol_id} for Identity Provider: ${object.idp_id}.`);
        }
      }
    }
  }

  /**
   * The user's federated objects become exactly these (Keystone's delete_federated_object then
   * create_federated_object per protocol, the display name the user's name). A (provider, protocol,
   * unique id) another user already has: 409.
   */
  async replaceFederatedObjects(userId: string, displayName: string, objects: readonly FederatedObject[]): Promise<void> {
    try {
      await this.store.transaction(async (em) => {
        await this.repository.deleteFederatedUsersOf(em, userId);
        for (const object of objects) {
          for (const protocol of object.protocols) {
            await this.repository.insertFederatedUser(em, { userId, idpId: object.idp_id, protocolId: protocol.protocol_id, uniqueId: protocol.unique_id, displayName });
          }
        }
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError('federated_user', 'Duplicate entry');
      throw error;
    }
  }

  private async withRemoteIds(em: EntityManager, row: IdentityProviderRow): Promise<IdentityProvider> {
    const remoteIds = await this.repository.remoteIdsOf(em, [row.id]);
    return shapeIdentityProvider(row, remoteIds.get(row.id) ?? []);
  }

  /** Keystone's 409 names the first remote id (in the order given) another provider has. */
  private async refuseTakenRemoteIds(em: EntityManager, idpId: string, remoteIds: string[]): Promise<void> {
    const taken = await this.repository.remoteIdsTakenByOthers(em, remoteIds, idpId);
    const first = remoteIds.find((remoteId) => taken.has(remoteId));
    if (first !== undefined) throw new ConflictError('identity_provider', `Duplicate remote ID: ${first}`);
  }

  private async refuseUnknownMapping(em: EntityManager, mappingId: string): Promise<void> {
    if (!(await this.repository.findMapping(em, mappingId))) throw new ValidationError(`Invalid mapping id: ${mappingId}`);
  }

  /**
   * Runs a creating transaction again when a concurrent writer took the id (or a remote id) between
   * its check and its insert: the second run sees the row and answers Keystone's 409.
   */
  private async retryingConflicts<T>(work: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (attempt < 3 && isUniqueViolation(error)) continue;
        throw error;
      }
    }
  }
}

function shapeIdentityProvider(row: IdentityProviderRow, remoteIds: string[]): IdentityProvider {
  return {
    id: row.id,
    domainId: row.domainId,
    enabled: row.enabled,
    description: row.description ?? null,
    authorizationTtl: row.authorizationTtl ?? null,
    remoteIds,
  };
}

function protocolNotFound(idpId: string, id: string): NotFoundError {
  return new NotFoundError(`Could not find federated protocol ${id} for Identity Provider: ${idpId}.`);
}
