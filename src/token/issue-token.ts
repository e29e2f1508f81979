import type { CatalogEntry } from '../catalog/catalog-service.ts';
import type { ClientCatalog } from '../catalog/client-catalog.ts';
import type { AuditInitiator, AuditTrail } from '../events/audit.ts';
import { AuthReceiptRequiredError } from '../support/errors.ts';
import { auditAuthenticationFailure } from './authentication-audit.ts';
import type { LoginThrottle } from './login-throttle.ts';
import { parseTokenRequest, type AuthRequest } from './token-request.ts';
import type { TokenContext, TokenService } from './token-service.ts';

/** What issuing a token needs (the identity API's services). */
export interface TokenIssueServices {
  tokens: Pick<TokenService, 'authenticate'>;
  loginThrottle: Pick<LoginThrottle, 'beginLogin'>;
  audit: Pick<AuditTrail, 'authenticate'>;
  /** The catalog clients receive (the gateway's view unless GATEWAY_PUBLIC_CATALOG=false). */
  clientCatalog: ClientCatalog;
}

export interface TokenIssue {
  /** The request as sent (its leaves typed): the throttle counts it before it is checked. */
  request: AuthRequest;
  /** Who asks, for the audit trail; its address for the rate limits. */
  initiator: AuditInitiator;
  /** The catalog goes with a scoped token unless the client asked for none (?nocatalog). */
  withCatalog: boolean;
  /** Openstack-Auth-Receipt: an MFA receipt from an earlier partial authentication. */
  receipt?: string | undefined;
}

export interface IssuedToken {
  token: TokenContext;
  /** Present for a scoped token when asked for. */
  catalog: CatalogEntry[] | undefined;
}

/**
 * POST /v3/auth/tokens: the rate limits first (every attempt counts, even a malformed one), then
 * the request is checked and authenticated, the outcome audited (a malformed request is not an
 * authentication attempt), and the catalog built for a scoped token.
 */
export async function issueToken(services: TokenIssueServices, issue: TokenIssue): Promise<IssuedToken> {
  const { initiator, request } = issue;
  let token: TokenContext;
  try {
    const attempt = await services.loginThrottle.beginLogin(initiator.address, request);
    try {
      token = await services.tokens.authenticate(parseTokenRequest(request), issue.receipt || undefined);
    } catch (error) {
      // The secrets were right (a receipt is owed): not a guess to count against the user.
      if (error instanceof AuthReceiptRequiredError) await attempt.succeeded();
      throw error;
    }
    await attempt.succeeded();
  } catch (error) {
    auditAuthenticationFailure(services.audit, initiator, error, requestedUserName(request));
    throw error;
  }
  services.audit.authenticate('success', { ...initiator, userId: token.user.id, userName: token.user.name });
  return { token, catalog: issue.withCatalog ? await catalogFor(services.clientCatalog, token) : undefined };
}

/** The catalog for a token: only scoped tokens carry one. */
export async function catalogFor(catalog: ClientCatalog, token: TokenContext): Promise<CatalogEntry[] | undefined> {
  if (token.scope.type === 'unscoped') return undefined;
  return catalog.catalog({ projectId: token.scope.type === 'project' ? token.scope.project.id : undefined, userId: token.user.id });
}

/** The user name a token request gives, if it names one. */
function requestedUserName(request: AuthRequest): string | undefined {
  const name = request.password?.user?.name ?? request.totp?.user?.name ?? request.application_credential?.user?.name;
  return typeof name === 'string' ? name : undefined;
}
