// This service as Keystone's SAML 2.0 identity provider for Keystone-to-Keystone federation: the
// metadata a service provider imports, and a project-scoped token exchanged for a signed assertion
// addressed to a registered service provider (keystone/api/_shared/saml.py create_base_saml_assertion).

import type { SamlIdpConfig } from '../../config.ts';
import type { IdentityService } from '../../identity/identity-service.ts';
import type { ResourceService } from '../../resource/resource-service.ts';
import type { Clock } from '../../support/clock.ts';
import { ForbiddenError, NotFoundError } from '../../support/errors.ts';
import { newId } from '../../support/ids.ts';
import type { TokenService } from '../../token/token-service.ts';
import type { FederationService, ServiceProvider } from '../federation-service.ts';
import { groupAttributeValue, signedEcpEnvelope, signedResponse, type AssertionRequest } from './assertion.ts';
import { idpMetadata } from './metadata.ts';
import type { SamlSigningKeys } from './signing-keys.ts';

/** Keystone's SAMLSigningError: an assertion asked for without signing keys (500, generic text, logged). */
export class SamlSigningError extends Error {
  override name = 'SamlSigningError';
  constructor(reason: string) {
    super(`Unable to sign SAML assertion. It is likely that this server does not have xmlsec1 installed or this is the result of misconfiguration. Reason ${reason}.`);
  }
}

const METADATA_NOT_CONFIGURED = 'Could not find the SAML identity provider metadata: SAML is not configured on this server.';
const NOT_CONFIGURED = 'SAML is not configured (SAML_CERTFILE, SAML_KEYFILE, SAML_IDP_ENTITY_ID)';

export interface SamlIdpDependencies {
  settings: SamlIdpConfig;
  /** Undefined: SAML not configured (no key files). */
  keys: SamlSigningKeys | undefined;
  clock: Clock;
  federation: Pick<FederationService, 'getServiceProvider'>;
  tokens: Pick<TokenService, 'validate'>;
  identity: Pick<IdentityService, 'listGroups'>;
  resources: Pick<ResourceService, 'getDomain'>;
  /** uuid4 hex (tests may fix them). */
  newId?: () => string;
}

export interface SamlAssertionResult {
  xml: string;
  serviceProvider: ServiceProvider;
}

export class SamlIdentityProvider {
  private readonly newId: () => string;
  private readonly metadataXml: string | undefined;

  constructor(private readonly deps: SamlIdpDependencies) {
    this.newId = deps.newId ?? newId;
    // Generated once: the settings and certificate do not change while the process runs.
    this.metadataXml = deps.keys ? `${idpMetadata(deps.settings, deps.keys.certificateBase64)}\n` : undefined;
  }

  get configured(): boolean {
    return this.deps.keys !== undefined;
  }

  /**
   * The IdP metadata, as `keystone-manage saml_idp_metadata` prints it (with its newline). Without
   * SAML configured Keystone answers 500 (MetadataFileError: no idp_metadata_path file); this public,
   * unauthenticated route answers 404 instead, so anonymous requests cannot fill the error log.
   */
  metadata(): string {
    if (this.metadataXml === undefined) throw new NotFoundError(METADATA_NOT_CONFIGURED);
    return this.metadataXml;
  }

  /** POST /v3/auth/OS-FEDERATION/saml2 (`form` response) and /saml2/ecp (`form` ecp). */
  async assertion(tokenId: string, serviceProviderId: string, form: 'response' | 'ecp'): Promise<SamlAssertionResult> {
    const { federation, tokens, settings } = this.deps;
    const serviceProvider = await federation.getServiceProvider(serviceProviderId);
    if (serviceProvider.enabled !== true) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED); // Keystone hides its text ("Service Provider {id} is disabled")
    const token = await tokens.validate(tokenId);
    if (token.scope.type !== 'project') throw ForbiddenError.action('Use a project scoped token when attempting to create a SAML assertion');
    const { project } = token.scope;
    const groups = await this.groupsOf(token.user.id);
    const keys = this.deps.keys;
    if (!keys || !settings.entityId) throw new SamlSigningError(NOT_CONFIGURED);
    const request: AssertionRequest = {
      issuer: settings.entityId,
      recipient: serviceProvider.spUrl,
      claims: {
        user: token.user.name,
        userDomain: token.user.domainName,
        roles: token.roles.map((role) => role.name),
        project: project.name,
        projectDomain: project.domainName,
        groups,
      },
      now: this.deps.clock.now(),
      expiresIn: settings.assertionExpirationTime,
      ids: { response: this.newId(), assertion: this.newId(), session: this.newId() },
    };
    const xml =
      form === 'ecp'
        ? signedEcpEnvelope(request, `${serviceProvider.relayStatePrefix}${this.newId()}`, keys, settings.signatureAlgorithm)
        : signedResponse(request, keys, settings.signatureAlgorithm);
    return { xml, serviceProvider };
  }

  /** Keystone's group_membership(): every group of the user, with its domain's name. */
  private async groupsOf(userId: string): Promise<string[]> {
    const groups = await this.deps.identity.listGroups({ userId });
    const domainNames = new Map<string, string>();
    const values: string[] = [];
    for (const group of groups) {
      let domainName = domainNames.get(group.domainId);
      if (domainName === undefined) {
        domainName = (await this.deps.resources.getDomain(group.domainId)).name;
        domainNames.set(group.domainId, domainName);
      }
      values.push(groupAttributeValue(group.name, domainName));
    }
    return values;
  }
}
