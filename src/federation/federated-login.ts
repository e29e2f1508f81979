import type { AssignmentService } from '../assignment/assignment-service.ts';
import type { IdentityService, User, UserReference } from '../identity/identity-service.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { Store } from '../store/database.ts';
import { AuthenticationError, ForbiddenError, ValidationError } from '../support/errors.ts';
import type { Assertion, AssertionRequest, AssertionVerifier } from './assertion.ts';
import { FederationRepository } from './federation-repository.ts';
import type { FederationService, IdentityProvider, Protocol } from './federation-service.ts';
import { applyMappingFilter, ephemeralUserIdentity, type MappedGroupLookup } from './mapping-engine.ts';
import { MappedGroupNotFoundError, type MappingRule } from './mapping-types.ts';
import { ShadowUsers } from './shadow-users.ts';

/**
 * The protocol ids a federated login may use: each must be an auth method (Keystone's [auth]
 * methods; `mapped`, `openid` and `saml2` all load its mapped plugin), and each has its bit in the
 * token's methods (fernet-provider.ts AUTH_METHODS).
 */
export const FEDERATED_METHODS: readonly string[] = ['mapped', 'openid', 'saml2'];

/** What a federated token carries of its login (Keystone's OS-FEDERATION). */
export interface FederationContext {
  /** The mapped groups: the token's roles come from their grants; never stored as memberships. */
  groupIds: string[];
  identityProviderId: string;
  protocolId: string;
}

/** Who logged in: an ephemeral (shadowed) user with its federation context, or a mapped local user. */
export interface FederatedLoginResult {
  user: User;
  /** Absent for a `local` user: Keystone gives it an ordinary token (methods [protocol]). */
  federation?: FederationContext;
}

export interface FederatedLoginOptions {
  /** Keystone's [federation] remote_id_attribute ('' : none). */
  remoteIdAttribute: string;
  /**
   * Keystone's [<protocol>] remote_id_attribute, between the protocol's own and the [federation]
   * one: e.g. Shib-Identity-Provider for the SAML protocols (SAML_REMOTE_ID_ATTRIBUTE).
   */
  protocolRemoteIdAttributes?: Readonly<Record<string, string>>;
}

/**
 * Keystone 22's mapped auth plugin (keystone/auth/plugins/mapped.py): the provider and protocol
 * of the login URL, the verified assertion's provider (its remote id), the protocol's mapping with
 * the groups resolved against the real ones, then the user: an `ephemeral` one is shadowed (a
 * federated_user row and a user in the provider's domain, Keystone's id) and the mapping's projects
 * provisioned with their roles, all in one transaction; a `local` one must exist.
 */
export class FederatedLogin {
  private readonly repository = new FederationRepository();
  private readonly shadowUsers: ShadowUsers;

  constructor(
    private readonly store: Store,
    private readonly federation: FederationService,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    assignments: AssignmentService,
    private readonly options: FederatedLoginOptions,
    /** What the mapped method of POST /v3/auth/tokens verifies a request with (the login route's). */
    private readonly verifiers: readonly AssertionVerifier[] = [],
  ) {
    this.shadowUsers = new ShadowUsers(this.repository, identity, resources, assignments);
  }

  /**
   * The provider and protocol a login names, in Keystone's order: the protocol must be an auth
   * method (401), the provider exist (404) and be enabled (403 "Identity Provider <id> is
   * disabled"), the protocol exist (404).
   */
  async target(idpId: string, protocolId: string): Promise<{ identityProvider: IdentityProvider; protocol: Protocol }> {
    if (!FEDERATED_METHODS.includes(protocolId)) throw new AuthenticationError('Attempted to authenticate with an unsupported method.');
    const identityProvider = await this.federation.getIdentityProvider(idpId);
    if (!identityProvider.enabled) throw identityProviderDisabled(idpId);
    const protocol = await this.federation.getProtocol(idpId, protocolId);
    return { identityProvider, protocol };
  }

  /**
   * Asks each verifier in turn; the first that handles the protocol gives the assertion. None
   * does (or there are none): the generic 401. Nothing is ever read from the request's headers
   * here: only a verifier, from what it verified itself, builds an assertion.
   */
  static async verify(verifiers: readonly AssertionVerifier[], request: AssertionRequest): Promise<Assertion> {
    for (const verifier of verifiers) {
      const assertion = await verifier.verify(request);
      if (assertion) return assertion;
    }
    throw AuthenticationError.because({ reason: `No verifier accepted the ${request.protocol.id} login for identity provider ${request.identityProvider.id}`, code: 401 });
  }

  /**
   * The mapped method of POST /v3/auth/tokens without a token id (Keystone's handle_unscoped_token,
   * which reads the web server's environment): the provider must exist (404) and be enabled (403),
   * the protocol exist (404); then the request's own credentials (an OIDC bearer token) go through
   * the verifiers as at the login URL. Nothing else of the request is believed: no verifier that
   * accepts it, the generic 401.
   */
  async authenticateMapped(request: { method: string; identityProviderId: string; protocolId: string; headers: AssertionRequest['headers'] }): Promise<FederatedLoginResult & { protocolId: string }> {
    const identityProvider = await this.federation.getIdentityProvider(request.identityProviderId);
    if (!identityProvider.enabled) throw identityProviderDisabled(identityProvider.id);
    const protocol = await this.federation.getProtocol(identityProvider.id, request.protocolId);
    const assertion = await FederatedLogin.verify(this.verifiers, { identityProvider, protocol, headers: request.headers });
    return { ...(await this.login(identityProvider, protocol, assertion)), protocolId: protocol.id };
  }

  /** Keystone's handle_unscoped_token after the provider checks (target()). */
  async login(identityProvider: IdentityProvider, protocol: Protocol, assertion: Assertion): Promise<FederatedLoginResult> {
    this.checkRemoteId(identityProvider, protocol, assertion);
    const mapping = await this.federation.getMapping(protocol.mappingId);
    const mapped = await applyMappingFilter(mapping.id, mapping.rules as MappingRule[], assertion, this.groupLookup());
    if (mapped.user.type !== 'ephemeral') return { user: await this.localUser(mapped.user) };

    const remoteUser = typeof assertion.REMOTE_USER === 'string' ? assertion.REMOTE_USER : undefined;
    const who = ephemeralUserIdentity(mapped.user, remoteUser);
    const email = typeof mapped.user.email === 'string' && mapped.user.email ? mapped.user.email : undefined;
    const user = await this.store.transaction(async (em) => {
      const shadowed = await this.shadowUsers.shadow(em, {
        idpId: identityProvider.id,
        protocolId: protocol.id,
        domainId: identityProvider.domainId,
        uniqueId: who.id,
        displayName: who.name,
        email,
      });
      await this.shadowUsers.provisionProjects(em, shadowed, mapped.projects, identityProvider);
      return shadowed;
    });
    return { user, federation: { groupIds: mapped.group_ids, identityProviderId: identityProvider.id, protocolId: protocol.id } };
  }

  /**
   * What rescoping a federated token re-checks (Keystone's handle_scoped_token): the provider is
   * still there and enabled (403), its protocol's mapping still there, and every group of the
   * token still exists (MappedGroupNotFound, a 500 in Keystone).
   */
  async checkRescope(federation: FederationContext): Promise<void> {
    const identityProvider = await this.federation.getIdentityProvider(federation.identityProviderId);
    if (!identityProvider.enabled) throw identityProviderDisabled(identityProvider.id);
    const protocol = await this.federation.getProtocol(identityProvider.id, federation.protocolId);
    const mapping = await this.federation.getMapping(protocol.mappingId);
    await applyGroupCheck(federation.groupIds, mapping.id, this.groupLookup());
  }

  /** Whether the provider of a federated token still exists and is enabled (token validation). */
  async identityProviderEnabled(idpId: string): Promise<boolean> {
    const row = await this.repository.findIdentityProvider(this.store.reader(), idpId);
    return row?.enabled === true;
  }

  /**
   * Keystone's validate_idp: the remote id attribute is the protocol's, else the one configured for
   * its protocol id (Keystone's [saml2] remote_id_attribute), else FEDERATION_REMOTE_ID_ATTRIBUTE; with none, or a provider without remote ids, any assertion
   * goes. The assertion must carry it (else the 401 of a ValidationError in an authentication) and
   * its value be one of the provider's remote ids (403).
   */
  private checkRemoteId(identityProvider: IdentityProvider, protocol: Protocol, assertion: Assertion): void {
    const attribute = protocol.remoteIdAttribute || this.options.protocolRemoteIdAttributes?.[protocol.id] || this.options.remoteIdAttribute;
    if (!attribute || identityProvider.remoteIds.length === 0) return;
    const value = assertion[attribute];
    if (value === undefined) {
      throw AuthenticationError.because({ reason: new ValidationError('Could not find Identity Provider identifier in environment').message, code: 401 });
    }
    if (!identityProvider.remoteIds.includes(value)) {
      // Keystone's Forbidden("Incoming identity provider identifier not included among the accepted
      // identifiers."), whose text it hides from clients.
      throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    }
  }

  /**
   * A `local` user (Keystone's UserAuthInfo for the mapped method): by id, or by name in a domain
   * given by id or name; missing, disabled or in a disabled domain: 401.
   */
  private async localUser(mappedUser: { id?: string; name?: string; domain?: { id?: string; name?: string } }): Promise<User> {
    let reference: UserReference;
    if (mappedUser.id) reference = { id: mappedUser.id };
    else if (mappedUser.name && mappedUser.domain?.id) reference = { name: mappedUser.name, domainId: mappedUser.domain.id };
    else if (mappedUser.name && mappedUser.domain?.name) reference = { name: mappedUser.name, domainName: mappedUser.domain.name };
    else throw AuthenticationError.because({ reason: 'The mapped local user names no id, or no name and domain', code: 401 });
    const user = await this.identity.resolveUser(reference);
    if (!user?.enabled) throw AuthenticationError.because({ reason: 'The mapped local user does not exist or is disabled', code: 401 });
    const domain = await this.resources.findAny(user.domainId);
    if (!domain?.enabled) throw AuthenticationError.because({ reason: "The mapped local user's domain is disabled", code: 401, userId: user.id });
    return user;
  }

  private groupLookup(): MappedGroupLookup {
    return {
      groupExists: async (groupId) => (await this.identity.listGroups({ ids: [groupId] })).length > 0,
      findGroupId: async (name, domainId) => (await this.identity.listGroups({ name: [{ operator: 'equals', value: name }], domainId })).find((group) => group.name === name)?.id,
      findDomainId: async (name) => (await this.resources.findDomainByName(name))?.id,
    };
  }
}

/** Keystone's validate_mapped_group_ids for a rescoped token's groups. */
async function applyGroupCheck(groupIds: readonly string[], mappingId: string, lookup: MappedGroupLookup): Promise<void> {
  for (const groupId of groupIds) if (!(await lookup.groupExists(groupId))) throw new MappedGroupNotFoundError(groupId, mappingId);
}

/** Keystone's Forbidden("Identity Provider <id> is disabled"), whose text it hides from clients. */
function identityProviderDisabled(_idpId: string): ForbiddenError {
  return new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
}
