import type { ServiceProviderRef } from '../federation/federation-service.ts';
import type { FastifyRequest } from 'fastify';
import type { AssignmentEntry, Role } from '../assignment/assignment-service.ts';
import type { CatalogEntry, Endpoint, Region, Service } from '../catalog/catalog-service.ts';
import type { Group, User } from '../identity/identity-service.ts';
import type { Policy } from '../policy-store/policy-store-service.ts';
import type { Credential, Ec2Credential } from '../credential/credential-service.ts';
import type { Limit, RegisteredLimit } from '../limit/limit-service.ts';
import type { ProjectRow } from '../store/entities.ts';
import type { Static } from 'typebox';
import type { RevocationEvent } from '../events/revocation.ts';
import type { TokenContext } from '../token/token-service.ts';
import type { AuthReceipt } from '../support/errors.ts';
import { baseUrl, selfLink } from './links.ts';
import type { RevokeEvent, TokenBodyShape } from './schemas.ts';

// Keystone JSON shapes. Extra attributes are spread first so they can never mask a real field.

/** Token times: always .000000 and Z. */
export function tokenTime(milliseconds: number): string {
  // toISOString() always ends in .sssZ; slicing is the regex replace without its cost (every token body).
  return `${new Date(Math.floor(milliseconds / 1000) * 1000).toISOString().slice(0, -5)}.000000Z`;
}

/** Naive ISO with microseconds, no zone (password_expires_at, application credential expiry). */
export function naiveTime(date: Date | null | undefined): string | null {
  if (!date) return null;
  return `${date.toISOString().slice(0, -1)}000`;
}

export function renderDomain(request: FastifyRequest, domain: ProjectRow) {
  return {
    ...domain.extra,
    id: domain.id,
    name: domain.name,
    description: domain.description,
    enabled: domain.enabled,
    tags: domain.tags,
    options: domain.options,
    links: selfLink(request, 'domains', domain.id),
  };
}

export function renderProject(request: FastifyRequest, project: ProjectRow) {
  return {
    ...project.extra,
    id: project.id,
    name: project.name,
    domain_id: project.domainId ?? null,
    description: project.description,
    enabled: project.enabled,
    parent_id: project.parentId ?? null,
    is_domain: project.isDomain,
    tags: project.tags,
    options: project.options,
    links: selfLink(request, 'projects', project.id),
  };
}

export function renderUser(request: FastifyRequest, user: User) {
  return {
    ...user.extra,
    id: user.id,
    name: user.name,
    domain_id: user.domainId,
    enabled: user.enabled,
    password_expires_at: naiveTime(user.passwordExpiresAt),
    options: user.options,
    ...(user.defaultProjectId ? { default_project_id: user.defaultProjectId } : {}),
    links: selfLink(request, 'users', user.id),
  };
}

export function renderGroup(request: FastifyRequest, group: Group) {
  return {
    ...group.extra,
    id: group.id,
    name: group.name,
    domain_id: group.domainId,
    description: group.description,
    links: selfLink(request, 'groups', group.id),
  };
}

export function renderRole(request: FastifyRequest, role: Role) {
  return {
    ...role.extra,
    id: role.id,
    name: role.name,
    domain_id: role.domainId ?? null,
    description: role.description ?? null,
    options: role.options,
    links: selfLink(request, 'roles', role.id),
  };
}

/** The short role form used inside implied-role responses. */
export function renderRoleReference(request: FastifyRequest, role: Role) {
  return { id: role.id, name: role.name, links: selfLink(request, 'roles', role.id) };
}

export function renderRegion(request: FastifyRequest, region: Region) {
  return {
    ...region.extra,
    id: region.id,
    description: region.description,
    parent_region_id: region.parentRegionId ?? null,
    links: selfLink(request, 'regions', region.id),
  };
}

export function renderService(request: FastifyRequest, service: Service) {
  return {
    ...service.extra,
    id: service.id,
    type: service.type,
    name: service.name,
    enabled: service.enabled,
    ...(service.description !== null && service.description !== undefined ? { description: service.description } : {}),
    links: selfLink(request, 'services', service.id),
  };
}

export function renderEndpoint(request: FastifyRequest, endpoint: Endpoint) {
  return {
    ...endpoint.extra,
    id: endpoint.id,
    interface: endpoint.interface,
    region_id: endpoint.regionId ?? null,
    region: endpoint.regionId ?? null,
    service_id: endpoint.serviceId,
    url: endpoint.url,
    enabled: endpoint.enabled,
    links: selfLink(request, 'endpoints', endpoint.id),
  };
}

/** A policy blob; `collection` is where its self link points (Keystone's effective-policy answer says endpoints). */
export function renderPolicy(request: FastifyRequest, policy: Policy, collection: 'policies' | 'endpoints' = 'policies') {
  return {
    ...policy.extra,
    id: policy.id,
    type: policy.type,
    blob: policy.blob,
    links: selfLink(request, collection, policy.id),
  };
}

/** A credential as /v3/credentials shows it: its extra attributes, then Keystone's columns, the blob decrypted. */
export function renderCredential(request: FastifyRequest, credential: Credential) {
  return {
    ...credential.extra,
    id: credential.id,
    user_id: credential.userId,
    project_id: credential.projectId,
    type: credential.type,
    blob: credential.blob,
    links: selfLink(request, 'credentials', credential.id),
  };
}

/** An ec2 credential as OS-EC2 shows it, linked by its access key under its user. */
export function renderEc2Credential(request: FastifyRequest, credential: Ec2Credential) {
  return {
    user_id: credential.userId,
    tenant_id: credential.tenantId,
    access: credential.access,
    secret: credential.secret,
    trust_id: credential.trustId,
    links: { self: `${baseUrl(request)}/v3/users/${encodeURIComponent(credential.userId)}/credentials/OS-EC2/${encodeURIComponent(String(credential.access))}` },
  };
}

/** An endpoint as OS-ENDPOINT-POLICY lists it: without the legacy `region` attribute. */
export function renderPolicyEndpoint(request: FastifyRequest, endpoint: Endpoint) {
  const { region: _region, ...rest } = renderEndpoint(request, endpoint);
  return rest;
}

/**
 * Rendered catalogs by the (cached, shared) catalog they come from. Module-level on purpose: a pure
 * memo keyed weakly by immutable objects (a changed catalog is a new array), so it holds nothing
 * once the key is gone and answers exactly what rendering again would; owning it per app would
 * only thread a parameter through every renderer.
 */
const renderedCatalogs = new WeakMap<CatalogEntry[], ReturnType<typeof renderCatalogOnce>>();

export function renderCatalog(catalog: CatalogEntry[]) {
  let rendered = renderedCatalogs.get(catalog);
  if (!rendered) {
    rendered = renderCatalogOnce(catalog);
    renderedCatalogs.set(catalog, rendered);
  }
  return rendered;
}

function renderCatalogOnce(catalog: CatalogEntry[]) {
  return catalog.map(({ service, endpoints }) => ({
    id: service.id,
    type: service.type,
    name: service.name,
    endpoints: endpoints.map((endpoint) => ({
      id: endpoint.id,
      interface: endpoint.interface,
      region_id: endpoint.regionId,
      region: endpoint.regionId,
      url: endpoint.url,
    })),
  }));
}

/** Token bodies without catalog by the (cached, shared, immutable) validated token they come from; module-level for the same reason. */
const renderedTokens = new WeakMap<TokenContext, TokenBodyShape>();

/**
 * The token body (spec §2.4), with the catalog when given (scoped tokens only) and the enabled K2K
 * service providers when there are any (Keystone lists them in every token body).
 */
export function renderToken(token: TokenContext, catalog?: CatalogEntry[], serviceProviders: readonly ServiceProviderRef[] = []): TokenBodyShape {
  let body = renderedTokens.get(token);
  if (!body) {
    body = renderTokenOnce(token);
    renderedTokens.set(token, body);
  }
  const withCatalog = catalog && token.scope.type !== 'unscoped' ? { ...body, catalog: renderCatalog(catalog) } : body;
  if (serviceProviders.length === 0) return withCatalog;
  return { ...withCatalog, service_providers: serviceProviders.map((sp) => ({ auth_url: sp.authUrl, id: sp.id, sp_url: sp.spUrl })) };
}

function renderTokenOnce(token: TokenContext): TokenBodyShape {
  const body: TokenBodyShape = {
    methods: token.methods,
    user: {
      domain: { id: token.user.domainId, name: token.user.domainName },
      id: token.user.id,
      name: token.user.name,
      password_expires_at: naiveTime(token.user.passwordExpiresAt),
    },
    audit_ids: token.auditIds,
    expires_at: tokenTime(token.expiresAt),
    issued_at: tokenTime(token.issuedAt),
  };
  switch (token.scope.type) {
    case 'project':
      body.project = {
        domain: { id: token.scope.project.domainId, name: token.scope.project.domainName },
        id: token.scope.project.id,
        name: token.scope.project.name,
      };
      body.is_domain = token.scope.project.isDomain;
      break;
    case 'domain':
      body.domain = { id: token.scope.domain.id, name: token.scope.domain.name };
      break;
    case 'system':
      body.system = { all: true };
      break;
    case 'unscoped':
      break;
  }
  if (token.applicationCredential) {
    const { id, name, restricted, accessRules } = token.applicationCredential;
    body.application_credential = {
      id,
      name,
      restricted,
      ...(accessRules.length ? { access_rules: accessRules.map((rule) => ({ id: rule.id, service: rule.service, path: rule.path, method: rule.method })) } : {}),
    };
  }
  if (token.trust) {
    const { id, trustorUserId, trusteeUserId, impersonation, roles } = token.trust;
    body['OS-TRUST:trust'] = { id, trustor_user: { id: trustorUserId }, trustee_user: { id: trusteeUserId }, impersonation };
    // Keystone's trust token has no is_domain, and lists its roles in full.
    delete body.is_domain;
    body.roles = roles.map((role) => ({ id: role.id, name: role.name, domain_id: role.domainId ?? null, description: role.description ?? null, options: role.options }));
    return body;
  }
  if (token.roleDetails) {
    // A scoped federated token: Keystone 22 lists its roles in full (its token model's role dicts).
    body.roles = token.roleDetails.map((role) => ({ id: role.id, name: role.name, domain_id: role.domainId ?? null, description: role.description ?? null, options: role.options }));
  } else if (token.scope.type !== 'unscoped') body.roles = token.roles.map((role) => ({ id: role.id, name: role.name }));
  if (token.oauth1) body['OS-OAUTH1'] = { access_token_id: token.oauth1.accessTokenId, consumer_id: token.oauth1.consumerId };
  if (token.federation) {
    // Keystone's federated user: its groups, provider and protocol; no password_expires_at.
    const { groupIds, identityProviderId, protocolId } = token.federation;
    delete body.user.password_expires_at;
    body.user['OS-FEDERATION'] = { groups: groupIds.map((id) => ({ id })), identity_provider: { id: identityProviderId }, protocol: { id: protocolId } };
  }
  return body;
}

/** Names for include_names, looked up once per listing. */
export interface AssignmentNames {
  users: Map<string, { name: string; domainId: string }>;
  groups: Map<string, { name: string; domainId: string }>;
  projects: Map<string, { name: string; domainId: string | null; isDomain: boolean }>;
  roles: Map<string, { name: string; domainId: string | null }>;
}

/**
 * An object of a rendered role assignment, made by a constructor and filled in, not written as an
 * object literal. V8 tenures a literal's allocation site when one young-generation collection finds
 * all of its recent objects alive, as it does when it falls while a page of a long listing is in
 * flight; from then on, for the life of the process, every object the literal makes is allocated
 * in the old generation. The effective listing of 200k assignments put ~36 MB of such garbage there
 * (bench/README.md, "the effective list's promoted pages"). A constructor has no such site.
 */
class JsonNode {
  [key: string]: unknown;
}

/** The rendered assignment: its actor (`user` or `group`) besides these. */
type RenderedAssignment = JsonNode & { role: JsonNode; scope: JsonNode; links: JsonNode };

export function renderAssignment(request: FastifyRequest, entry: AssignmentEntry, names?: AssignmentNames): RenderedAssignment {
  const base = `${baseUrl(request)}/v3`;
  const domainRef = (id: string | null | undefined) => {
    if (!id) return undefined;
    const domain = new JsonNode();
    domain.id = id;
    domain.name = names?.projects.get(id)?.name ?? '';
    return domain;
  };
  // Keys are set in Keystone's order: the serializer writes these open objects as they are.
  const actor = entry.actorType === 'user' ? names?.users.get(entry.actorId) : names?.groups.get(entry.actorId);
  const actorBody = new JsonNode();
  actorBody.id = entry.actorId;
  if (names && actor) {
    actorBody.name = actor.name;
    actorBody.domain = domainRef(actor.domainId);
  }
  const role = names?.roles.get(entry.roleId);
  const roleBody = new JsonNode();
  roleBody.id = entry.roleId;
  if (names && role) {
    roleBody.name = role.name;
    if (role.domainId) roleBody.domain = domainRef(role.domainId);
  }
  const scope = new JsonNode();
  const target = new JsonNode();
  if (entry.targetType === 'system') {
    target.all = true;
    scope.system = target;
  } else if (entry.targetType === 'domain') {
    const domain = names?.projects.get(entry.targetId);
    target.id = entry.targetId;
    if (names && domain) target.name = domain.name;
    scope.domain = target;
  } else {
    const project = names?.projects.get(entry.targetId);
    target.id = entry.targetId;
    if (names && project) {
      target.name = project.name;
      target.domain = domainRef(project.domainId);
    }
    scope.project = target;
  }
  if (entry.inherited) scope['OS-INHERIT:inherited_to'] = 'projects';

  const source = entry.source;
  const sourceActor = source.actorType === 'user' ? 'users' : 'groups';
  const sourceTarget = source.targetType === 'system' ? 'system' : `${source.targetType}s/${source.targetId}`;
  const grantPath = `${sourceTarget}/${sourceActor}/${source.actorId}/roles/${source.roleId}`;
  const links = new JsonNode();
  links.assignment = source.inherited ? `${base}/OS-INHERIT/${grantPath}/inherited_to_projects` : `${base}/${grantPath}`;
  if (entry.viaGroupId) links.membership = `${base}/groups/${entry.viaGroupId}/users/${entry.actorId}`;
  // Keystone renders this link with the roles swapped (sic); clients do not follow it.
  if (entry.priorRoleId) links.prior_role = `${base}/prior_role/${entry.roleId}/implies/${entry.priorRoleId}`;

  const rendered = new JsonNode() as RenderedAssignment;
  rendered[entry.actorType] = actorBody;
  rendered.role = roleBody;
  rendered.scope = scope;
  rendered.links = links;
  return rendered;
}

/** An OS-REVOKE event: the attributes it matches on (those it has) and its times. */
export function renderRevokeEvent(event: RevocationEvent): Static<typeof RevokeEvent> {
  const rendered: Static<typeof RevokeEvent> = { issued_before: tokenTime(event.issuedBefore), revoked_at: tokenTime(event.revokedAt) };
  if (event.userId) rendered.user_id = event.userId;
  if (event.projectId) rendered.project_id = event.projectId;
  if (event.domainId) rendered.domain_id = event.domainId;
  if (event.roleId) rendered.role_id = event.roleId;
  if (event.auditId) rendered.audit_id = event.auditId;
  if (event.auditChainId) rendered.audit_chain_id = event.auditChainId;
  if (event.trustId) rendered['OS-TRUST:trust_id'] = event.trustId;
  if (event.consumerId) rendered['OS-OAUTH1:consumer_id'] = event.consumerId;
  if (event.accessTokenId) rendered['OS-OAUTH1:access_token_id'] = event.accessTokenId;
  // event.expiresAt (a revoked token's expiry) only tells when the event may be pruned: Keystone 22
  // shows a revoked token's event without it.
  return rendered;
}

export function renderRegisteredLimit(request: FastifyRequest, limit: RegisteredLimit) {
  return {
    id: limit.id,
    service_id: limit.serviceId,
    region_id: limit.regionId ?? null,
    resource_name: limit.resourceName,
    default_limit: limit.defaultLimit,
    description: limit.description ?? null,
    links: selfLink(request, 'registered_limits', limit.id),
  };
}

export function renderLimit(request: FastifyRequest, limit: Limit) {
  return {
    id: limit.id,
    project_id: limit.projectId ?? null,
    domain_id: limit.domainId ?? null,
    resource_limit: limit.resourceLimit,
    description: limit.description ?? null,
    service_id: limit.serviceId,
    region_id: limit.regionId ?? null,
    resource_name: limit.resourceName,
    links: selfLink(request, 'limits', limit.id),
  };
}

/** Keystone's body of an MFA receipt 401 (keystone/receipt/handlers.py). */
export function renderReceipt(receipt: AuthReceipt) {
  return {
    receipt: {
      methods: receipt.methods,
      user: { id: receipt.user.id, name: receipt.user.name, domain: { id: receipt.user.domainId, name: receipt.user.domainName } },
      expires_at: tokenTime(receipt.expiresAt),
      issued_at: tokenTime(receipt.issuedAt),
    },
    required_auth_methods: receipt.requiredMethods,
  };
}
