import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The AWS signatures Keystone checks for /v3/ec2tokens and /v3/s3tokens, computed as
 * keystoneclient's Ec2Signer (EC2: versions 2 and 4) and Keystone's s3tokens (S3: version 1, and
 * version 4 over the string to sign the client sends) compute them. Pure functions: the caller
 * compares, and every failure is the caller's 401.
 */

/** The signed request as an EC2 API server hands it to Keystone (`credentials` of the body). */
export interface Ec2Request {
  params: Record<string, unknown>;
  verb: string;
  host: string;
  path: string;
  headers: Record<string, unknown>;
  body_hash: string;
}

/** The request cannot be signed as given (Keystone's signer raises here: a 500 there, a 401 here). */
export class UnsignableRequestError extends Error {
  override name = 'UnsignableRequestError';
}

/** Python's str() of a JSON value, as the signer formats a parameter. */
function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  return String(value);
}

/** urllib.parse.quote(value, safe): RFC 3986 unreserved characters and `safe` stay, the rest is %XX of UTF-8. */
function quote(value: string, safe: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const char = String.fromCharCode(byte);
    if (/[A-Za-z0-9_.~-]/.test(char) || (byte < 0x80 && safe.includes(char))) out += char;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Ec2Signer._canonical_qs: keys sorted (code point order), values quoted keeping -_~ only. */
function canonicalQuery(params: Record<string, unknown>): string {
  return Object.keys(params)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((key) => `${quote(key, '')}=${quote(text(params[key]), '-_~')}`)
    .join('&');
}

/** Ec2Signer.generate: the expected signature of an EC2 request. */
export function ec2Signature(secret: string, request: Ec2Request): string {
  const version = request.params.SignatureVersion;
  if (version === '2') return signatureV2(secret, request);
  if (isV4(request)) return signatureV4(secret, request);
  throw new UnsignableRequestError(version !== undefined ? `Unknown signature version: ${text(version)}` : 'Unexpected signature format');
}

function isV4(request: Ec2Request): boolean {
  const authorization = request.headers.Authorization;
  if (authorization !== undefined) return typeof authorization === 'string' && authorization.startsWith('AWS4-HMAC-SHA256');
  return request.params['X-Amz-Algorithm'] === 'AWS4-HMAC-SHA256';
}

/** Version 2: HMAC-SHA256 over verb, host, path and the canonical query (the signer always uses SHA-256). */
function signatureV2(secret: string, request: Ec2Request): string {
  const params = { ...request.params, SignatureMethod: 'HmacSHA256' };
  const stringToSign = `${request.verb}\n${request.host}\n${request.path}\n${canonicalQuery(params)}`;
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(stringToSign, 'utf8').digest('base64');
}

function hmac(key: Buffer | string, message: string): Buffer {
  return createHmac('sha256', key).update(message, 'utf8').digest();
}

/** Version 4 (AWS4-HMAC-SHA256) from the Authorization header or the X-Amz-* parameters. */
function signatureV4(secret: string, request: Ec2Request): string {
  const { params, headers } = request;
  const authorization = headers.Authorization;
  const authParam = (name: string): string => {
    if (authorization !== undefined) return text(authorization).split(`${name}=`).slice(1).join(`${name}=`).split(',')[0] ?? '';
    const value = params[`X-Amz-${name}`];
    if (value === undefined) throw new UnsignableRequestError(`no ${name}`);
    return text(value);
  };
  const lowered = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) lowered.set(name.toLowerCase().trim(), text(value).trim());
  const signedHeaders = authParam('SignedHeaders');
  const userAgent = lowered.get('user-agent') ?? '';
  // Old boto (< 2.9.3) signs the host without its port; the signer strips it for them.
  const stripPort = /^Boto\/2.[0-9].[0-2]/.test(userAgent);
  const headerLines: string[] = [];
  for (const name of signedHeaders.split(';')) {
    const value = lowered.get(name);
    if (value === undefined) continue;
    headerLines.push(`${name}:${name === 'host' && stripPort ? value.split(':')[0] : value}`);
  }
  const canonicalRequest = [request.verb.toUpperCase(), request.path, canonicalQuery(params), headerLines.join('\n') + '\n', signedHeaders, request.body_hash].join('\n');
  const credential = authParam('Credential').split('/');
  if (credential.length < 4) throw new UnsignableRequestError('malformed credential scope');
  const [, date, region, service] = credential as [string, string, string, string];
  const scope = credential.slice(1).join('/');
  const headerDate = headers['X-Amz-Date'];
  const requestDate = headerDate !== undefined ? text(headerDate) : params['X-Amz-Date'] !== undefined ? text(params['X-Amz-Date']) : undefined;
  if (requestDate === undefined || !requestDate.startsWith(date)) throw new UnsignableRequestError('Request date mismatch error');
  const stringToSign = ['AWS4-HMAC-SHA256', requestDate, scope, createHash('sha256').update(canonicalRequest, 'utf8').digest('hex')].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
  return createHmac('sha256', signingKey).update(stringToSign, 'utf8').digest('hex');
}

/**
 * Keystone's s3tokens: `token` is the string to sign (URL-safe base64). Version 4 when it starts with
 * AWS4 (then its scope must be for s3), else version 1 (HMAC-SHA1, base64).
 */
export function s3Signature(secret: string, token: string): string {
  const stringToSign = Buffer.from(token, 'base64url');
  if (stringToSign.subarray(0, 4).toString('latin1') !== 'AWS4') {
    return createHmac('sha1', Buffer.from(secret, 'utf8')).update(stringToSign).digest('base64');
  }
  const parts = stringToSign.toString('latin1').split('\n');
  if (parts.length !== 4 || parts[0] !== 'AWS4-HMAC-SHA256') throw new UnsignableRequestError('Invalid EC2 signature.');
  const scope = parts[2]!.split('/');
  if (scope.length !== 4 || scope[2] !== 's3' || scope[3] !== 'aws4_request') throw new UnsignableRequestError('Invalid EC2 signature.');
  const key = (k: Buffer | string, message: string) => createHmac('sha256', k).update(Buffer.from(message, 'latin1')).digest();
  const signingKey = key(key(key(key(`AWS4${secret}`, scope[0]!), scope[1]!), scope[2]!), 'aws4_request');
  return createHmac('sha256', signingKey).update(stringToSign).digest('hex');
}

/** Keystone's auth_str_equal: constant time for equal lengths. */
export function signaturesEqual(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The request's timestamp (V2 `Timestamp`, V4 `X-Amz-Date` header or parameter) in epoch
 * milliseconds; undefined when the signer left none (Keystone then skips the check); NaN when
 * it is not an ISO 8601 time.
 */
export function requestTimestamp(credentials: { params?: Record<string, unknown> | undefined; headers?: Record<string, unknown> | undefined }): number | undefined {
  const value = credentials.params?.Timestamp || credentials.headers?.['X-Amz-Date'] || credentials.params?.['X-Amz-Date'];
  if (!value) return undefined;
  return parseIsoTime(text(value));
}

// Extended (2026-11-27T02:44:32Z, fractions, offsets) and basic (20261127T024426Z) ISO 8601.
const EXTENDED = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/;
const BASIC = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})?(?:[.,](\d+))?(Z|[+-]\d{2}(?::?\d{2})?)?$/;

function parseIsoTime(value: string): number {
  const match = EXTENDED.exec(value) ?? BASIC.exec(value);
  if (!match) return Number.NaN;
  const [, year, month, day, hour, minute, second = '0', fraction = '', zone = 'Z'] = match;
  let offsetMinutes = 0;
  if (zone !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const time = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), Number(`0.${fraction || '0'}`) * 1000);
  const date = new Date(time);
  if (Number.isNaN(time) || date.getUTCDate() !== Number(day) || date.getUTCMonth() !== Number(month) - 1) return Number.NaN;
  return time - offsetMinutes * 60_000;
}
