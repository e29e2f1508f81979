import type { PolicyExplanation, PolicyFixtureCase, PolicyLine, PolicyRequest } from './gateway-policy-types.ts';
import { compileTemplate, type PathTemplate } from './path-template.ts';
import { normaliseRule, PolicyLoadError, readFixtureFiles, rowKey, type PolicyFixtureResult } from './policy-files.ts';

// The gateway policy's files: rule files (<service_type>.csv) parsed into lines, and the fixture
// cases of tests/ parsed and run against a loaded policy.

const SCOPES = new Set(['project', 'domain', 'system', '*']);
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

// ---- rule files -------------------------------------------------------------------------------

/** The lines of one rule file; throws PolicyLoadError naming the file and line of the first problem. */
export function parseRuleFile(text: string, file: string, source: string): PolicyLine[] {
  const lines: PolicyLine[] = [];
  const firstSeen = new Map<string, number>();
  text.split('\n').forEach((raw, index) => {
    const lineNumber = index + 1;
    const text = raw.trim();
    if (text === '' || text.startsWith('#')) return;
    const fail = (problem: string): never => {
      throw new PolicyLoadError(`${file}:${lineNumber}: ${problem}: ${text}`, file, lineNumber);
    };
    const fields = text.split(',').map((field) => field.trim());
    if (fields[0] !== 'p') fail(`only 'p' lines are allowed (roles arrive with implied roles expanded)`);
    const values = fields.slice(1);
    if (values.length !== 5) fail(`expected 5 fields after 'p' (sub, scope, path, method, effect), found ${values.length}`);
    const [, scope, template, method, effect] = values as [string, string, string, string, string];
    if (values.some((value) => value === '')) fail('empty field');
    if (values.some((value) => value.includes('"'))) fail('quotes are not supported');
    if (!SCOPES.has(scope)) fail(`unknown scope '${scope}' (expected project, domain, system or *)`);
    if (method !== '*' && !METHODS.has(method)) fail(`unknown method '${method}' (expected an upper-case HTTP method or *)`);
    if (effect !== 'allow' && effect !== 'deny') fail(`effect must be allow or deny, not '${effect}'`);
    const compiled = compileTemplate(template);
    if (typeof compiled === 'string') fail(compiled);
    const key = rowKey(values);
    const duplicate = firstSeen.get(key);
    if (duplicate !== undefined) fail(`duplicate of line ${duplicate}`);
    firstSeen.set(key, lineNumber);
    lines.push({ fields: values, text, source, line: lineNumber, effect: effect as 'allow' | 'deny', template: compiled as PathTemplate });
  });
  return lines;
}

// ---- fixtures ---------------------------------------------------------------------------------

/** Reads every `*.yaml`/`*.yml` fixture file of `testsDirectory`; a missing directory holds none. */
export async function loadPolicyFixtures(testsDirectory: string): Promise<{ cases: PolicyFixtureCase[]; failures: string[] }> {
  const { fixtures, failures } = await readFixtureFiles(testsDirectory);
  const cases: PolicyFixtureCase[] = [];
  for (const { label, index, value } of fixtures) {
    const parsed = parseFixtureCase(value, label, index);
    if (typeof parsed === 'string') failures.push(parsed);
    else cases.push(parsed);
  }
  return { cases, failures };
}

/** Runs every fixture of `testsDirectory` against `policy` (uncached); each failure names file, case, expected and got. */
export async function runPolicyFixtures(policy: FixturePolicy, testsDirectory: string): Promise<PolicyFixtureResult> {
  const { cases, failures } = await loadPolicyFixtures(testsDirectory);
  const known = new Set(policy.services());
  let passed = 0;
  for (const fixture of cases) {
    const where = `${fixture.file}: case ${fixture.index + 1} "${fixture.name}"`;
    if (!known.has(fixture.request.service)) {
      failures.push(`${where}: unknown service '${fixture.request.service}' (no ${fixture.request.service}.csv)`);
      continue;
    }
    const got = policy.explain(fixture.request);
    const gotEffect = got.allowed ? 'allow' : 'deny';
    const decidedBy = got.rule ? `"${got.rule}" (${got.source}:${got.line})` : 'no rule';
    const problems: string[] = [];
    if (gotEffect !== fixture.expect) problems.push(`expected ${fixture.expect}, got ${gotEffect} (${got.reason}, decided by ${decidedBy})`);
    if (fixture.rule !== undefined && normaliseRule(fixture.rule) !== (got.rule ? normaliseRule(got.rule) : undefined)) {
      problems.push(`expected rule "${fixture.rule}", got ${decidedBy}`);
    }
    if (problems.length === 0) passed++;
    else failures.push(`${where}: ${problems.join('; ')}`);
  }
  return { passed, failures };
}

/** What the fixture runner needs of a policy (a GatewayPolicy). */
interface FixturePolicy {
  services(): string[];
  explain(request: PolicyRequest): PolicyExplanation;
}

function parseFixtureCase(raw: unknown, file: string, index: number): PolicyFixtureCase | string {
  const where = `${file}: case ${index + 1}`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `${where}: expected a mapping`;
  const value = raw as Record<string, unknown>;
  const name = typeof value.name === 'string' && value.name !== '' ? value.name : undefined;
  const label = name ? `${where} "${name}"` : where;
  const text = (field: string, optional = false): string | undefined | Error => {
    const found = value[field];
    if (found === undefined && optional) return undefined;
    if (typeof found === 'number') return String(found);
    if (typeof found !== 'string' || found === '') return new Error(`'${field}' must be a non-empty string`);
    return found;
  };
  const fields = {
    service: text('service'),
    scope: text('scope'),
    method: text('method'),
    path: text('path'),
    expect: text('expect'),
    projectId: text('project_id', true),
    userId: text('user_id', true),
    rule: text('rule', true),
  };
  if (!name) return `${label}: 'name' must be a non-empty string`;
  for (const [field, found] of Object.entries(fields)) if (found instanceof Error) return `${label}: ${found.message} (${field})`;
  const roles = value.roles;
  if (!Array.isArray(roles) || !roles.every((role) => typeof role === 'string')) return `${label}: 'roles' must be a list of strings`;
  const scope = fields.scope as string;
  if (scope !== 'project' && scope !== 'domain' && scope !== 'system') return `${label}: 'scope' must be project, domain or system`;
  const method = fields.method as string;
  if (!METHODS.has(method)) return `${label}: 'method' must be an upper-case HTTP method`;
  const expect = fields.expect as string;
  if (expect !== 'allow' && expect !== 'deny') return `${label}: 'expect' must be allow or deny`;
  const known = new Set(['name', 'service', 'roles', 'scope', 'project_id', 'user_id', 'method', 'path', 'expect', 'rule']);
  const unknown = Object.keys(value).filter((key) => !known.has(key));
  if (unknown.length > 0) return `${label}: unknown field(s) ${unknown.join(', ')}`;
  const request: PolicyRequest = {
    service: fields.service as string,
    roles: roles as string[],
    scope,
    userId: (fields.userId as string | undefined) ?? '',
    method,
    path: fields.path as string,
  };
  if (fields.projectId !== undefined) request.projectId = fields.projectId as string;
  const fixture: PolicyFixtureCase = { file, index, name, request, expect };
  if (fields.rule !== undefined) fixture.rule = fields.rule as string;
  return fixture;
}
