import { ec2CredentialId } from '../credential/credential-service.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditInitiator, AuditTrail, RoleAssignmentAudit } from '../events/audit.ts';
import type { App, IdentityApi } from './context.ts';

/** Who is behind a request, as the audit trail names it (never the token itself). */
export function auditInitiator(api: Pick<IdentityApi, 'clientAddress'>, request: FastifyRequest, reply: FastifyReply): AuditInitiator {
  const auth = request.auth;
  const agent = request.headers['user-agent'];
  const requestId = reply.getHeader('x-openstack-request-id');
  return {
    address: api.clientAddress(request.raw.socket.remoteAddress, request.headers),
    ...(typeof agent === 'string' ? { agent } : {}),
    ...(typeof requestId === 'string' ? { requestId } : {}),
    ...(auth
      ? {
          userId: auth.user.id,
          userName: auth.user.name,
          projectId: auth.scope.type === 'project' ? auth.scope.project.id : undefined,
          domainId: auth.scope.type === 'domain' ? auth.scope.domain.id : undefined,
        }
      : {}),
  };
}

/** The audit event a successful write is, derived from its route. */
export type WriteAudit =
  | {
      kind: 'resource';
      operation: 'created' | 'updated' | 'deleted';
      type: string;
      id: string;
      actor?: { id: string; type: string; operation: 'added' | 'removed' };
    }
  | { kind: 'role_assignment'; operation: 'created' | 'deleted'; assignment: RoleAssignmentAudit };

/** Writes whose routes audit themselves (authentication, token revocation) or change nothing. */
// Keystone's credential manager sends no notification for an update, and a token minted from an
// EC2/S3 signature none either (only its auth controller audits authentications).
const NOT_AUDITED_HERE = new Set([
  'POST /v3/auth/tokens',
  'DELETE /v3/auth/tokens',
  'POST /v3/gateway/policy/explain',
  'POST /v3/gateway/policy/replay',
  'PATCH /v3/credentials/:credential_id',
  'POST /v3/ec2tokens',
  'POST /v3/s3tokens',
  // K2K: an assertion is made from a token, nothing is stored, Keystone notifies nothing.
  'POST /v3/auth/OS-FEDERATION/saml2',
  'POST /v3/auth/OS-FEDERATION/saml2/ecp',
  // websso: starting one answers a redirect and writes nothing; its callback is a login, audited by
  // the route (identity.authenticate) as the federated login is.
  'POST /v3/auth/OS-FEDERATION/websso/:protocol_id',
  'POST /v3/auth/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/websso',
  'POST /v3/auth/OS-FEDERATION/websso/:protocol_id/acs',
  // Shibboleth's ECP consumer keeps an assertion for the login that follows (sealed in its cookie,
  // nothing stored); that login is audited, a refused assertion is audited by the route.
  'POST /Shibboleth.sso/SAML2/ECP',
]);

const SINGULAR: Record<string, string> = {
  users: 'user',
  groups: 'group',
  projects: 'project',
  domains: 'domain',
  roles: 'role',
  regions: 'region',
  services: 'service',
  endpoints: 'endpoint',
  policies: 'policy',
  credentials: 'credential',
  registered_limits: 'registered_limit',
  limits: 'limit',
};

/** Routes that create a list in one request (unified limits): one event per entity made, as Keystone sends. */
const CREATED_LISTS: Record<string, { key: string; type: string }> = {
  '/v3/registered_limits': { key: 'registered_limits', type: 'registered_limit' },
  '/v3/limits': { key: 'limits', type: 'limit' },
};

const GRANT = /\/(users|groups)\/:actor_id\/roles\/:role_id(\/inherited_to_projects)?$/;

/**
 * Keystone's notification for a write route: `null` when the route is audited elsewhere or writes
 * nothing, `undefined` for a route this table does not know (a test keeps that from happening).
 */
export function describeWrite(
  method: string,
  url: string,
  params: Record<string, string>,
  responseBody: () => Record<string, unknown> | undefined,
  /** The response as sent, when it is not JSON (OS-OAUTH1's form-encoded token bodies). */
  responseText: () => string | undefined = () => undefined,
): WriteAudit | WriteAudit[] | null | undefined {
  if (NOT_AUDITED_HERE.has(`${method} ${url}`)) return null;
  // Keystone sends no notification for an OS-ENDPOINT-POLICY association (its manager audits nothing).
  if (url.startsWith('/v3/policies/:policy_id/OS-ENDPOINT-POLICY/')) return null;
  // Nor for OS-EP-FILTER: the catalog manager hands endpoint groups and associations to its driver, unaudited.
  if (url.startsWith('/v3/OS-EP-FILTER/')) return null;
  // Nor for a domain's configuration: Keystone's DomainConfigManager audits nothing.
  if (url.startsWith('/v3/domains/:domain_id/config')) return null;
  // Nor for OS-FEDERATION: Keystone 22's federation manager audits nothing (the domain it creates for
  // an identity provider is announced by the route, as Keystone's resource manager announces it).
  if (url.startsWith('/v3/OS-FEDERATION/')) return null;
  const list = method === 'POST' ? CREATED_LISTS[url] : undefined;
  if (list) {
    const rows = responseBody()?.[list.key];
    const ids = Array.isArray(rows) ? rows.map((row: { id?: unknown }) => row?.id).filter((id): id is string => typeof id === 'string') : [];
    return ids.map((id) => ({ kind: 'resource', operation: 'created', type: list.type, id }));
  }
  const grant = GRANT.exec(url);
  if (grant && (method === 'PUT' || method === 'DELETE')) {
    const actor = grant[1] === 'users' ? { userId: params.actor_id } : { groupId: params.actor_id };
    const target = url.startsWith('/v3/system/')
      ? { system: true }
      : /^\/v3\/(OS-INHERIT\/)?projects\//.test(url)
        ? { projectId: params.target_id }
        : { domainId: params.target_id };
    return {
      kind: 'role_assignment',
      operation: method === 'PUT' ? 'created' : 'deleted',
      assignment: { roleId: params.role_id!, ...actor, ...target, inherited: url.startsWith('/v3/OS-INHERIT/') },
    };
  }
  const operation = method === 'POST' ? 'created' : method === 'PATCH' ? 'updated' : method === 'DELETE' ? 'deleted' : undefined;
  switch (url) {
    case '/v3/groups/:group_id/users/:user_id':
      if (method !== 'PUT' && method !== 'DELETE') return undefined;
      return {
        kind: 'resource',
        operation: 'updated',
        type: 'group',
        id: params.group_id!,
        actor: { id: params.user_id!, type: 'user', operation: method === 'PUT' ? 'added' : 'removed' },
      };
    case '/v3/projects/:project_id/tags':
    case '/v3/projects/:project_id/tags/:tag':
      return { kind: 'resource', operation: 'updated', type: 'project', id: params.project_id! };
    case '/v3/roles/:prior_role_id/implies/:implied_role_id':
      if (method !== 'PUT' && method !== 'DELETE') return undefined;
      return { kind: 'resource', operation: method === 'PUT' ? 'created' : 'deleted', type: 'implied_role', id: `${params.prior_role_id}:${params.implied_role_id}` };
    case '/v3/users/:user_id/password':
      return { kind: 'resource', operation: 'updated', type: 'user', id: params.user_id! };
    case '/v3/users/:user_id/application_credentials': {
      const id = (responseBody()?.application_credential as { id?: unknown } | undefined)?.id;
      return method === 'POST' && typeof id === 'string' ? { kind: 'resource', operation: 'created', type: 'application_credential', id } : undefined;
    }
    case '/v3/users/:user_id/application_credentials/:application_credential_id':
      return { kind: 'resource', operation: 'deleted', type: 'application_credential', id: params.application_credential_id! };
    case '/v3/users/:user_id/credentials/OS-EC2': {
      // Keystone's manager sends identity.credential.created with the credential's id (the access key's hash).
      const access = (responseBody()?.credential as { access?: unknown } | undefined)?.access;
      return method === 'POST' && typeof access === 'string' ? { kind: 'resource', operation: 'created', type: 'credential', id: ec2CredentialId(access) } : undefined;
    }
    case '/v3/users/:user_id/credentials/OS-EC2/:credential_id':
      return method === 'DELETE' ? { kind: 'resource', operation: 'deleted', type: 'credential', id: ec2CredentialId(params.credential_id!) } : undefined;
    case '/v3/OS-TRUST/trusts': {
      const id = (responseBody()?.trust as { id?: unknown } | undefined)?.id;
      return method === 'POST' && typeof id === 'string' ? { kind: 'resource', operation: 'created', type: 'OS-TRUST:trust', id } : undefined;
    }
    case '/v3/OS-TRUST/trusts/:trust_id':
      return { kind: 'resource', operation: 'deleted', type: 'OS-TRUST:trust', id: params.trust_id! };
    case '/v3/users/:user_id/access_rules/:access_rule_id':
      return { kind: 'resource', operation: 'deleted', type: 'access_rule', id: params.access_rule_id! };
    // OS-OAUTH1: Keystone's oauth manager audits consumers, request tokens and access tokens (not an authorization).
    case '/v3/OS-OAUTH1/consumers': {
      const id = (responseBody()?.consumer as { id?: unknown } | undefined)?.id;
      return method === 'POST' && typeof id === 'string' ? { kind: 'resource', operation: 'created', type: 'OS-OAUTH1:consumer', id } : undefined;
    }
    case '/v3/OS-OAUTH1/consumers/:consumer_id':
      return operation === 'updated' || operation === 'deleted' ? { kind: 'resource', operation, type: 'OS-OAUTH1:consumer', id: params.consumer_id! } : undefined;
    case '/v3/OS-OAUTH1/request_token':
    case '/v3/OS-OAUTH1/access_token': {
      const id = new URLSearchParams(responseText() ?? '').get('oauth_token');
      const type = url.endsWith('request_token') ? 'OS-OAUTH1:request_token' : 'OS-OAUTH1:access_token';
      return method === 'POST' && id ? { kind: 'resource', operation: 'created', type, id } : undefined;
    }
    case '/v3/OS-OAUTH1/authorize/:request_token_id':
      return method === 'PUT' ? null : undefined;
    case '/v3/users/:user_id/OS-OAUTH1/access_tokens/:access_token_id':
      return method === 'DELETE' ? { kind: 'resource', operation: 'deleted', type: 'OS-OAUTH1:access_token', id: params.access_token_id! } : undefined;
    case '/v3/regions/:region_id':
      if (method === 'PUT') return { kind: 'resource', operation: 'created', type: 'region', id: params.region_id! };
  }
  // /v3/{collection} (create) and /v3/{collection}/:{id} (update, delete).
  const collection = /^\/v3\/([a-z_]+)$/.exec(url);
  if (collection && operation === 'created') {
    const type = SINGULAR[collection[1]!];
    const id = type ? (responseBody()?.[type] as { id?: unknown } | undefined)?.id : undefined;
    return type && typeof id === 'string' ? { kind: 'resource', operation, type, id } : undefined;
  }
  const item = /^\/v3\/([a-z_]+)\/:([a-z_]+)$/.exec(url);
  if (item && (operation === 'updated' || operation === 'deleted')) {
    const type = SINGULAR[item[1]!];
    const id = params[item[2]!];
    return type && id ? { kind: 'resource', operation, type, id } : undefined;
  }
  return undefined;
}

function record(trail: AuditTrail, initiator: AuditInitiator, audit: WriteAudit): void {
  if (audit.kind === 'role_assignment') trail.roleAssignment(audit.operation, initiator, audit.assignment);
  else trail.resource(audit.operation, audit.type, audit.id, initiator, audit.actor);
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** One audit event per successful create, update or delete of the identity API. */
export function registerAuditHooks(app: App, api: IdentityApi): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (!WRITES.has(request.method) || reply.statusCode >= 300 || reply.statusCode < 200) return payload;
    const url = request.routeOptions.url;
    if (!url) return payload;
    const responseBody = () => {
      try {
        return typeof payload === 'string' ? (JSON.parse(payload) as Record<string, unknown>) : undefined;
      } catch {
        return undefined;
      }
    };
    const params = (request.params ?? {}) as Record<string, string>;
    const audit = describeWrite(request.method, url, params, responseBody, () => (typeof payload === 'string' ? payload : undefined));
    if (audit === undefined) {
      request.log.warn({ method: request.method, route: url }, 'a write with no audit event');
      return payload;
    }
    if (!audit) return payload;
    const initiator = auditInitiator(api, request, reply);
    // A self-service password change has no token: its original password proved the user.
    if (!request.auth && url === '/v3/users/:user_id/password') initiator.userId = params.user_id;
    for (const each of Array.isArray(audit) ? audit : [audit]) record(api.audit, initiator, each);
    return payload;
  });
}
