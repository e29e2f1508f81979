import type { Model } from 'casbin';
import { casbin } from './policy-files.ts';

// Recognises the shipped gateway model (policies/model.conf), whose matcher the gateway evaluates
// in plain JavaScript (see evaluateShippedMatcher in gateway-policy.ts) instead of through Casbin's
// interpreted expressions. Any other model keeps going through Casbin.

/**
 * The shipped model's definitions, as Casbin holds them after parsing. Kept here rather than read
 * from policies/model.conf: the JavaScript evaluation implements exactly this text, whatever the
 * deployed file says. A test checks policies/model.conf is still recognised.
 */
const SHIPPED_MODEL = casbin.newModelFromString(`
[request_definition]
r = roles, scope, project, user, obj, act

[policy_definition]
p = sub, scope, obj, act, eft

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = (p.act == r.act || p.act == "*") && (p.scope == r.scope || p.scope == "*") && roleMatch(r.roles, p.sub) && pathMatch(r.obj, p.obj, r.project, r.user)
`);

const SECTIONS = ['r', 'p', 'e', 'm'] as const;

/**
 * An expression's tokens: string literals (kept whole, spaces inside them count), identifiers,
 * two-character operators, then any other single character. Whitespace between tokens is dropped,
 * whitespace inside a would-be token splits it, so equal token lists mean the same expression.
 */
const TOKEN = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_$][\w$]*|&&|\|\||==|!=|<=|>=|\S/g;

function tokensOf(expression: string): string[] {
  return expression.match(TOKEN) ?? [];
}

function definition(model: Model, section: (typeof SECTIONS)[number]): string[] {
  return tokensOf(model.model.get(section)?.get(section)?.value ?? '');
}

/**
 * Whether `model` has the shipped request, policy, effect and matcher definitions, comments,
 * line breaks and spacing aside. Other sections (a role definition, a second matcher) are not read
 * by the enforcer's default matcher, so they do not change what the shipped matcher decides.
 */
export function isShippedModel(model: Model): boolean {
  return SECTIONS.every((section) => JSON.stringify(definition(model, section)) === JSON.stringify(definition(SHIPPED_MODEL, section)));
}
