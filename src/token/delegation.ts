import type { TokenContext } from './token-service.ts';

/**
 * Keystone's primary authentication methods: a person authenticated directly. Deny by default:
 * every other method (application_credential, oauth1, ec2credential, one added later) is a
 * delegated credential, narrower by design, and is kept away from the actions that would widen it.
 */
export const PRIMARY_AUTH_METHODS: ReadonlySet<string> = new Set(['external', 'kerberos', 'mapped', 'openid', 'password', 'saml2', 'token', 'totp', 'x509']);

/** Keystone's delegation.is_delegated_method: a token with no methods counts as delegated. */
export function isDelegatedMethod(token: Pick<TokenContext, 'methods'>): boolean {
  return token.methods.length === 0 || token.methods.some((method) => !PRIMARY_AUTH_METHODS.has(method));
}

/** Delegated by its method or by a trust (Keystone: `trust_id or is_delegated_method(token)`). */
export function isDelegated(token: Pick<TokenContext, 'methods' | 'trust'>): boolean {
  return token.trust !== undefined || isDelegatedMethod(token);
}

/** An EC2/S3 signature's token: good for the services it was made for, never for the identity API. */
export function isEc2CredentialToken(token: Pick<TokenContext, 'methods'>): boolean {
  return token.methods.includes('ec2credential');
}
