import { defineEntity, type InferEntity } from '@mikro-orm/core';

// OS-FEDERATION rows (migrations/Migration20261129000000_federation.ts), Keystone's tables.

const p = defineEntity.properties;

export const IdentityProviderEntity = defineEntity({
  name: 'IdentityProvider',
  tableName: 'identity_provider',
  properties: {
    id: p.string().primary(),
    domainId: p.string(),
    enabled: p.boolean(),
    description: p.text().nullable(),
    authorizationTtl: p.integer().nullable(),
  },
});
export type IdentityProviderRow = InferEntity<typeof IdentityProviderEntity>;

/** One remote id of an identity provider (unique across all of them). */
export const IdpRemoteIdEntity = defineEntity({
  name: 'IdpRemoteId',
  tableName: 'idp_remote_ids',
  properties: {
    remoteId: p.string().primary(),
    idpId: p.string(),
  },
});
export type IdpRemoteIdRow = InferEntity<typeof IdpRemoteIdEntity>;

export const MappingEntity = defineEntity({
  name: 'Mapping',
  tableName: 'mapping',
  properties: {
    id: p.string().primary(),
    rules: p.json<unknown[]>(),
  },
});
export type MappingRow = InferEntity<typeof MappingEntity>;

export const FederationProtocolEntity = defineEntity({
  name: 'FederationProtocol',
  tableName: 'federation_protocol',
  properties: {
    id: p.string().primary(),
    idpId: p.string().primary(),
    mappingId: p.string(),
    remoteIdAttribute: p.string().nullable(),
  },
});
export type FederationProtocolRow = InferEntity<typeof FederationProtocolEntity>;

export const ServiceProviderEntity = defineEntity({
  name: 'ServiceProvider',
  tableName: 'service_provider',
  properties: {
    id: p.string().primary(),
    enabled: p.boolean(),
    description: p.text().nullable(),
    authUrl: p.string(),
    spUrl: p.string(),
    relayStatePrefix: p.string(),
  },
});
export type ServiceProviderRow = InferEntity<typeof ServiceProviderEntity>;

/** A user shadowed at a federated login: (idp, protocol, unique id) → the local user. */
export const FederatedUserEntity = defineEntity({
  name: 'FederatedUser',
  tableName: 'federated_user',
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.string(),
    idpId: p.string(),
    protocolId: p.string(),
    uniqueId: p.string(),
    displayName: p.string().nullable(),
  },
});
export type FederatedUserRow = InferEntity<typeof FederatedUserEntity>;

export const federationEntities = [
  IdentityProviderEntity,
  IdpRemoteIdEntity,
  MappingEntity,
  FederationProtocolEntity,
  ServiceProviderEntity,
  FederatedUserEntity,
];
