import type { AssignmentService, Role } from '../assignment/assignment-service.ts';
import { SYSTEM_TARGET_ID } from '../assignment/assignment-service.ts';
import type { Clock } from '../support/clock.ts';
import { AuthenticationError, ForbiddenError, NotFoundError, ServiceError, ValidationError } from '../support/errors.ts';
import type { Revocations } from '../events/revocation.ts';
import type { AccessRule, ApplicationCredential, ApplicationCredentialService } from '../identity/application-credential-service.ts';
import type { IdentityService, User } from '../identity/identity-service.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import { GenerationCache } from '../support/cache.ts';
import type { ClusterSync } from '../events/cluster-sync.ts';
import type { RevocableToken } from '../events/revocation.ts';
import type { Store } from '../store/database.ts';
import { isDatabaseUnreachable } from '../store/unavailable.ts';
import { newAuditId, type TokenPayload } from './fernet-payload.ts';
import { AUTH_METHODS } from './fernet-provider.ts';
import type { AccessToken, OAuth1Service } from '../oauth1/oauth1-service.ts';
import type { TokenProvider } from './token-provider.ts';
import { isDelegatedMethod } from './delegation.ts';
import type { Trust, TrustService } from '../trust/trust-service.ts';
import type { DomainReference, MappedRequest, ScopeRequest, TokenRequest } from './token-request.ts';
import type { TotpAuthenticator } from './totp.ts';
import type { ReceiptService } from '../receipt/receipt-service.ts';

/** What a federated token carries of its login (Keystone's OS-FEDERATION). */
export interface TokenFederation {
  /** The mapped groups: the token's roles come from their grants (never stored as memberships). */
  groupIds: string[];
  identityProviderId: string;
  protocolId: string;
}

/**
 * The federation checks tokens need (federation/federated-login.ts): without them no federated
 * token is issued, re-scoped or validated.
 */
export interface FederatedTokenChecks {
  /** Keystone's handle_scoped_token: provider enabled (403), mapping and groups still there. */
  checkRescope(federation: TokenFederation): Promise<void>;
  /** The provider still exists and is enabled (else its tokens no longer validate). */
  identityProviderEnabled(idpId: string): Promise<boolean>;
  /**
   * The mapped method without a token id (Keystone's handle_unscoped_token): the provider enabled
   * (404, 403), the protocol there (404), the request verified by the protocol's verifier (401), the
   * assertion mapped and its user shadowed (or a mapped local user found).
   */
  authenticateMapped(request: Extract<MappedRequest, { identityProviderId: string }>): Promise<FederatedAuthentication>;
}

/** Who a federated login authenticated (federation/federated-login.ts): a shadow user with its federation, or a mapped local user. */
export interface FederatedAuthentication {
  user: User;
  protocolId: string;
  federation?: TokenFederation;
}

/** The totp method and MFA rules with their receipts; without them neither is offered. */
export interface MultiFactor {
  totp: Pick<TotpAuthenticator, 'authenticate'>;
  receipts: Pick<ReceiptService, 'enforce'>;
}

export type TokenScope =
  | { type: 'unscoped' }
  | { type: 'project'; project: { id: string; name: string; domainId: string; domainName: string; isDomain: boolean } }
  | { type: 'domain'; domain: { id: string; name: string } }
  | { type: 'system' };

/** A validated token: everything a response body, a policy decision or the gateway needs. */
export interface TokenContext {
  id: string;
  methods: string[];
  user: { id: string; name: string; domainId: string; domainName: string; passwordExpiresAt: Date | null };
  scope: TokenScope;
  roles: { id: string; name: string }[];
  /** Set for federated tokens (OS-FEDERATION): the login's groups, provider and protocol. */
  federation?: TokenFederation;
  /** A scoped federated token's roles in full: Keystone 22 lists them so (as a trust token's). */
  roleDetails?: Role[];
  /** Set for tokens issued through an OS-OAUTH1 access token. */
  oauth1?: { accessTokenId: string; consumerId: string };
  /** Set for tokens issued to an application credential. */
  applicationCredential?: { id: string; name: string; restricted: boolean; accessRules: AccessRule[] };
  /**
   * Set for trust-scoped tokens (OS-TRUST). `user` is then the trustee, or the trustor when the trust
   * impersonates; `roles` are the trust's (implied ones included), listed in full in the token body.
   */
  trust?: { id: string; trustorUserId: string; trusteeUserId: string; impersonation: boolean; roles: Role[] };
  /** [own] or [own, parent-chain] */
  auditIds: string[];
  /** Milliseconds since the epoch (whole seconds). */
  issuedAt: number;
  expiresAt: number;
}

export interface ValidateOptions {
  allowExpired?: boolean;
}

/** Keystone's [token] allow_expired_window. */
const ALLOW_EXPIRED_WINDOW_MS = 172_800_000;

/** Issues, validates and revokes tokens (Fernet, Keystone 22 compatible). */
export class TokenService {
  constructor(
    private readonly provider: TokenProvider,
    private readonly store: Store,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    private readonly assignments: AssignmentService,
    private readonly applicationCredentials: ApplicationCredentialService,
    private readonly revocations: Revocations,
    private readonly clock: Clock,
    private readonly expirationSeconds: number,
    private readonly sync: ClusterSync,
    /** OS-TRUST: without it no trust-scoped token is issued or validated. */
    private readonly trusts?: TrustService,
    /** OS-OAUTH1: the oauth1 method and the access tokens its tokens are validated against. */
    private readonly oauth1?: Pick<OAuth1Service, 'authenticate' | 'findAccessToken'>,
    private readonly mfa?: MultiFactor,
    /** OS-FEDERATION: federated tokens (issued by a federated login, re-scoped, validated). */
    private readonly federation?: FederatedTokenChecks,
    cacheSize = 10_000,
  ) {
    // While the database is unreachable, what this node validated before is served (ClusterSync
    // bounds how long, and revocations still reach the index through Redis).
    this.cache = new GenerationCache(cacheSize, () => this.sync.validationGeneration, undefined, () => this.sync.servingLastKnown);
  }

  /**
   * Validated tokens by the token itself (the context holds it anyway; a digest per validation cost
   * more than the rest of a hit), until they expire, are revoked, or any data changes.
   */
  private readonly cache: GenerationCache<string, { context: TokenContext; revocable: RevocableToken }>;

  /** Validations by outcome, and those the cache answered (read by metrics; plain counters). */
  readonly validationStats = { valid: 0, invalid: 0, error: 0, cacheHits: 0, cacheMisses: 0 };

  /**
   * POST /v3/auth/tokens (checked by parseTokenRequest): runs the methods, resolves the scope,
   * issues a token.
   *
   * A token's issued_at has whole seconds (Fernet) and a revocation event revokes what was issued up
   * to and including its second, so a token issued in the second of an event that matches it (a
   * password change, a user disabled and enabled again, a project's last role removed and granted
   * again) would be dead on arrival; Keystone answers 201 with it. Here the whole authentication
   * runs again in the next second instead, reading everything afresh: its token is then issued
   * after the event, and a later event still revokes it. An issued_at moved ahead without waiting
   * would survive an event later in the same second.
   */
  async authenticate(request: TokenRequest, receipt?: string): Promise<TokenContext> {
    return this.issuingOnce(() => this.authenticateNow(request, receipt));
  }

  /**
   * A federated login's token (Keystone's mapped plugin, then its token issue): for a shadow user an
   * unscoped federated token (methods [protocol], OS-FEDERATION); for a mapped local user an
   * ordinary token with methods [protocol], scoped to its default project when it may use it.
   */
  async issueFederated(authenticated: FederatedAuthentication): Promise<TokenContext> {
    return this.issuingOnce(() => this.issueFederatedNow(authenticated));
  }

  private async issueFederatedNow({ user: shadowed, protocolId, federation }: FederatedAuthentication): Promise<TokenContext> {
    if (federation && !this.federation) throw new AuthenticationError();
    const user = await this.identity.findUser(shadowed.id);
    if (!user?.enabled) throw AuthenticationError.because({ reason: 'The federated user is disabled', code: 401, userId: shadowed.id });
    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw AuthenticationError.because({ reason: "The federated user's domain is disabled", code: 401, userId: user.id });
    const scope: TokenScope = federation ? { type: 'unscoped' } : await this.resolveScope(user, { type: 'default' });
    const roles = scope.type === 'unscoped' ? [] : await this.rolesFor(user.id, scope);
    const methods = [protocolId];
    const issuedAt = Math.floor(this.clock.now() / 1000) * 1000;
    const expiresAt = issuedAt + this.expirationSeconds * 1000;
    const auditIds = [newAuditId()];
    await this.refuseRevokedOnIssue(revocableToken(user, scope, roles, auditIds, issuedAt));
    const id = await this.provider.issue(
      { userId: user.id, methods, expiresAt: expiresAt / 1000, auditIds, scope: federation ? federatedPayloadScope(scope, federation) : payloadScope(scope) },
      issuedAt / 1000,
    );
    return {
      id,
      methods,
      user: tokenUser(user, userDomain.name),
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      ...(federation ? { federation, ...(scope.type === 'unscoped' ? {} : { roleDetails: roles }) } : {}),
      auditIds,
      issuedAt,
      expiresAt,
    };
  }

  /** Runs an issue; one refused by an event of its very second runs again in the next (see authenticate). */
  private async issuingOnce(issue: () => Promise<TokenContext>): Promise<TokenContext> {
    try {
      return await issue();
    } catch (error) {
      if (!(error instanceof RevokedOnIssue)) throw error;
    }
    await this.untilNextSecond();
    try {
      return await issue();
    } catch (error) {
      // Another matching event in the next second too: refused, never a token that will not validate.
      if (error instanceof RevokedOnIssue) throw new AuthenticationError();
      throw error;
    }
  }

  private async untilNextSecond(): Promise<void> {
    const second = Math.floor(this.clock.now() / 1000);
    // A timer may fire before the wall clock's second turns (timers and the clock are not one
    // source): the wait is topped up until it has.
    for (let now = this.clock.now(); Math.floor(now / 1000) <= second; now = this.clock.now()) {
      const wait = 1000 - (now % 1000);
      if (this.clock.sleep) await this.clock.sleep(wait);
      else await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** Throws RevokedOnIssue when a revocation event known here matches the token about to be issued. */
  private async refuseRevokedOnIssue(token: RevocableToken): Promise<void> {
    // Events other nodes wrote are indexed first (at once unless the bus is down).
    await this.sync.prepareValidation();
    if (this.revocations.isRevoked(token)) throw new RevokedOnIssue();
  }

  private async authenticateNow(request: TokenRequest, receipt: string | undefined): Promise<TokenContext> {
    if (request.method === 'application_credential') return this.authenticateApplicationCredential(request, receipt);
    if (request.method === 'oauth1') return this.authenticateOAuth1(request);
    const scopeRequest = request.scope;
    const now = this.clock.now();
    let user: User | undefined;
    let source: TokenContext | undefined;
    if (request.token) {
      source = await this.validate(request.token.id);
      // Keystone's token plugin, in its order: a delegated token never makes another token.
      if (source.oauth1) {
        throw ForbiddenError.action('Using OAuth-scoped token to create another token. Create a new OAuth-scoped token instead');
      }
      if (source.trust) {
        throw ForbiddenError.action('Using trust-scoped token to create another token. Create a new trust-scoped token instead');
      }
      if (source.scope.type === 'system' && (scopeRequest.type === 'project' || scopeRequest.type === 'domain')) {
        throw ForbiddenError.action('Using a system-scoped token to create a project-scoped or domain-scoped token is not allowed');
      }
      if (isDelegatedMethod(source)) throw ForbiddenError.action('Using a delegated token to create another token is not allowed.');
      // Keystone's token method hands a federated token to the mapped plugin (handle_scoped_token).
      if (source.federation) {
        if (!this.federation) throw new AuthenticationError();
        await this.federation.checkRescope(source.federation);
      }
      const sourceUser = await this.identity.findUser(source.user.id);
      if (!sourceUser) throw NotFoundError.tokenNotValidated();
      user = sourceUser;
    }
    // Keystone's mapped plugin under the protocol's name (openid, saml2, mapped).
    const mapped = request.mapped ? await this.authenticateMapped(request.mapped) : undefined;
    if (mapped) {
      if (user && user.id !== mapped.user.id) throw new AuthenticationError();
      user = mapped.user;
    }
    if (request.password) {
      const authenticated = await this.identity.authenticatePassword(request.password.user, request.password.password);
      if (user && user.id !== authenticated.id) throw new AuthenticationError();
      user = authenticated;
    }
    if (request.totp) {
      if (!this.mfa) throw new AuthenticationError();
      const authenticated = await this.mfa.totp.authenticate(request.totp.user, request.totp.passcode);
      if (user && user.id !== authenticated.id) throw new AuthenticationError();
      user = authenticated;
    }
    if (!user) throw new AuthenticationError();

    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw new AuthenticationError();
    // Keystone's MFA rules: the methods that ran (a re-scoped token's own included), with a receipt's;
    // checked once the scope is found (a missing project is the generic 401 first), before its roles.
    const ran = [...(source?.methods ?? []), ...request.methods];
    if (scopeRequest.type === 'trust') return this.authenticateTrust(user, scopeRequest.trustId, await this.enforceRules(user, ran, receipt), source);
    const scope = await this.resolveScope(user, scopeRequest);
    const used = await this.enforceRules(user, ran, receipt);
    // A re-scoped federated token keeps its groups (not for the system, which has no federated payload).
    const carried = mapped ? mapped.federation : source?.federation;
    const federation = carried && scope.type !== 'system' ? carried : undefined;
    const roles = scope.type === 'unscoped' ? [] : federation ? await this.federatedRoles(user.id, federation, scope) : await this.rolesFor(user.id, scope);
    if (scope.type !== 'unscoped' && roles.length === 0) throw new AuthenticationError();

    const methods = used;
    const issuedAt = Math.floor(now / 1000) * 1000;
    // A token made from another (the token method, or the mapped method's id) ends when it does, as
    // in Keystone; only the token method's joins its audit chain (Keystone's mapped plugin starts one).
    const parent = source;
    const parentsExpire = [source?.expiresAt, mapped?.source?.expiresAt].filter((at): at is number => at !== undefined);
    const expiresAt = parentsExpire.length ? Math.min(...parentsExpire) : issuedAt + this.expirationSeconds * 1000;
    const chainId = parent ? (parent.auditIds[1] ?? parent.auditIds[0]!) : undefined;
    const auditIds = chainId ? [newAuditId(), chainId] : [newAuditId()];
    await this.refuseRevokedOnIssue(revocableToken(user, scope, roles, auditIds, issuedAt));
    const payload: TokenPayload = {
      userId: user.id,
      methods,
      expiresAt: expiresAt / 1000,
      auditIds,
      scope: federation ? federatedPayloadScope(scope, federation) : payloadScope(scope),
    };
    const id = await this.provider.issue(payload, issuedAt / 1000);
    return {
      id,
      methods: orderMethods(methods),
      user: {
        id: user.id,
        name: user.name,
        domainId: user.domainId,
        domainName: userDomain.name,
        passwordExpiresAt: user.passwordExpiresAt,
      },
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      ...(federation ? { federation, ...(scope.type === 'unscoped' ? {} : { roleDetails: roles }) } : {}),
      auditIds,
      issuedAt,
      expiresAt,
    };
  }

  /**
   * Keystone's mapped plugin (Mapped.authenticate). With a token id (handle_scoped_token): a valid
   * federated token (else 404 for no token, 400 for a token that is not federated), its provider still enabled (403), its
   * mapping and groups still there; the new token gets its user and groups (and its expiry, a
   * fresh audit chain, methods only those of this request). Without: the login
   * (FederatedTokenChecks.authenticateMapped).
   */
  private async authenticateMapped(request: MappedRequest): Promise<{ user: User; federation?: TokenFederation; source?: TokenContext }> {
    if (!this.federation) throw new AuthenticationError();
    if (!('tokenId' in request)) {
      const { user: mappedUser, federation } = await this.federation.authenticateMapped(request);
      // Read again: a shadow user disabled by an administrator, or a mapped local user, must be enabled.
      const user = await this.identity.findUser(mappedUser.id);
      if (!user?.enabled) throw AuthenticationError.because({ reason: 'The federated user is disabled', code: 401, userId: mappedUser.id });
      return { user, ...(federation ? { federation } : {}) };
    }
    const source = await this.validate(request.tokenId);
    // Keystone 22 fails reading the groups of a token that has none: a 400 ("'NoneType' object is
    // not iterable"); the same status here, with a text that says why.
    if (!source.federation) throw new ValidationError(`The token given to the ${request.method} method is not a federated token.`);
    await this.federation.checkRescope(source.federation);
    const user = await this.identity.findUser(source.user.id);
    if (!user) throw NotFoundError.tokenNotValidated();
    return { user, federation: source.federation, source };
  }

  /** The methods the token is issued with (those used and a receipt's), or the receipt 401 (MultiFactor). */
  private async enforceRules(user: User, methods: string[], receipt: string | undefined): Promise<string[]> {
    const used = [...new Set(methods)];
    return this.mfa ? this.mfa.receipts.enforce(user, used, receipt) : used;
  }

  /**
   * A trust-scoped token (OS-TRUST:trust): only the trustee gets one, for the trust's project, with
   * the trust's roles (and those they imply) while the trustor still holds them all. Each token
   * takes one of the trust's uses (the last one deletes the trust, as in Keystone).
   */
  private async authenticateTrust(user: User, trustId: string, requestedMethods: string[], source: TokenContext | undefined): Promise<TokenContext> {
    const trust = await this.trusts?.find(trustId);
    if (!trust || (trust.expiresAt && trust.expiresAt.getTime() <= this.clock.now()) || !trust.projectId) throw new AuthenticationError();
    return this.issueTrustScoped(user, trust, requestedMethods, source, { consumeUse: true });
  }

  /**
   * The token of a trust whose trustee is `user`: checked as Keystone's token model checks it
   * (trustor enabled, every delegated role still held), with the trust's roles only. A use is taken
   * for an authentication (POST /v3/auth/tokens), not for an EC2 signature (as Keystone).
   */
  private async issueTrustScoped(user: User, trust: Trust, requestedMethods: string[], source: TokenContext | undefined, options: { consumeUse: boolean }): Promise<TokenContext> {
    const now = this.clock.now();
    if (!trust.projectId) throw new AuthenticationError();
    // Keystone's "User is not a trustee." and "Trustor is disabled.": hidden 403s.
    if (trust.trusteeUserId !== user.id) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    const trustor = await this.identity.findUser(trust.trustorUserId);
    if (!trustor?.enabled) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    const trustorDomain = await this.resources.findAny(trustor.domainId);
    if (!trustorDomain?.enabled) throw new AuthenticationError();
    const scope = await this.projectScope(trust.projectId, () => new AuthenticationError());
    const roles = await this.trustRoles(trust);
    if (!roles?.length) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);

    const methods = [...new Set([...(source?.methods ?? []), ...requestedMethods])];
    const issuedAt = Math.floor(now / 1000) * 1000;
    let expiresAt = source ? source.expiresAt : issuedAt + this.expirationSeconds * 1000;
    if (trust.expiresAt) expiresAt = Math.min(expiresAt, Math.floor(trust.expiresAt.getTime() / 1000) * 1000);
    const chainId = source ? (source.auditIds[1] ?? source.auditIds[0]!) : undefined;
    const auditIds = chainId ? [newAuditId(), chainId] : [newAuditId()];
    await this.refuseRevokedOnIssue(trustRevocable(user, scope, roles, auditIds, issuedAt, trust));
    // A trust with limited uses: one taken now, atomically (none left, or gone meanwhile: refused).
    if (options.consumeUse && trust.remainingUses !== null && !(await this.trusts!.consumeUse(trust.id))) throw new AuthenticationError();
    const id = await this.provider.issue(
      { userId: user.id, methods, expiresAt: expiresAt / 1000, auditIds, scope: { type: 'trust', projectId: scope.project.id, trustId: trust.id } },
      issuedAt / 1000,
    );
    const shown = trust.impersonation ? { user: trustor, domainName: trustorDomain.name } : { user, domainName: (await this.resources.findAny(user.domainId))!.name };
    return {
      id,
      methods: orderMethods(methods),
      user: tokenUser(shown.user, shown.domainName),
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      trust: trustSummary(trust, roles),
      auditIds,
      issuedAt,
      expiresAt,
    };
  }

  /**
   * A trust token's roles: the trust's with the roles they imply, or null when the trustor no longer
   * holds every one of them on the project (Keystone's "Trustee has no delegated roles.").
   */
  private async trustRoles(trust: Trust): Promise<Role[] | null> {
    const delegated = await this.trusts!.delegatedRoles(trust);
    const held = new Set((await this.trusts!.trustorRoles(trust.trustorUserId, trust.projectId!)).map((role) => role.id));
    return delegated.every((role) => held.has(role.id)) ? delegated : null;
  }

  /** The application_credential method: a project-scoped token with (at most) the credential's roles. */
  private async authenticateApplicationCredential(request: TokenRequest & { method: 'application_credential' }, receipt: string | undefined): Promise<TokenContext> {
    const credential = await this.applicationCredentials.authenticate(request.credential, request.secret);
    const user = await this.identity.findUser(credential.userId);
    if (!user || !user.enabled) throw new AuthenticationError();
    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw new AuthenticationError();
    // As in Keystone, the user's MFA rules apply to application credentials too (a receipt, naming no rule).
    await this.enforceRules(user, ['application_credential'], receipt);
    if (!credential.projectId) throw new AuthenticationError();
    const scope = await this.projectScope(credential.projectId, () => new AuthenticationError());
    const roles = await this.credentialRoles(user.id, scope, credential);
    if (roles.length === 0) throw new AuthenticationError();

    const issuedAt = Math.floor(this.clock.now() / 1000) * 1000;
    let expiresAt = issuedAt + this.expirationSeconds * 1000;
    if (credential.expiresAt) expiresAt = Math.min(expiresAt, Math.floor(credential.expiresAt.getTime() / 1000) * 1000);
    return this.issueDelegated(
      { user, userDomain, scope, roles, issuedAt, expiresAt },
      { type: 'application_credential', projectId: scope.project.id, applicationCredentialId: credential.id },
      { applicationCredential: credentialSummary(credential) },
    );
  }

  /** A token of one delegation method (application_credential, oauth1): its own payload scope and body part. */
  private async issueDelegated(
    token: { user: User; userDomain: { name: string }; scope: TokenScope & { type: 'project' }; roles: Role[]; issuedAt: number; expiresAt: number },
    payloadScope: Extract<TokenPayload['scope'], { type: 'application_credential' | 'oauth1' }>,
    delegation: Pick<TokenContext, 'applicationCredential' | 'oauth1'>,
  ): Promise<TokenContext> {
    const { user, userDomain, scope, roles, issuedAt, expiresAt } = token;
    const methods = [payloadScope.type];
    const auditIds = [newAuditId()];
    await this.refuseRevokedOnIssue(revocableToken(user, scope, roles, auditIds, issuedAt));
    const id = await this.provider.issue({ userId: user.id, methods, expiresAt: expiresAt / 1000, auditIds, scope: payloadScope }, issuedAt / 1000);
    return {
      id,
      methods,
      user: { id: user.id, name: user.name, domainId: user.domainId, domainName: userDomain.name, passwordExpiresAt: user.passwordExpiresAt },
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      ...delegation,
      auditIds,
      issuedAt,
      expiresAt,
    };
  }

  /** The oauth1 method: a project-scoped token with the access token's roles the user still holds. */
  private async authenticateOAuth1(request: TokenRequest & { method: 'oauth1' }): Promise<TokenContext> {
    if (!this.oauth1) throw new AuthenticationError();
    const accessToken = await this.oauth1.authenticate(request.signed);
    const user = await this.identity.findUser(accessToken.authorizingUserId);
    if (!user || !user.enabled) throw new AuthenticationError();
    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw new AuthenticationError();
    const scope = await this.projectScope(accessToken.projectId, () => new AuthenticationError());
    const roles = await this.delegatedRoles(user.id, scope, accessToken);
    if (roles.length === 0) throw new AuthenticationError();
    const issuedAt = Math.floor(this.clock.now() / 1000) * 1000;
    return this.issueDelegated(
      { user, userDomain, scope, roles, issuedAt, expiresAt: issuedAt + this.expirationSeconds * 1000 },
      { type: 'oauth1', projectId: scope.project.id, accessTokenId: accessToken.id },
      { oauth1: { accessTokenId: accessToken.id, consumerId: accessToken.consumerId } },
    );
  }

  /** Keystone's OAuth roles: the delegated roles and the roles they imply, of those the user holds on the project. */
  private async delegatedRoles(userId: string, scope: TokenScope & { type: 'project' }, accessToken: AccessToken): Promise<Role[]> {
    const implications = await this.assignments.listImplications();
    const implied = new Map(implications.map((entry) => [entry.prior.id, entry.implied.map((role) => role.id)]));
    const delegated = new Set<string>();
    const queue = [...accessToken.roleIds];
    while (queue.length) {
      const roleId = queue.shift()!;
      if (delegated.has(roleId)) continue;
      delegated.add(roleId);
      queue.push(...(implied.get(roleId) ?? []));
    }
    return (await this.rolesFor(userId, scope)).filter((role) => delegated.has(role.id));
  }

  /**
   * A project-scoped token for a user whose credential was already checked (an EC2 or S3 signature),
   * with Keystone's marker method (`ec2credential`): the user and project must be enabled (401) and
   * the user must hold a role on the project ("User not valid for project.", 401). A credential made
   * with a trust-scoped token carries the trust: its token is trust-scoped, with the trust's roles
   * only, for the trustee (who, with impersonation, appears as the trustor), as in Keystone.
   */
  async issueForCredential(userId: string, projectId: string, method: 'ec2credential', delegation: { trustId?: string | undefined } = {}): Promise<TokenContext> {
    const user = await this.identity.findUser(userId);
    if (!user || !user.enabled) throw new AuthenticationError();
    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw new AuthenticationError();
    if (delegation.trustId !== undefined) return this.issueForTrustCredential(user, projectId, method, delegation.trustId);
    const scope = await this.projectScope(projectId, () => new AuthenticationError());
    const roles = await this.rolesFor(user.id, scope);
    if (roles.length === 0) throw new AuthenticationError();
    const issuedAt = Math.floor(this.clock.now() / 1000) * 1000;
    const expiresAt = issuedAt + this.expirationSeconds * 1000;
    const auditIds = [newAuditId()];
    try {
      await this.refuseRevokedOnIssue(revocableToken(user, scope, roles, auditIds, issuedAt));
    } catch (error) {
      // An event of this very second would kill the token on arrival: the client signs again.
      if (error instanceof RevokedOnIssue) throw new AuthenticationError();
      throw error;
    }
    const id = await this.provider.issue({ userId: user.id, methods: [method], expiresAt: expiresAt / 1000, auditIds, scope: payloadScope(scope) }, issuedAt / 1000);
    return {
      id,
      methods: [method],
      user: { id: user.id, name: user.name, domainId: user.domainId, domainName: userDomain.name, passwordExpiresAt: user.passwordExpiresAt },
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      auditIds,
      issuedAt,
      expiresAt,
    };
  }

  /**
   * Keystone's ec2tokens with a credential's trust_id: a gone or expired trust is its 404; the token
   * goes to the trustee. The credential's user must be that trustee, or the trustor it impersonates
   * (a trust written into a blob by hand delegates nothing to anyone else), and its project the trust's.
   */
  private async issueForTrustCredential(user: User, projectId: string, method: 'ec2credential', trustId: string): Promise<TokenContext> {
    const trust = await this.trusts?.find(trustId);
    if (!trust || (trust.expiresAt && trust.expiresAt.getTime() <= this.clock.now())) throw NotFoundError.of('trust', trustId);
    const delegatedTo = user.id === trust.trusteeUserId || (trust.impersonation && user.id === trust.trustorUserId);
    if (!delegatedTo) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    if (trust.projectId !== projectId) throw new AuthenticationError();
    const trustee = user.id === trust.trusteeUserId ? user : await this.identity.findUser(trust.trusteeUserId);
    if (!trustee?.enabled) throw new AuthenticationError();
    return this.issueTrustScoped(trustee, trust, [method], undefined, { consumeUse: false });
  }

  /** The credential's roles that the user still holds on the project (Keystone recomputes them). */
  private async credentialRoles(userId: string, scope: TokenScope & { type: 'project' }, credential: ApplicationCredential): Promise<Role[]> {
    const held = await this.rolesFor(userId, scope);
    const granted = new Set(credential.roles.map((role) => role.id));
    return held.filter((role) => granted.has(role.id));
  }

  /**
   * A validation the cache can answer right now, without waiting for anything; otherwise undefined
   * (and nothing counted), and validate() has the answer. The gateway's hot path: no promise.
   */
  validateCached(token: string): TokenContext | undefined {
    if (!this.sync.cachesReady) return undefined;
    const hit = this.cache.getIfCurrent(token);
    if (!hit || !this.stillGood(hit)) return undefined;
    this.validationStats.valid++;
    this.validationStats.cacheHits++;
    return hit.context;
  }

  /** A cached validation that still holds: not expired, not revoked since. */
  private stillGood(hit: { context: TokenContext; revocable: RevocableToken }, expiredWindowMs = 0): boolean {
    return this.clock.now() < hit.context.expiresAt + expiredWindowMs && !this.revocations.isRevoked(hit.revocable);
  }

  /**
   * Decrypts a token and checks it is still good: not expired or revoked, its user, project and
   * domain still there and enabled, and roles still held on its scope. Any failure is a 404
   * (NotFoundError) with Keystone's texts; callers using it as X-Auth-Token turn that into 401.
   */
  async validate(token: string, options: ValidateOptions = {}): Promise<TokenContext> {
    const wasReachable = this.store.health.reachable;
    try {
      return await this.validateOnce(token, options);
    } catch (error) {
      // The database failed while this node still took it for reachable (its own query timed out, or
      // it waited for the probe's verdict): once the partition is known, answer as during one, from
      // what this node holds.
      if (!wasReachable || !isDatabaseUnreachable(error)) throw error;
      await this.store.health.pendingVerdict;
      if (this.store.health.reachable) throw error;
      return this.validateOnce(token, options);
    }
  }

  private async validateOnce(token: string, options: ValidateOptions): Promise<TokenContext> {
    const generation = this.sync.validationGeneration;
    // The cached context is the same whether expiry is allowed (a privileged service token): only
    // the expiry check differs, so such validations use the cache, and last known answers, as well.
    const cacheable = await this.sync.prepareValidation();
    const expiredWindowMs = options.allowExpired ? ALLOW_EXPIRED_WINDOW_MS : 0;
    const stats = this.validationStats;
    if (cacheable) {
      const hit = this.cache.get(token);
      if (hit) {
        if (this.stillGood(hit, expiredWindowMs)) {
          stats.valid++;
          stats.cacheHits++;
          return hit.context;
        }
        // Expired, or revoked through Redis while the database cannot be asked: refused, not a 503
        // (and kept, so it is refused again rather than looked up in a database that cannot answer).
        if (this.sync.servingLastKnown) {
          stats.invalid++;
          throw NotFoundError.tokenNotValidated();
        }
        this.cache.delete(token);
      }
      stats.cacheMisses++;
    }
    let validated: { context: TokenContext; revocable: RevocableToken };
    try {
      validated = await this.validateFully(token, options);
    } catch (error) {
      // The database is unreachable: a token this node validated before stays good unless it expired
      // or was revoked (revocation events reach the index here through Redis). A change that takes
      // access away without an event (a role removed while others remain) announces a newer access
      // epoch instead, and then ClusterSync refuses last-known answers; `cacheable` says neither the
      // index is behind other nodes nor such a change was announced.
      if (cacheable && isDatabaseUnreachable(error)) {
        const known = this.cache.lastKnown(token);
        if (known && this.stillGood(known, expiredWindowMs)) {
          stats.valid++;
          return known.context;
        }
      }
      // A token that is no good, or a failure to find out (database unavailable, a bug).
      if (error instanceof ServiceError && error.kind !== 'unavailable') stats.invalid++;
      else stats.error++;
      throw error;
    }
    stats.valid++;
    const { context, revocable } = validated;
    if (cacheable) this.cache.set(token, { context, revocable }, generation);
    return context;
  }

  private async validateFully(token: string, options: ValidateOptions): Promise<{ context: TokenContext; revocable: RevocableToken }> {
    const { payload, issuedAt } = await this.provider.decode(token);
    const now = this.clock.now();
    const expiresAt = Math.floor(payload.expiresAt) * 1000;
    const window = options.allowExpired ? ALLOW_EXPIRED_WINDOW_MS : 0;
    if (now >= expiresAt + window) throw NotFoundError.tokenNotValidated();

    const user = await this.identity.findUser(payload.userId);
    if (!user || !user.enabled) throw NotFoundError.tokenNotValidated();
    const userDomain = await this.resources.findAny(user.domainId);
    if (!userDomain?.enabled) throw NotFoundError.tokenNotValidated();

    let scope: TokenScope;
    let credential: ApplicationCredential | undefined;
    let accessToken: AccessToken | undefined;
    let trusted: { trust: Trust; roles: Role[]; shown: User; shownDomainName: string } | undefined;
    let federation: TokenFederation | undefined;
    if (payload.scope.type === 'federated_unscoped' || payload.scope.type === 'federated_project' || payload.scope.type === 'federated_domain') {
      const { groupIds, identityProviderId, protocolId } = payload.scope;
      // A disabled or deleted provider's tokens no longer validate (Keystone: a deleted one's).
      if (!this.federation || !(await this.federation.identityProviderEnabled(identityProviderId))) throw NotFoundError.tokenNotValidated();
      federation = { groupIds, identityProviderId, protocolId };
    }
    switch (payload.scope.type) {
      case 'unscoped':
      case 'federated_unscoped':
        scope = { type: 'unscoped' };
        break;
      case 'system':
        scope = { type: 'system' };
        break;
      case 'domain':
      case 'federated_domain': {
        const domain = await this.resources.findAny(payload.scope.domainId);
        if (!domain?.isDomain || !domain.enabled) throw NotFoundError.tokenNotValidated();
        scope = { type: 'domain', domain: { id: domain.id, name: domain.name } };
        break;
      }
      case 'project':
      case 'federated_project': {
        scope = await this.projectScope(payload.scope.projectId, () => NotFoundError.tokenNotValidated());
        break;
      }
      case 'application_credential': {
        const found = await this.applicationCredentials.find(payload.scope.applicationCredentialId);
        if (!found || found.userId !== user.id || found.projectId !== payload.scope.projectId) throw NotFoundError.tokenNotValidated();
        if (found.expiresAt && found.expiresAt.getTime() <= now) throw NotFoundError.tokenNotValidated();
        credential = found;
        scope = await this.projectScope(payload.scope.projectId, () => NotFoundError.tokenNotValidated());
        break;
      }
      case 'trust': {
        // Keystone: the trust must still be there (a deleted or used-up one: "Could not find trust").
        const trust = await this.trusts?.find(payload.scope.trustId);
        if (!trust) throw NotFoundError.of('trust', payload.scope.trustId);
        if (trust.expiresAt && trust.expiresAt.getTime() <= now) throw NotFoundError.tokenNotValidated();
        if (trust.trusteeUserId !== user.id || trust.projectId !== payload.scope.projectId) throw NotFoundError.tokenNotValidated();
        const trustor = await this.identity.findUser(trust.trustorUserId);
        if (!trustor?.enabled) throw NotFoundError.tokenNotValidated();
        const trustorDomain = await this.resources.findAny(trustor.domainId);
        if (!trustorDomain?.enabled) throw NotFoundError.tokenNotValidated();
        scope = await this.projectScope(payload.scope.projectId, () => NotFoundError.tokenNotValidated());
        const trustRoles = await this.trustRoles(trust);
        if (!trustRoles?.length) throw NotFoundError.tokenNotValidated();
        trusted = trust.impersonation
          ? { trust, roles: trustRoles, shown: trustor, shownDomainName: trustorDomain.name }
          : { trust, roles: trustRoles, shown: user, shownDomainName: userDomain.name };
        break;
      }
      case 'oauth1': {
        // A deleted access token (or consumer) ends its tokens: Keystone answers with this text.
        const found = this.oauth1 ? await this.oauth1.findAccessToken(payload.scope.accessTokenId) : null;
        if (!found) throw NotFoundError.oauth1('access token');
        if (found.authorizingUserId !== user.id || found.projectId !== payload.scope.projectId) throw NotFoundError.tokenNotValidated();
        accessToken = found;
        scope = await this.projectScope(payload.scope.projectId, () => NotFoundError.tokenNotValidated());
        break;
      }
      default:
        throw NotFoundError.tokenNotValidated();
    }
    const roles =
      scope.type === 'unscoped'
        ? []
        : federation
          ? await this.federatedRoles(user.id, federation, scope)
          : trusted
          ? trusted.roles
          : credential && scope.type === 'project'
            ? await this.credentialRoles(user.id, scope, credential)
            : accessToken && scope.type === 'project'
              ? await this.delegatedRoles(user.id, scope, accessToken)
              : await this.rolesFor(user.id, scope);
    if (scope.type !== 'unscoped' && roles.length === 0) throw NotFoundError.tokenNotValidated();

    const revocable = trusted
      ? trustRevocable(user, scope, roles, payload.auditIds, issuedAt * 1000, trusted.trust)
      : revocableToken(user, scope, roles, payload.auditIds, issuedAt * 1000);
    if (this.revocations.isRevoked(revocable)) throw NotFoundError.tokenNotValidated();

    const context: TokenContext = {
      id: token,
      methods: orderMethods(payload.methods),
      user: trusted ? tokenUser(trusted.shown, trusted.shownDomainName) : tokenUser(user, userDomain.name),
      scope,
      roles: roles.map((role) => ({ id: role.id, name: role.name })),
      ...(credential ? { applicationCredential: credentialSummary(credential) } : {}),
      ...(accessToken ? { oauth1: { accessTokenId: accessToken.id, consumerId: accessToken.consumerId } } : {}),
      ...(trusted ? { trust: trustSummary(trusted.trust, trusted.roles) } : {}),
      ...(federation ? { federation, ...(scope.type === 'unscoped' ? {} : { roleDetails: roles }) } : {}),
      auditIds: payload.auditIds,
      issuedAt: issuedAt * 1000,
      expiresAt,
    };
    return { context, revocable };
  }

  /**
   * What keystonemiddleware does with X-Auth-Token and X-Service-Token: the service token, when
   * present, must be valid. Only a service token carrying one of `serviceRoles` (SERVICE_TOKEN_ROLES,
   * keystonemiddleware's service_token_roles with service_token_roles_required) is `privileged`: the
   * user token may then be expired (within Keystone's allow_expired window), so long-running
   * operations started by a user can finish, and the gateway waives application-credential access
   * rules. Any other valid token as X-Service-Token grants nothing: at the public ingress anyone can
   * send one.
   */
  async validateWithServiceToken(
    userToken: string,
    serviceToken: string | undefined,
    serviceRoles: readonly string[] = ['service'],
  ): Promise<{ user: TokenContext; service?: TokenContext; privileged: boolean }> {
    if (!serviceToken) return { user: await this.validate(userToken), privileged: false };
    const service = await this.validate(serviceToken);
    // A token of an application credential with access rules is for the listed calls only: as a
    // service token it lifts nothing (neither others' access rules nor their expiry).
    const restrictedByRules = (service.applicationCredential?.accessRules.length ?? 0) > 0;
    const privileged = !restrictedByRules && holdsServiceRole(service, serviceRoles);
    return { user: await this.validate(userToken, { allowExpired: privileged }), service, privileged };
  }

  /** DELETE /v3/auth/tokens: revokes exactly this token (its audit id). */
  async revoke(token: string): Promise<void> {
    const context = await this.validate(token);
    await this.store.transaction((em) =>
      this.revocations.record(em, { auditId: context.auditIds[0], expiresAt: context.expiresAt }).then(() => undefined),
    );
  }

  private async resolveScope(user: User, request: ScopeRequest): Promise<TokenScope> {
    switch (request.type) {
      case 'unscoped':
        return { type: 'unscoped' };
      case 'system':
        return { type: 'system' };
      case 'domain': {
        const domain = await this.findDomain(request.domain);
        if (!domain?.isDomain || !domain.enabled) throw new AuthenticationError();
        return { type: 'domain', domain: { id: domain.id, name: domain.name } };
      }
      case 'project': {
        const named = request.project;
        if ('id' in named) return this.projectScope(named.id, () => new AuthenticationError());
        const domain = await this.findDomain(named.domain);
        if (!domain?.isDomain || !domain.enabled) throw new AuthenticationError();
        const project = await this.resources.findProjectByName(named.name, domain.id);
        if (!project) throw new AuthenticationError();
        return this.projectScope(project.id, () => new AuthenticationError());
      }
      case 'trust':
        // Handled before the scope is resolved (authenticateTrust).
        throw new AuthenticationError();
      case 'default': {
        // Keystone scopes to the default project when the user may use it, else silently unscoped.
        if (!user.defaultProjectId) return { type: 'unscoped' };
        try {
          const scope = await this.projectScope(user.defaultProjectId, () => new AuthenticationError());
          return (await this.rolesFor(user.id, scope)).length ? scope : { type: 'unscoped' };
        } catch (error) {
          if (error instanceof AuthenticationError) return { type: 'unscoped' };
          throw error;
        }
      }
    }
  }

  private findDomain(reference: DomainReference) {
    return 'id' in reference ? this.resources.findAny(reference.id) : this.resources.findDomainByName(reference.name);
  }

  private async projectScope(projectId: string, failure: () => Error): Promise<TokenScope & { type: 'project' }> {
    const project = await this.resources.findAny(projectId);
    if (!project || project.isDomain || !project.enabled || !project.domainId) throw failure();
    const domain = await this.resources.findAny(project.domainId);
    if (!domain?.enabled) throw failure();
    return {
      type: 'project',
      project: { id: project.id, name: project.name, domainId: domain.id, domainName: domain.name, isDomain: project.isDomain },
    };
  }

  /**
   * A scoped federated token's roles, as Keystone 22's token model computes them
   * (_get_federated_roles): the token's groups' roles on the project or domain (inherited and
   * implied ones included), the groups' and the user's system grants, and the user's own roles on
   * the target; each role once, in that order.
   */
  private async federatedRoles(userId: string, federation: TokenFederation, scope: TokenScope): Promise<Role[]> {
    if (scope.type !== 'project' && scope.type !== 'domain') return this.rolesFor(userId, scope);
    const targetId = scope.type === 'project' ? scope.project.id : scope.domain.id;
    const found = [
      ...(await this.assignments.effectiveRolesOfGroups(federation.groupIds, scope.type, targetId)),
      ...(await this.assignments.systemGrantRoles('group', federation.groupIds)),
      ...(await this.assignments.systemGrantRoles('user', [userId])),
      ...(await this.rolesFor(userId, scope)),
    ];
    const seen = new Set<string>();
    return found.filter((role) => !seen.has(role.id) && seen.add(role.id) !== undefined);
  }

  private rolesFor(userId: string, scope: TokenScope): Promise<Role[]> {
    switch (scope.type) {
      case 'project':
        return this.assignments.effectiveRoles(userId, 'project', scope.project.id);
      case 'domain':
        return this.assignments.effectiveRoles(userId, 'domain', scope.domain.id);
      case 'system':
        return this.assignments.effectiveRoles(userId, 'system', SYSTEM_TARGET_ID);
      case 'unscoped':
        return Promise.resolve([]);
    }
  }
}

/** Whether a validated service token carries one of the service roles (SERVICE_TOKEN_ROLES). */
export function holdsServiceRole(service: TokenContext, serviceRoles: readonly string[]): boolean {
  return service.roles.some((role) => serviceRoles.includes(role.name));
}

/** What the revocation check needs of a token (issuedAt in ms). */
function revocableToken(user: { id: string; domainId: string }, scope: TokenScope, roles: readonly { id: string }[], auditIds: readonly string[], issuedAt: number): RevocableToken {
  const auditId = auditIds[0]!;
  return {
    userId: user.id,
    userDomainId: user.domainId,
    projectId: scope.type === 'project' ? scope.project.id : undefined,
    assignmentDomainId: scope.type === 'project' ? scope.project.domainId : scope.type === 'domain' ? scope.domain.id : undefined,
    roleIds: roles.map((role) => role.id),
    auditId,
    auditChainId: auditIds[1] ?? auditId,
    issuedAt,
  };
}

/** A trust token's revocation check: an event of its trust, or of its trustor or trustee (as user_id). */
function trustRevocable(user: { id: string; domainId: string }, scope: TokenScope, roles: readonly { id: string }[], auditIds: readonly string[], issuedAt: number, trust: Trust): RevocableToken {
  return { ...revocableToken(user, scope, roles, auditIds, issuedAt), trustId: trust.id, trustorId: trust.trustorUserId, trusteeId: trust.trusteeUserId };
}

function tokenUser(user: User, domainName: string): TokenContext['user'] {
  return { id: user.id, name: user.name, domainId: user.domainId, domainName, passwordExpiresAt: user.passwordExpiresAt };
}

function trustSummary(trust: Trust, roles: Role[]): NonNullable<TokenContext['trust']> {
  return { id: trust.id, trustorUserId: trust.trustorUserId, trusteeUserId: trust.trusteeUserId, impersonation: trust.impersonation, roles };
}

/** The token about to be issued is already revoked (an event in this very second): try again in the next. */
class RevokedOnIssue extends Error {}

function credentialSummary(credential: ApplicationCredential): NonNullable<TokenContext['applicationCredential']> {
  return { id: credential.id, name: credential.name, restricted: credential.unrestricted !== true, accessRules: credential.accessRules };
}

function payloadScope(scope: TokenScope): TokenPayload['scope'] {
  switch (scope.type) {
    case 'unscoped':
      return { type: 'unscoped' };
    case 'system':
      return { type: 'system' };
    case 'domain':
      return { type: 'domain', domainId: scope.domain.id };
    case 'project':
      return { type: 'project', projectId: scope.project.id };
  }
}

/** A federated token's payload scope (Keystone's Federated*Payload): unscoped, project or domain. */
function federatedPayloadScope(scope: TokenScope, federation: TokenFederation): TokenPayload['scope'] {
  const { groupIds, identityProviderId, protocolId } = federation;
  switch (scope.type) {
    case 'project':
      return { type: 'federated_project', projectId: scope.project.id, groupIds, identityProviderId, protocolId };
    case 'domain':
      return { type: 'federated_domain', domainId: scope.domain.id, groupIds, identityProviderId, protocolId };
    default:
      return { type: 'federated_unscoped', groupIds, identityProviderId, protocolId };
  }
}

/** Keystone lists methods as decoded from the bitmask: highest bit first. */
function orderMethods(methods: string[]): string[] {
  return [...new Set(methods)].sort((a, b) => AUTH_METHODS.indexOf(b) - AUTH_METHODS.indexOf(a));
}
