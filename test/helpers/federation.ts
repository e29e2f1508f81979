import type { Assertion, AssertionRequest, AssertionVerifier } from '../../src/federation/assertion.ts';

/**
 * A verifier for tests: answers the assertion `current()` gives (undefined: it does not handle the
 * request) for the protocols listed, whatever the request carries. It stands in for the OIDC
 * verifier, so a test drives the whole federated login with claims it chose. Requests it saw are kept.
 */
export class FixedAssertionVerifier implements AssertionVerifier {
  readonly requests: AssertionRequest[] = [];
  assertion: Assertion | undefined;

  constructor(
    assertion: Assertion | undefined,
    private readonly protocols: readonly string[] = ['openid', 'mapped', 'saml2'],
  ) {
    this.assertion = assertion;
  }

  async verify(request: AssertionRequest): Promise<Assertion | undefined> {
    this.requests.push(request);
    if (!this.protocols.includes(request.protocol.id)) return undefined;
    return this.assertion ? { ...this.assertion } : undefined;
  }
}

/** The claims of the OIDC peer's alice as mod_auth_openidc would pass them (README "How Keystone consumes OIDC"). */
export function aliceAssertion(issuer = 'http://127.0.0.1:19000'): Assertion {
  return {
    HTTP_OIDC_ISS: issuer,
    HTTP_OIDC_SUB: 'alice',
    HTTP_OIDC_PREFERRED_USERNAME: 'alice',
    HTTP_OIDC_EMAIL: 'alice@example.org',
    HTTP_OIDC_GROUPS: 'developers;admins',
  };
}

interface Caller {
  call(method: 'POST' | 'PUT', url: string, body: unknown): Promise<{ statusCode: number; body: string; json(): any }>;
}

/** The mapping rules the OIDC tests share: user id, name and email from the claims, groups by name in `domainId`. */
export function oidcMappingRules(domainId: string): unknown[] {
  return [
    {
      local: [{ user: { id: '{0}', name: '{1}', email: '{2}' } }, { groups: '{3}', domain: { id: domainId } }],
      remote: [{ type: 'HTTP_OIDC_SUB' }, { type: 'HTTP_OIDC_PREFERRED_USERNAME' }, { type: 'HTTP_OIDC_EMAIL' }, { type: 'HTTP_OIDC_GROUPS' }],
    },
  ];
}

/**
 * Registers identity provider `oidc-idp` (remote id `issuer`, shadow users in `domainId`), mapping
 * `oidc-mapping` (`rules`, by default oidcMappingRules) and protocol `openid` through the API, as an
 * admin caller; throws unless each answers 201.
 */
export async function registerOidcProvider(app: Caller, options: { issuer: string; domainId: string; rules?: unknown[] | undefined }): Promise<void> {
  const FED = '/v3/OS-FEDERATION';
  const created = async (url: string, body: unknown) => {
    const response = await app.call('PUT', url, body);
    if (response.statusCode !== 201) throw new Error(`PUT ${url}: ${response.statusCode} ${response.body}`);
  };
  await created(`${FED}/identity_providers/oidc-idp`, { identity_provider: { remote_ids: [options.issuer], enabled: true, domain_id: options.domainId } });
  await created(`${FED}/mappings/oidc-mapping`, { mapping: { rules: options.rules ?? oidcMappingRules(options.domainId) } });
  await created(`${FED}/identity_providers/oidc-idp/protocols/openid`, { protocol: { mapping_id: 'oidc-mapping', remote_id_attribute: 'HTTP_OIDC_ISS' } });
}
