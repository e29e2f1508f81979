import { createHmac, timingSafeEqual } from 'node:crypto';

// OAuth 1.0a request signing (RFC 5849 §3.4): the signature base string, its percent-encoding, and
// HMAC signatures. Pure functions: nothing here knows HTTP frameworks, storage or the clock.

/** The HMAC methods accepted (oauthlib, which Keystone uses, offers the same three). */
export const SIGNATURE_METHODS = { 'HMAC-SHA1': 'sha1', 'HMAC-SHA256': 'sha256', 'HMAC-SHA512': 'sha512' } as const;
export type SignatureMethod = keyof typeof SIGNATURE_METHODS;

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

/** §3.4.2: the base64 HMAC of the base string, keyed by the encoded client and token secrets. */
export function hmacSignature(method: SignatureMethod, baseString: string, clientSecret: string, tokenSecret = ''): string {
  const key = `${percentEncode(clientSecret)}&${percentEncode(tokenSecret)}`;
  return createHmac(SIGNATURE_METHODS[method], key).update(baseString, 'utf8').digest('base64');
}

/** Whether `signature` is the HMAC of the base string (compared in constant time). */
export function verifyHmacSignature(method: SignatureMethod, baseString: string, signature: string, clientSecret: string, tokenSecret = ''): boolean {
  const expected = Buffer.from(hmacSignature(method, baseString, clientSecret, tokenSecret));
  const actual = Buffer.from(signature);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

export function isSignatureMethod(value: string): value is SignatureMethod {
  return Object.hasOwn(SIGNATURE_METHODS, value);
}

/** The query string of a URL as decoded pairs (§3.4.1.3.1: '+' is a space in form encoding). */
export function queryParameters(url: string): [string, string][] {
  const question = url.indexOf('?');
  if (question < 0) return [];
  return [...new URLSearchParams(url.slice(question + 1))];
}
