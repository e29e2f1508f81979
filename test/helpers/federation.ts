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
