import { ValidationError } from '../support/errors.ts';
import { splitSegments } from '../support/segments.ts';

/**
 * The request target, canonicalised once. Policy is decided on `segments`, and `encodedPath` (the
 * same segments, re-encoded) is what is forwarded, so the two can never disagree.
 */
export interface CanonicalTarget {
  /** Decoded path segments; a trailing slash is kept as a final empty segment. */
  segments: string[];
  /** '/' + segments joined, decoded (what policy sees). */
  path: string;
  /** The same path, percent-encoded where RFC 3986 requires (what the upstream receives). */
  encodedPath: string;
  /** The query string as received, without '?', forwarded untouched. */
  query: string;
}

// The rule, in order:
//  1. Only origin-form targets ("/…"): absolute-form ("http://host/…") and "*" are refused, so a
//     request line can never name the upstream.
//  2. Refused anywhere in the raw path: backslash, ';' (path parameters), NUL and other control
//     characters, and the encoded forms %2F (slash), %5C (backslash), %00, %3B — they mean different
//     things to different servers.
//  3. Each segment is percent-decoded exactly once; a segment that still contains %XX afterwards
//     (double encoding) is refused, as is malformed %-encoding.
//  4. Empty segments (//) are dropped, "." is dropped, ".." removes the previous segment; ".." above
//     the root is refused. (Decoded %2e%2e counts as "..": the decision is made on the decoded form.)
//  5. A trailing slash is kept. Case is kept.
// Refusals are 400 with a Keystone-shaped body.
const RAW_FORBIDDEN = /[\\;\u0000-\u001f\u007f]|%(?:2f|5c|00|3b)/i;
const DOUBLE_ENCODED = /%[0-9a-f]{2}/i;
const CONTROL = /[\u0000-\u001f\u007f]/;
// pchar from RFC 3986: unreserved / sub-delims / ":" / "@"; everything else is encoded.
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,=:@]$/;

function invalid(reason: string): ValidationError {
  return new ValidationError(`Invalid request path: ${reason}.`);
}

export function canonicalizeTarget(target: string): CanonicalTarget {
  if (!target.startsWith('/')) {
    throw invalid('only origin-form request targets are accepted');
  }
  const questionMark = target.indexOf('?');
  const rawPath = questionMark === -1 ? target : target.slice(0, questionMark);
  const query = questionMark === -1 ? '' : target.slice(questionMark + 1);
  // Nearly every path is already canonical: nothing to decode or encode (so nothing RAW_FORBIDDEN
  // matches), no empty segment and none starting with '.'. It is its own result; any other path
  // takes the walk below, which gives the same result for these.
  const canonical = PLAIN_PATH.test(rawPath) && !rawPath.includes('//') && !rawPath.includes('/.');
  if (!canonical && RAW_FORBIDDEN.test(rawPath)) throw invalid('it contains a character or encoding that is not allowed');
  if (CONTROL.test(query)) throw invalid('the query contains a control character');
  if (canonical) return { segments: rawPath.length === 1 ? [] : splitSegments(rawPath, 1), path: rawPath, encodedPath: rawPath, query };

  const parts = rawPath.split('/');
  const trailingSlash = parts.length > 1 && parts[parts.length - 1] === '';
  const segments: string[] = [];
  for (const raw of parts) {
    if (raw === '') continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      throw invalid('malformed percent-encoding');
    }
    if (DOUBLE_ENCODED.test(decoded)) throw invalid('double percent-encoding');
    if (CONTROL.test(decoded) || decoded.includes('/') || decoded.includes('\\')) throw invalid('a segment decodes to a forbidden character');
    if (decoded === '.') continue;
    if (decoded === '..') {
      if (segments.length === 0) throw invalid("'..' leads above the root");
      segments.pop();
      continue;
    }
    segments.push(decoded);
  }
  if (trailingSlash && segments.length > 0) segments.push('');
  const path = `/${segments.join('/')}`;
  const encodedPath = `/${segments.map(encodeSegment).join('/')}`;
  return { segments, path, encodedPath, query };
}

// pchars and '/': no '%', backslash, ';' or control character, and no character that needs encoding.
const PLAIN_PATH = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]*$/;

const PCHARS_ONLY = /^[A-Za-z0-9\-._~!$&'()*+,=:@]*$/;

function encodeSegment(segment: string): string {
  // Most segments need no encoding: skip the per-character walk for them.
  if (PCHARS_ONLY.test(segment)) return segment;
  let encoded = '';
  for (const character of segment) {
    encoded += PCHAR.test(character) ? character : encodeURIComponent(character);
  }
  return encoded;
}
