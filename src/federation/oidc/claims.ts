import type { Assertion } from '../assertion.ts';

/**
 * A verified token's claims as the assertion Keystone's mapped plugin would get from Apache with
 * mod_auth_openidc (`OIDCClaimPrefix OIDC-`, `OIDCClaimDelimiter ;`): each claim twice, as the WSGI
 * environ key of its header (`HTTP_OIDC_<CLAIM>`, upper-cased, every character but A-Z and 0-9 as
 * `_`) and as its environment variable (`OIDC-<claim>`, the claim's own name), plus `REMOTE_USER`
 * (the `sub` claim, mod_auth_openidc's default remote-user claim). Values are rendered as
 * mod_auth_openidc renders them: strings as they are, booleans `1`/`0`, integers in decimal, other
 * numbers with 8 significant digits, objects as compact JSON, arrays as their string and boolean
 * elements joined with `;` (other elements and leading empty ones dropped); null is left out.
 */
export function assertionOfClaims(claims: Readonly<Record<string, unknown>>): Assertion {
  const assertion: Assertion = {};
  for (const [name, value] of Object.entries(claims)) {
    const text = claimText(value);
    if (text === undefined) continue;
    assertion[`HTTP_OIDC_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`] = text;
    assertion[`OIDC-${name}`] = text;
  }
  if (typeof claims.sub === 'string') assertion.REMOTE_USER = claims.sub;
  return assertion;
}

function claimText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(8)));
  if (Array.isArray(value)) {
    const elements: string[] = [];
    for (const element of value) {
      const text = typeof element === 'string' ? element : typeof element === 'boolean' ? (element ? '1' : '0') : undefined;
      if (text === undefined || (elements.length === 0 && text === '')) continue;
      elements.push(text);
    }
    return elements.join(';');
  }
  if (typeof value === 'object' && value !== null) return JSON.stringify(value);
  return undefined;
}
