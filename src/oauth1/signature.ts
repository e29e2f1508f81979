import { createHmac, timingSafeEqual } from 'node:crypto';

// OAuth 1.0a request signing (RFC 5849 §3.4): the signature base string, its percent-encoding, and
// HMAC signatures. Pure functions: nothing here knows HTTP frameworks, storage or the clock.

/** The HMAC methods, by the digest each uses. */
export const HMAC_METHODS = { 'HMAC-SHA1': 'sha1', 'HMAC-SHA256': 'sha256', 'HMAC-SHA512': 'sha512' } as const;
export type HmacMethod = keyof typeof HMAC_METHODS;

/**
 * The methods a request may name: oauthlib's (which Keystone uses), in its order. No consumer has an
 * RSA key here (nor in Keystone, whose validator answers '' for it: a 500 there), so an RSA
 * signature never verifies: a 401.
 */
export const SIGNATURE_METHODS = ['HMAC-SHA1', 'HMAC-SHA256', 'HMAC-SHA512', 'RSA-SHA1', 'RSA-SHA256', 'RSA-SHA512', 'PLAINTEXT'] as const;
export type SignatureMethod = (typeof SIGNATURE_METHODS)[number];

/** RFC 5849 §3.6: unreserved characters (ALPHA, DIGIT, '-', '.', '_', '~') stay, all else is %XX of UTF-8. */
export function percentEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function percentDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * The parameters of an `Authorization: OAuth ...` header (RFC 5849 §3.5.1), values decoded; undefined
 * when the header is not an OAuth one or is malformed.
 */
export function parseAuthorizationHeader(header: string | undefined): Map<string, string> | undefined {
  if (!header) return undefined;
  const match = /^\s*OAuth\s+(.*)$/is.exec(header);
  if (!match) return undefined;
  const parameters = new Map<string, string>();
  const pattern = /\s*([^=,\s]+)\s*=\s*(?:"([^"]*)"|([^,]*))\s*(?:,|$)/gy;
  const text = match[1]!;
  let index = 0;
  while (index < text.length) {
    pattern.lastIndex = index;
    const pair = pattern.exec(text);
    if (!pair) return undefined;
    const name = percentDecode(pair[1]!);
    // A parameter named twice is a malformed request (§3.5.1 allows each once).
    if (parameters.has(name)) return undefined;
    parameters.set(name, percentDecode(pair[2] ?? pair[3]!.trim()));
    index = pattern.lastIndex;
    if (index === 0) break;
  }
  return parameters;
}

/** §3.4.1.2: scheme and host lower case, the default port dropped, no query or fragment. */
export function baseStringUri(url: string): string {
  const parsed = new URL(url);
  const scheme = parsed.protocol.toLowerCase();
  const host = parsed.hostname.toLowerCase();
  const port = parsed.port && !((scheme === 'http:' && parsed.port === '80') || (scheme === 'https:' && parsed.port === '443')) ? `:${parsed.port}` : '';
  return `${scheme}//${host}${port}${parsed.pathname || '/'}`;
}

/** §3.4.1.3.2: each name and value encoded, sorted by name then value, joined with '=' and '&'. */
export function normalizeParameters(parameters: ReadonlyArray<readonly [string, string]>): string {
  return parameters
    .filter(([name]) => name !== 'oauth_signature' && name !== 'realm')
    .map(([name, value]) => [percentEncode(name), percentEncode(value)] as const)
    .sort(([an, av], [bn, bv]) => (an < bn ? -1 : an > bn ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

/**
 * §3.4.1: METHOD & encoded base URI & encoded normalized parameters. `parameters` are the query's,
 * the Authorization header's (its realm and signature are left out) and a form body's.
 */
export function signatureBaseString(method: string, url: string, parameters: ReadonlyArray<readonly [string, string]>): string {
  return [method.toUpperCase(), percentEncode(baseStringUri(url)), percentEncode(normalizeParameters(parameters))].join('&');
}

/** §3.4.4: the PLAINTEXT signature, and the key of the HMAC ones (§3.4.2): both secrets, encoded. */
export function plaintextSignature(clientSecret: string, tokenSecret = ''): string {
  return `${percentEncode(clientSecret)}&${percentEncode(tokenSecret)}`;
}

/** §3.4.2: the base64 HMAC of the base string, keyed by the encoded client and token secrets. */
export function hmacSignature(method: HmacMethod, baseString: string, clientSecret: string, tokenSecret = ''): string {
  return createHmac(HMAC_METHODS[method], plaintextSignature(clientSecret, tokenSecret)).update(baseString, 'utf8').digest('base64');
}

/** Whether `signature` is the HMAC of the base string (compared in constant time). */
export function verifyHmacSignature(method: HmacMethod, baseString: string, signature: string, clientSecret: string, tokenSecret = ''): boolean {
  return sameText(hmacSignature(method, baseString, clientSecret, tokenSecret), signature);
}

/**
 * Whether `signature` signs the request by `method`. `baseString` is only built for an HMAC method:
 * PLAINTEXT signs the secrets alone (RFC 5849 §3.4.4: meant for TLS, as any password is), and no RSA
 * key is known.
 */
export function verifyOAuthSignature(method: SignatureMethod, baseString: () => string, signature: string, clientSecret: string, tokenSecret = ''): boolean {
  if (method === 'PLAINTEXT') return sameText(plaintextSignature(clientSecret, tokenSecret), signature);
  if (isHmacMethod(method)) return verifyHmacSignature(method, baseString(), signature, clientSecret, tokenSecret);
  return false;
}

function isHmacMethod(value: string): value is HmacMethod {
  return Object.hasOwn(HMAC_METHODS, value);
}

export function isSignatureMethod(value: string): value is SignatureMethod {
  return (SIGNATURE_METHODS as readonly string[]).includes(value);
}

/** Compared in constant time for a given length. */
function sameText(expected: string, actual: string): boolean {
  const expectedBytes = Buffer.from(expected);
  const actualBytes = Buffer.from(actual);
  return expectedBytes.length === actualBytes.length && timingSafeEqual(expectedBytes, actualBytes);
}

/** The query string of a URL as decoded pairs (§3.4.1.3.1: '+' is a space in form encoding). */
export function queryParameters(url: string): [string, string][] {
  const question = url.indexOf('?');
  if (question < 0) return [];
  return [...new URLSearchParams(url.slice(question + 1))];
}
