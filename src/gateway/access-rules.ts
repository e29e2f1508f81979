import type { AccessRule } from '../identity/application-credential-service.ts';

/**
 * keystonemiddleware's access-rule check for application-credential tokens: some rule must name
 * this service type and method, and its path pattern must match ('*' and '{name}' one segment,
 * '**' any number of segments).
 */
export function accessRulesAllow(rules: readonly AccessRule[], serviceType: string, method: string, path: string): boolean {
  const segments = path.split('/').filter(Boolean);
  return rules.some(
    (rule) => rule.service === serviceType && rule.method.toUpperCase() === method.toUpperCase() && patternMatches(rule.path.split('/').filter(Boolean), segments),
  );
}

function patternMatches(pattern: string[], segments: string[]): boolean {
  if (pattern.length === 0) return segments.length === 0;
  const [head, ...tail] = pattern;
  if (head === '**') {
    for (let skip = 0; skip <= segments.length; skip++) if (patternMatches(tail, segments.slice(skip))) return true;
    return false;
  }
  if (segments.length === 0) return false;
  if (head === '*' || /^\{[^}]+\}$/.test(head!) || head === segments[0]) return patternMatches(tail, segments.slice(1));
  return false;
}
