import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { federationEntities } from './federation-entities.ts';

// Scalar-only entities: foreign keys are plain id columns (constraints live in the migrations), so a
// service loads exactly the rows it needs and no lazy relation can issue a surprise query.

export type Json = Record<string, unknown>;

const p = defineEntity.properties;

/** Domains and projects share one table, as in Keystone: a domain is a project with is_domain. */
export const ProjectEntity = defineEntity({
  name: 'Project',
  tableName: 'project',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    domainId: p.string().nullable(),
    parentId: p.string().nullable(),
    isDomain: p.boolean(),
    enabled: p.boolean(),
    description: p.text(),
    extra: p.json<Json>(),
    options: p.json<Json>(),
    tags: p.json<string[]>(),
    createdAt: p.datetime(),
  },
});
export type ProjectRow = InferEntity<typeof ProjectEntity>;

export const UserEntity = defineEntity({
  name: 'User',
  tableName: 'identity_user',
  properties: {
    id: p.string().primary(),
    domainId: p.string(),
    name: p.string(),
    enabled: p.boolean(),
    defaultProjectId: p.string().nullable(),
    extra: p.json<Json>(),
    options: p.json<Json>(),
    failedAuthCount: p.integer(),
    failedAuthAt: p.datetime().nullable(),
    lastActiveAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  },
});
export type UserRow = InferEntity<typeof UserEntity>;

/** One row per password a user has had; the newest is current (history for security compliance). */
export const PasswordEntity = defineEntity({
  name: 'Password',
  tableName: 'password',
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.string(),
    passwordHash: p.text().nullable(),
    createdAt: p.datetime(),
    expiresAt: p.datetime().nullable(),
    selfService: p.boolean(),
  },
});
export type PasswordRow = InferEntity<typeof PasswordEntity>;

export const GroupEntity = defineEntity({
  name: 'Group',
  tableName: 'identity_group',
  properties: {
    id: p.string().primary(),
    domainId: p.string(),
    name: p.string(),
    description: p.text(),
    extra: p.json<Json>(),
  },
});
export type GroupRow = InferEntity<typeof GroupEntity>;

export const MembershipEntity = defineEntity({
  name: 'Membership',
  tableName: 'group_membership',
  properties: {
    userId: p.string().primary(),
    groupId: p.string().primary(),
  },
});
export type MembershipRow = InferEntity<typeof MembershipEntity>;

export const RoleEntity = defineEntity({
  name: 'Role',
  tableName: 'role',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    domainId: p.string().nullable(),
    description: p.text().nullable(),
    options: p.json<Json>(),
    extra: p.json<Json>(),
  },
});
export type RoleRow = InferEntity<typeof RoleEntity>;

export const ImpliedRoleEntity = defineEntity({
  name: 'ImpliedRole',
  tableName: 'implied_role',
  properties: {
    priorRoleId: p.string().primary(),
    impliedRoleId: p.string().primary(),
  },
});
export type ImpliedRoleRow = InferEntity<typeof ImpliedRoleEntity>;

/** actorType user|group; targetType project|domain|system (targetId 'all' for the system). */
export const AssignmentEntity = defineEntity({
  name: 'Assignment',
  tableName: 'role_assignment',
  properties: {
    actorType: p.string().primary(),
    actorId: p.string().primary(),
    targetType: p.string().primary(),
    targetId: p.string().primary(),
    roleId: p.string().primary(),
    inherited: p.boolean().primary(),
  },
});
export type AssignmentRow = InferEntity<typeof AssignmentEntity>;

export const RegionEntity = defineEntity({
  name: 'Region',
  tableName: 'region',
  properties: {
    id: p.string().primary(),
    description: p.text(),
    parentRegionId: p.string().nullable(),
    extra: p.json<Json>(),
  },
});
export type RegionRow = InferEntity<typeof RegionEntity>;

export const ServiceEntity = defineEntity({
  name: 'Service',
  tableName: 'service',
  properties: {
    id: p.string().primary(),
    type: p.string(),
    name: p.string(),
    description: p.text().nullable(),
    enabled: p.boolean(),
    extra: p.json<Json>(),
  },
});
export type ServiceRow = InferEntity<typeof ServiceEntity>;

export const EndpointEntity = defineEntity({
  name: 'Endpoint',
  tableName: 'endpoint',
  properties: {
    id: p.string().primary(),
    serviceId: p.string(),
    interface: p.string(),
    regionId: p.string().nullable(),
    url: p.text(),
    enabled: p.boolean(),
    extra: p.json<Json>(),
  },
});
export type EndpointRow = InferEntity<typeof EndpointEntity>;

/** Keystone's policy store: an opaque blob and its type (/v3/policies). */
export const PolicyEntity = defineEntity({
  name: 'Policy',
  tableName: 'policy',
  properties: {
    id: p.string().primary(),
    type: p.string(),
    blob: p.text(),
    extra: p.json<Json>(),
  },
});
export type PolicyRow = InferEntity<typeof PolicyEntity>;

/** Keystone's credentials (/v3/credentials, OS-EC2): the blob is stored encrypted, never in clear. */
export const CredentialEntity = defineEntity({
  name: 'Credential',
  tableName: 'credential',
  properties: {
    id: p.string().primary(),
    userId: p.string(),
    projectId: p.string().nullable(),
    type: p.string(),
    encryptedBlob: p.text(),
    keyHash: p.string(),
    extra: p.json<Json>(),
  },
});
export type CredentialRow = InferEntity<typeof CredentialEntity>;

/** OS-ENDPOINT-POLICY: a policy for an endpoint, a service, or a service in a region (one per target). */
export const PolicyAssociationEntity = defineEntity({
  name: 'PolicyAssociation',
  tableName: 'policy_association',
  properties: {
    id: p.integer().primary().autoincrement(),
    policyId: p.string(),
    endpointId: p.string().nullable(),
    serviceId: p.string().nullable(),
    regionId: p.string().nullable(),
  },
});
export type PolicyAssociationRow = InferEntity<typeof PolicyAssociationEntity>;
/** OS-EP-FILTER: an endpoint associated with a project. */
export const ProjectEndpointEntity = defineEntity({
  name: 'ProjectEndpoint',
  tableName: 'project_endpoint',
  properties: {
    endpointId: p.string().primary(),
    projectId: p.string().primary(),
  },
});
export type ProjectEndpointRow = InferEntity<typeof ProjectEndpointEntity>;

/** OS-EP-FILTER: the endpoints whose interface, service_id and region_id equal the filters'. */
export const EndpointGroupEntity = defineEntity({
  name: 'EndpointGroup',
  tableName: 'endpoint_group',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    description: p.text().nullable(),
    filters: p.json<Json>(),
  },
});
export type EndpointGroupRow = InferEntity<typeof EndpointGroupEntity>;

/** OS-EP-FILTER: an endpoint group associated with a project. */
export const ProjectEndpointGroupEntity = defineEntity({
  name: 'ProjectEndpointGroup',
  tableName: 'project_endpoint_group',
  properties: {
    endpointGroupId: p.string().primary(),
    projectId: p.string().primary(),
  },
});
export type ProjectEndpointGroupRow = InferEntity<typeof ProjectEndpointGroupEntity>;
/** A service's default for a resource (Keystone's unified limits), in one region or in all. */
export const RegisteredLimitEntity = defineEntity({
  name: 'RegisteredLimit',
  tableName: 'registered_limit',
  properties: {
    id: p.string().primary(),
    serviceId: p.string(),
    regionId: p.string().nullable(),
    resourceName: p.string(),
    defaultLimit: p.integer(),
    description: p.text().nullable(),
  },
});
export type RegisteredLimitRow = InferEntity<typeof RegisteredLimitEntity>;

/** A project's or a domain's own limit for a registered resource (exactly one of the two is set). */
export const LimitEntity = defineEntity({
  name: 'Limit',
  tableName: 'limit',
  properties: {
    id: p.string().primary(),
    projectId: p.string().nullable(),
    domainId: p.string().nullable(),
    serviceId: p.string(),
    regionId: p.string().nullable(),
    resourceName: p.string(),
    resourceLimit: p.integer(),
    description: p.text().nullable(),
  },
});
export type LimitRow = InferEntity<typeof LimitEntity>;

export const RevocationEventEntity = defineEntity({
  name: 'RevocationEvent',
  tableName: 'revocation_event',
  properties: {
    id: p.integer().primary().autoincrement(),
    domainId: p.string().nullable(),
    projectId: p.string().nullable(),
    userId: p.string().nullable(),
    roleId: p.string().nullable(),
    trustId: p.string().nullable(),
    consumerId: p.string().nullable(),
    accessTokenId: p.string().nullable(),
    auditId: p.string().nullable(),
    auditChainId: p.string().nullable(),
    expiresAt: p.datetime().nullable(),
    issuedBefore: p.datetime(),
    revokedAt: p.datetime(),
  },
});
export type RevocationEventRow = InferEntity<typeof RevocationEventEntity>;


export const ApplicationCredentialEntity = defineEntity({
  name: 'ApplicationCredential',
  tableName: 'application_credential',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    userId: p.string(),
    projectId: p.string().nullable(),
    secretHash: p.text(),
    description: p.text().nullable(),
    expiresAt: p.datetime().nullable(),
    /** Microseconds past expiresAt's milliseconds (a Date holds no more). */
    expiresAtMicroseconds: p.smallint().nullable(),
    unrestricted: p.boolean().nullable(),
    createdAt: p.datetime(),
  },
});
export type ApplicationCredentialRow = InferEntity<typeof ApplicationCredentialEntity>;

export const ApplicationCredentialRoleEntity = defineEntity({
  name: 'ApplicationCredentialRole',
  tableName: 'application_credential_role',
  properties: {
    applicationCredentialId: p.string().primary(),
    roleId: p.string().primary(),
  },
});

export const AccessRuleEntity = defineEntity({
  name: 'AccessRule',
  tableName: 'access_rule',
  properties: {
    id: p.string().primary(),
    userId: p.string(),
    service: p.string(),
    path: p.string(),
    method: p.string(),
  },
});
export type AccessRuleRow = InferEntity<typeof AccessRuleEntity>;

export const ApplicationCredentialAccessRuleEntity = defineEntity({
  name: 'ApplicationCredentialAccessRule',
  tableName: 'application_credential_access_rule',
  properties: {
    applicationCredentialId: p.string().primary(),
    accessRuleId: p.string().primary(),
  },
});

/** Tokens of the (deprecated) uuid provider, which must be stored to be validated. */
export const TokenEntity = defineEntity({
  name: 'Token',
  tableName: 'token',
  properties: {
    id: p.string().primary(),
    payload: p.json<Json>(),
    issuedAt: p.datetime(),
    expiresAt: p.datetime(),
  },
});

/** One option of a domain's own configuration (Keystone's domain config API); sensitive ones are never returned. */
export const DomainConfigOptionEntity = defineEntity({
  name: 'DomainConfigOption',
  tableName: 'domain_config_option',
  properties: {
    domainId: p.string().primary(),
    groupName: p.string().primary(),
    optionName: p.string().primary(),
    value: p.json<unknown>().nullable(),
    sensitive: p.boolean(),
  },
});
export type DomainConfigOptionRow = InferEntity<typeof DomainConfigOptionEntity>;
/** Keystone's id_mapping: public ids of the users and groups of directory (LDAP) domains. */
export const IdMappingEntity = defineEntity({
  name: 'IdMapping',
  tableName: 'id_mapping',
  properties: {
    publicId: p.string().primary(),
    domainId: p.string(),
    localId: p.string(),
    entityType: p.string(),
  },
});
export type IdMappingRow = InferEntity<typeof IdMappingEntity>;
/** OS-TRUST: a trustor's delegation of roles on a project to a trustee (soft-deleted, as Keystone). */
export const TrustEntity = defineEntity({
  name: 'Trust',
  tableName: 'trust',
  properties: {
    id: p.string().primary(),
    trustorUserId: p.string(),
    trusteeUserId: p.string(),
    projectId: p.string().nullable(),
    impersonation: p.boolean(),
    expiresAt: p.datetime().nullable(),
    remainingUses: p.integer().nullable(),
    redelegatedTrustId: p.string().nullable(),
    redelegationCount: p.integer(),
    deletedAt: p.datetime().nullable(),
    /** Attributes of the create body that are not columns (Keystone keeps and echoes them). */
    extra: p.json<Record<string, unknown>>(),
  },
});
export type TrustRow = InferEntity<typeof TrustEntity>;

export const TrustRoleEntity = defineEntity({
  name: 'TrustRole',
  tableName: 'trust_role',
  properties: {
    trustId: p.string().primary(),
    roleId: p.string().primary(),
  },
});

export const OAuth1ConsumerEntity = defineEntity({
  name: 'OAuth1Consumer',
  tableName: 'oauth1_consumer',
  properties: {
    id: p.string().primary(),
    description: p.text().nullable(),
    /** Encrypted (src/oauth1/secret-box.ts): signatures are checked with the plain secret. */
    secret: p.text(),
    extra: p.json<Json>(),
  },
});
export type OAuth1ConsumerRow = InferEntity<typeof OAuth1ConsumerEntity>;

export const OAuth1RequestTokenEntity = defineEntity({
  name: 'OAuth1RequestToken',
  tableName: 'oauth1_request_token',
  properties: {
    id: p.string().primary(),
    secret: p.text(),
    verifier: p.string().nullable(),
    authorizingUserId: p.string().nullable(),
    requestedProjectId: p.string(),
    roleIds: p.json<string[]>().nullable(),
    consumerId: p.string(),
    expiresAt: p.datetime().nullable(),
  },
});
export type OAuth1RequestTokenRow = InferEntity<typeof OAuth1RequestTokenEntity>;

export const OAuth1AccessTokenEntity = defineEntity({
  name: 'OAuth1AccessToken',
  tableName: 'oauth1_access_token',
  properties: {
    id: p.string().primary(),
    secret: p.text(),
    authorizingUserId: p.string(),
    projectId: p.string(),
    roleIds: p.json<string[]>(),
    consumerId: p.string(),
    expiresAt: p.datetime().nullable(),
  },
});
export type OAuth1AccessTokenRow = InferEntity<typeof OAuth1AccessTokenEntity>;

export const OAuth1NonceEntity = defineEntity({
  name: 'OAuth1Nonce',
  tableName: 'oauth1_nonce',
  properties: {
    consumerId: p.string().primary(),
    nonce: p.string().primary(),
    timestamp: p.bigint('number').primary(),
  },
});

export const allEntities = [
  ProjectEntity,
  UserEntity,
  PasswordEntity,
  GroupEntity,
  MembershipEntity,
  RoleEntity,
  ImpliedRoleEntity,
  AssignmentEntity,
  RegionEntity,
  ServiceEntity,
  EndpointEntity,
  PolicyEntity,
  PolicyAssociationEntity,
  CredentialEntity,
  ProjectEndpointEntity,
  EndpointGroupEntity,
  ProjectEndpointGroupEntity,
  RegisteredLimitEntity,
  LimitEntity,
  RevocationEventEntity,
  ApplicationCredentialEntity,
  ApplicationCredentialRoleEntity,
  AccessRuleEntity,
  ApplicationCredentialAccessRuleEntity,
  TokenEntity,
  DomainConfigOptionEntity,
  IdMappingEntity,
  TrustEntity,
  TrustRoleEntity,
  OAuth1ConsumerEntity,
  OAuth1RequestTokenEntity,
  OAuth1AccessTokenEntity,
  OAuth1NonceEntity,
  ...federationEntities,
];
