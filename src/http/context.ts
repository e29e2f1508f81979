import type { TrustService } from '../trust/trust-service.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest, RawServerDefault, FastifyBaseLogger } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AssignmentService } from '../assignment/assignment-service.ts';
import type { CatalogService } from '../catalog/catalog-service.ts';
import type { EndpointFilterService } from '../catalog/endpoint-filter-service.ts';
import type { LimitService } from '../limit/limit-service.ts';
import type { DomainConfigService } from '../domain-config/domain-config-service.ts';
import type { ClientCatalog } from '../catalog/client-catalog.ts';
import type { Config } from '../config.ts';
import { AuthenticationError } from '../support/errors.ts';
import type { AuditTrail } from '../events/audit.ts';
import type { Revocations } from '../events/revocation.ts';
import type { ApplicationCredentialService } from '../identity/application-credential-service.ts';
import type { IdentityService } from '../identity/identity-service.ts';
import type { OAuth1Service, SignedRequest } from '../oauth1/oauth1-service.ts';
import { baseUrl } from './links.ts';
import type { GatewayExplainer } from '../policy/gateway-explain.ts';
import type { IdentityAuthorizer } from '../policy/identity-authorizer.ts';
import type { IdentityTarget } from '../policy/identity-policy.ts';
import { DEFAULT_DOMAIN_ID, type ResourceService } from '../resource/resource-service.ts';
import type { ServiceMetrics } from '../metrics/service-metrics.ts';
import type { CredentialService } from '../credential/credential-service.ts';
import type { PolicyStoreService } from '../policy-store/policy-store-service.ts';
import type { SamlIdentityProvider } from '../federation/saml/saml-idp.ts';
import type { FederationService } from '../federation/federation-service.ts';
import type { FederatedLogin } from '../federation/federated-login.ts';
import type { AssertionVerifier } from '../federation/assertion.ts';
import type { OidcWebSso } from '../federation/oidc/websso.ts';
import type { SamlEcpSessions } from '../federation/saml/sp/ecp-session.ts';
import type { SamlWebSso } from '../federation/saml/sp/saml-websso.ts';
import type { LoginThrottle } from '../token/login-throttle.ts';
import type { TokenProvider } from '../token/token-provider.ts';
import type { ClientAddressResolver } from './client-address.ts';
import { releaseHeldValidation } from './decision-order.ts';
import type { TokenContext, TokenService } from '../token/token-service.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's validated token (absent on public routes). */
    auth?: TokenContext;
  }
  interface FastifyContextConfig {
    /** No X-Auth-Token needed (discovery, token issue, self-service password change). */
    public?: boolean;
    /** The body of a SAML message type (XML, ECP, form) reaches the route unparsed, as a Buffer (the SAML login). */
    rawSamlBody?: boolean;
  }
}

/** What the identity API routes are given (built once in app.ts). */
export interface IdentityApi {
  config: Config;
  resources: ResourceService;
  identity: IdentityService;
  assignments: AssignmentService;
  applicationCredentials: ApplicationCredentialService;
  /** OS-TRUST. */
  trusts: TrustService;
  /** OS-OAUTH1: consumers, delegation and access tokens. */
  oauth1: OAuth1Service;
  catalog: CatalogService;
  /** OS-EP-FILTER: endpoint groups and project associations. */
  endpointFilter: EndpointFilterService;
  /** Unified limits (registered limits, limits). */
  limits: LimitService;
  /** The catalog token bodies and GET /v3/auth/catalog show: the gateway's view, or the registered one. */
  clientCatalog: ClientCatalog;
  /**
   * Each domain's own configuration (/v3/domains/{id}/config, DOMAIN_CONFIG_DIR files); also the
   * DomainIdentityConfigSource of per-domain identity back ends.
   */
  domainConfigs: DomainConfigService;
  /** Keystone's policy blobs (/v3/policies) and their endpoint associations. */
  policies: PolicyStoreService;
  /** OS-FEDERATION: identity providers, their protocols, mappings, service providers. */
  federation: FederationService;
  /** OS-FEDERATION's login (Keystone's mapped plugin): the provider checks, the mapping, the shadow user. */
  federatedLogin: FederatedLogin;
  /** What verifies a federated login's request into an assertion (none: every login is a 401). */
  assertionVerifiers: readonly AssertionVerifier[];
  /** Browser single sign-on (Keystone's websso) for OpenID Connect: this service as the relying party. */
  oidcWebSso: OidcWebSso;
  /** Shibboleth's ECP consumer (/Shibboleth.sso/SAML2/ECP): sessions that are a login at the login URL. */
  samlEcpSessions: SamlEcpSessions;
  /** Browser single sign-on for SAML protocols (HTTP-Redirect AuthnRequest, HTTP-POST back); absent: their websso is a 401. */
  samlWebSso?: SamlWebSso | undefined;
  /** Keystone-to-Keystone: this service as SAML identity provider (metadata, signed assertions). */
  saml: SamlIdentityProvider;
  /** Credentials (/v3/credentials, OS-EC2) and the EC2/S3 signature checks. */
  credentials: CredentialService;
  tokens: TokenService;
  tokenProvider: TokenProvider;
  revocations: Revocations;
  authorizer: IdentityAuthorizer;
  /** The gateway's policy decisions, for POST /v3/gateway/policy/explain. */
  gateway: GatewayExplainer;
  audit: AuditTrail;
  /** Rate limits in front of every password and secret check. */
  loginThrottle: LoginThrottle;
  /** The client's address (TRUSTED_PROXIES applied). */
  clientAddress: ClientAddressResolver;
  /** GET /metrics and the identity API's request counts; absent: neither. */
  metrics?: ServiceMetrics;
}

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

/** The caller's token on an authenticated route. */
export function caller(request: FastifyRequest): TokenContext {
  if (!request.auth) throw new AuthenticationError();
  return request.auth;
}

/** Authorizes the caller for a policy action (Keystone's rule names, e.g. identity:list_users). */
export function authorize(api: IdentityApi, request: FastifyRequest, action: string, target?: IdentityTarget): TokenContext {
  const auth = caller(request);
  api.authorizer.enforce(auth, action, target);
  releaseHeldValidation(request);
  return auth;
}

/** Where new users, groups and projects go when the request names no domain. */
export function defaultDomainOf(auth: TokenContext): string {
  return auth.scope.type === 'domain' ? auth.scope.domain.id : DEFAULT_DOMAIN_ID;
}

/** Keys of a create/update body that are not columns: Keystone keeps them and echoes them back. */
export function extraAttributes(body: Record<string, unknown>, known: readonly string[]): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) if (!known.includes(key)) extra[key] = value;
  return extra;
}

/** A request signed with OAuth 1.0a, as its client addressed it (the public base URL, the path and query). */
export function signedRequest(request: FastifyRequest): SignedRequest {
  const authorization = request.headers.authorization;
  return { method: request.method, url: `${baseUrl(request)}${request.url}`, authorization: typeof authorization === 'string' ? authorization : undefined };
}

export function noContent(reply: FastifyReply): FastifyReply {
  return reply.code(204).send();
}

export type Request = FastifyRequest;
