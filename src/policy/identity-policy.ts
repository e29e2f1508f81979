import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type * as CasbinModule from 'casbin';
import type { Assertion } from 'casbin';
import {
  casbin,
  isFile,
  messageOf,
  normaliseRule,
  parseModel,
  PolicyLoadError,
  readFixtureFiles,
  readRuleFile,
  readText,
  enforceNarrowed,
  matchingLines,
  roleList,
  roleMatcher,
  rowKey,
  RowsAdapter,
  type PolicyFixtureResult,
} from './policy-files.ts';

/** The token asking, as identity policy sees it (Keystone's policy "credentials"). */
export interface IdentitySubject {
  /** Role names, implied roles expanded. */
  roles: string[];
  scope: 'project' | 'domain' | 'system' | 'unscoped';
  userId: string;
  /** Project-scoped tokens: the project and its domain. */
  projectId?: string;
  projectDomainId?: string;
  /** Domain-scoped tokens: the domain. */
  domainId?: string;
}

/**
 * The thing acted upon, named as Keystone's policy targets are (target.user.domain_id, ...).
 * An attribute is absent when the entity does not exist: every condition reading it is then false.
 */
export interface IdentityTarget {
  /** The id is absent for an entity being created (its domain is what rules can read). */
  user?: { id?: string; domainId?: string };
  group?: { id?: string; domainId?: string };
  project?: { id?: string; domainId?: string };
  domain?: { id: string };
  /** A grant's role; domainId null for a global role. */
  role?: { id: string; domainId?: string | null };
  /** A trust (OS-TRUST): its trustor and trustee (a list names one of them). */
  trust?: { trustorUserId?: string; trusteeUserId?: string };
  /** The token being validated or revoked. */
  token?: { userId: string };
  /** The credential acted upon (or being created: its user_id as the body names it). */
  credential?: { userId?: string };
  /** List calls of a domain-scoped token: the domain the list is limited to (Keystone's target.domain_id). */
  domainId?: string;
}

export interface IdentityDecision {
  allowed: boolean;
  /** The deciding line as written, its file and 1-based line number. */
  rule?: string;
  source?: string;
  line?: number;
  reason: 'allowed' | 'denied by rule' | 'no rule allows';
}

export interface IdentityMatch {
  rule: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
}

export interface IdentityExplanation extends IdentityDecision {
  matches: IdentityMatch[];
}

type Condition = (subject: IdentitySubject, target: IdentityTarget) => boolean;

const sameDomain = (subject: IdentitySubject, domainId: string | undefined) => subject.domainId !== undefined && domainId !== undefined && domainId === subject.domainId;
const actorDomain = (target: IdentityTarget) => target.user?.domainId ?? target.group?.domainId;
const scopeDomain = (target: IdentityTarget) => (target.project ? target.project.domainId : target.domain?.id);

/**
 * The conditions a rule line may name: each is one of Keystone's target checks. Domain conditions
 * need a domain-scoped token (Keystone's `domain_id` credential exists only for those).
 */
export const CONDITIONS: Readonly<Record<string, Condition>> = {
  // always
  '*': () => true,
  // user_id:%(target.user.id)s — the token's user is the user acted upon (owner)
  self: (subject, target) => target.user !== undefined && target.user.id === subject.userId,
  // user_id:%(target.token.user_id)s — the token's user owns the token acted upon
  trustor: (subject, target) => target.trust?.trustorUserId !== undefined && target.trust.trustorUserId === subject.userId,
  trustee: (subject, target) => target.trust?.trusteeUserId !== undefined && target.trust.trusteeUserId === subject.userId,
  token_subject: (subject, target) => target.token !== undefined && target.token.userId === subject.userId,
  // user_id:%(target.credential.user_id)s — the token's user owns the credential acted upon
  credential_owner: (subject, target) => target.credential?.userId !== undefined && target.credential.userId === subject.userId,
  // project_id:%(target.project.id)s — the token is scoped to the project acted upon
  own_project: (subject, target) => target.project !== undefined && subject.projectId !== undefined && target.project.id === subject.projectId,
  // token.domain.id:%(target.domain.id)s — the token is scoped to the domain acted upon
  own_domain: (subject, target) => sameDomain(subject, target.domain?.id),
  // token.project.domain.id:%(target.domain.id)s — the token's project is in the domain acted upon
  own_project_domain: (subject, target) => target.domain !== undefined && subject.projectDomainId !== undefined && target.domain.id === subject.projectDomainId,
  // domain_id:%(target.user.domain_id)s
  user_in_domain: (subject, target) => sameDomain(subject, target.user?.domainId),
  // domain_id:%(target.group.domain_id)s
  group_in_domain: (subject, target) => sameDomain(subject, target.group?.domainId),
  // domain_id:%(target.project.domain_id)s
  project_in_domain: (subject, target) => sameDomain(subject, target.project?.domainId),
  // domain_id:%(target.group.domain_id)s and domain_id:%(target.user.domain_id)s
  group_and_user_in_domain: (subject, target) => sameDomain(subject, target.group?.domainId) && sameDomain(subject, target.user?.domainId),
  // domain_id:%(target.domain_id)s — a list limited to the token's domain
  listing_domain: (subject, target) => sameDomain(subject, target.domainId),
  // a grant whose actor (user or group) and target (project or domain) are in the token's domain,
  // and whose role, if named, is global or of that domain
  grant_in_domain: (subject, target) =>
    sameDomain(subject, actorDomain(target)) &&
    sameDomain(subject, scopeDomain(target)) &&
    (target.role === undefined || target.role.domainId === null || sameDomain(subject, target.role.domainId ?? undefined)),
};

const SCOPES = new Set(['project', 'domain', 'system', 'unscoped', '*']);
const ACTION = /^identity:[a-z0-9_]+$/;
const MODEL_FIELDS = { request: ['roles', 'scope', 'act', 'ctx'], policy: ['sub', 'scope', 'act', 'cond', 'eft'] } as const;
const NO_RULE: IdentityDecision = Object.freeze({ allowed: false, reason: 'no rule allows' });

interface RuleLine {
  /** [sub, scope, act, cond, eft]: the row Casbin holds. */
  fields: string[];
  text: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
}

/** What a request hands Casbin as r.ctx: the subject and target for the condition function. */
interface ConditionContext {
  subject: IdentitySubject;
  target: IdentityTarget;
}

/** Casbin's enforcer without its built-in matcher functions. */
class IdentityEnforcer extends casbin.Enforcer {
  constructor() {
    super();
    this.fm = new casbin.FunctionMap();
  }
}

export interface IdentityFixtureCase {
  label: string;
  name: string;
  action: string;
  subject: IdentitySubject;
  target: IdentityTarget;
  expect: 'allow' | 'deny';
  rule?: string;
}

/**
 * Authorization of the identity API (Keystone's `identity:*` rules) as a Casbin rule set: one
 * directory (`policies/identity/`) with `model.conf`, `*.csv` rule files and `tests/*.yaml`
 * fixtures. Immutable once loaded; a reload builds a new instance.
 */
export class IdentityPolicy {
  private constructor(
    readonly directory: string,
    private readonly enforcer: CasbinModule.Enforcer,
    private readonly rules: Assertion,
    private readonly lines: RuleLine[],
    /** Per action, the positions of its lines (file order). */
    private readonly byAction: Map<string, number[]>,
    private readonly lineByRow: Map<string, RuleLine>,
  ) {}

  static async load(directory: string): Promise<IdentityPolicy> {
    const modelFile = path.join(directory, 'model.conf');
    const model = parseModel(await readText(modelFile), modelFile, MODEL_FIELDS);
    let entries: string[];
    try {
      entries = await readdir(directory);
    } catch (error) {
      throw new PolicyLoadError(`${directory}: cannot read the policy directory: ${messageOf(error)}`, directory);
    }
    const lines: RuleLine[] = [];
    const firstSeen = new Map<string, string>();
    for (const entry of entries.sort()) {
      if (!entry.endsWith('.csv') || entry.startsWith('.')) continue;
      const file = path.join(directory, entry);
      if (!(await isFile(file))) continue;
      lines.push(...parseRuleFile(await readRuleFile(file), file, entry, firstSeen));
    }
    const enforcer = await casbin.newEnforcerWithClass(IdentityEnforcer, model, new RowsAdapter(lines.map((line) => line.fields)));
    await enforcer.addFunction('roleMatch', roleMatcher());
    await enforcer.addFunction('holds', (condition: string, context: ConditionContext) => CONDITIONS[condition]!(context.subject, context.target));
    const rules = enforcer.getModel().model.get('p')?.get('p');
    if (!rules) throw new PolicyLoadError(`${modelFile}: no [policy_definition] p`, modelFile);
    const byAction = new Map<string, number[]>();
    lines.forEach((line, position) => {
      const positions = byAction.get(line.fields[2]!) ?? [];
      positions.push(position);
      byAction.set(line.fields[2]!, positions);
    });
    const policy = new IdentityPolicy(directory, enforcer, rules, lines, byAction, new Map(lines.map((line) => [rowKey(line.fields), line])));
    // A matcher that cannot run (an edited model.conf) must fail the load, not the first request.
    if (lines.length > 0) {
      try {
        policy.evaluate(lines[0]!.fields[2]!, { roles: [], scope: 'project', userId: '' }, {}, false);
      } catch (error) {
        throw new PolicyLoadError(`${modelFile}: the matcher fails to evaluate: ${messageOf(error)}`, modelFile);
      }
    }
    return policy;
  }

  /** The actions some line names. */
  actions(): string[] {
    return [...this.byAction.keys()].sort();
  }

  summary(): Record<string, unknown> {
    return { rules: this.lines.length, actions: this.byAction.size };
  }

  decide(action: string, subject: IdentitySubject, target: IdentityTarget): IdentityDecision {
    return this.evaluate(action, subject, target, false).decision;
  }

  explain(action: string, subject: IdentitySubject, target: IdentityTarget): IdentityExplanation {
    const { decision, matches } = this.evaluate(action, subject, target, true);
    return { ...decision, matches: matches ?? [] };
  }

  async runFixtures(testsDirectory: string = path.join(this.directory, 'tests')): Promise<PolicyFixtureResult> {
    const { fixtures, failures } = await readFixtureFiles(testsDirectory);
    let passed = 0;
    for (const { label, index, value } of fixtures) {
      const fixture = parseFixtureCase(value, label, index);
      if (typeof fixture === 'string') {
        failures.push(fixture);
        continue;
      }
      const where = `${fixture.label}: case ${index + 1} "${fixture.name}"`;
      const got = this.explain(fixture.action, fixture.subject, fixture.target);
      const decidedBy = got.rule ? `"${got.rule}" (${got.source}:${got.line})` : 'no rule';
      const problems: string[] = [];
      if ((got.allowed ? 'allow' : 'deny') !== fixture.expect) problems.push(`expected ${fixture.expect}, got ${got.allowed ? 'allow' : 'deny'} (${got.reason}, decided by ${decidedBy})`);
      if (fixture.rule !== undefined && normaliseRule(fixture.rule) !== (got.rule ? normaliseRule(got.rule) : undefined)) {
        problems.push(`expected rule "${fixture.rule}", got ${decidedBy}`);
      }
      if (problems.length === 0) passed++;
      else failures.push(`${where}: ${problems.join('; ')}`);
    }
    return { passed, failures };
  }

  private evaluate(action: string, subject: IdentitySubject, target: IdentityTarget, explain: boolean): { decision: IdentityDecision; matches?: IdentityMatch[] } {
    const positions = this.byAction.get(action);
    if (!positions) return { decision: NO_RULE, matches: [] };
    const lines = positions.map((position) => this.lines[position]!);
    const context: ConditionContext = { subject, target };
    const { allowed, row, effects } = enforceNarrowed(
      this.enforcer,
      this.rules,
      lines.map((line) => line.fields),
      explain,
      [roleList(subject.roles), subject.scope, action, context],
    );
    const deciding = row.length > 0 ? this.lineByRow.get(rowKey(row)) : undefined;
    let decision: IdentityDecision = NO_RULE;
    if (deciding && (allowed || deciding.effect === 'deny')) {
      decision = Object.freeze({ allowed, reason: allowed ? 'allowed' : 'denied by rule', rule: deciding.text, source: deciding.source, line: deciding.line });
    } else if (allowed) {
      throw new Error(`Casbin allowed ${action} without naming a known rule`);
    }
    const matches = effects ? matchingLines(effects, lines) : undefined;
    return { decision, matches };
  }
}


function parseRuleFile(text: string, file: string, source: string, firstSeen: Map<string, string>): RuleLine[] {
  const lines: RuleLine[] = [];
  text.split('\n').forEach((raw, index) => {
    const lineNumber = index + 1;
    const written = raw.trim();
    if (written === '' || written.startsWith('#')) return;
    const fail = (problem: string): never => {
      throw new PolicyLoadError(`${file}:${lineNumber}: ${problem}: ${written}`, file, lineNumber);
    };
    const fields = written.split(',').map((field) => field.trim());
    if (fields[0] !== 'p') fail(`only 'p' lines are allowed (roles arrive with implied roles expanded)`);
    const values = fields.slice(1);
    if (values.length !== 5) fail(`expected 5 fields after 'p' (role, scope, action, condition, effect), found ${values.length}`);
    const [, scope, action, condition, effect] = values as [string, string, string, string, string];
    if (values.some((value) => value === '')) fail('empty field');
    if (!SCOPES.has(scope)) fail(`unknown scope '${scope}' (expected project, domain, system, unscoped or *)`);
    if (!ACTION.test(action)) fail(`'${action}' is not an identity action (identity:<name>)`);
    if (!Object.hasOwn(CONDITIONS, condition)) fail(`unknown condition '${condition}' (known: ${Object.keys(CONDITIONS).join(', ')})`);
    if (effect !== 'allow' && effect !== 'deny') fail(`effect must be allow or deny, not '${effect}'`);
    const key = rowKey(values);
    const duplicate = firstSeen.get(key);
    if (duplicate !== undefined) fail(`duplicate of ${duplicate}`);
    firstSeen.set(key, `${source}:${lineNumber}`);
    lines.push({ fields: values, text: written, source, line: lineNumber, effect: effect as 'allow' | 'deny' });
  });
  return lines;
}

const FIXTURE_FIELDS = new Set(['name', 'action', 'roles', 'scope', 'user_id', 'project_id', 'project_domain_id', 'domain_id', 'target', 'expect', 'rule']);
const TARGET_KINDS: Record<string, readonly string[]> = {
  user: ['id', 'domain_id'],
  group: ['id', 'domain_id'],
  project: ['id', 'domain_id'],
  domain: ['id'],
  role: ['id', 'domain_id'],
  token: ['user_id'],
  credential: ['user_id'],
  trust: ['trustor_user_id', 'trustee_user_id'],
  domain_id: [],
};

function parseFixtureCase(raw: unknown, label: string, index: number): IdentityFixtureCase | string {
  const where = `${label}: case ${index + 1}`;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `${where}: expected a mapping`;
  const value = raw as Record<string, unknown>;
  const name = typeof value.name === 'string' && value.name !== '' ? value.name : undefined;
  if (!name) return `${where}: 'name' must be a non-empty string`;
  const at = `${where} "${name}"`;
  const unknown = Object.keys(value).filter((key) => !FIXTURE_FIELDS.has(key));
  if (unknown.length > 0) return `${at}: unknown field(s) ${unknown.join(', ')}`;
  const text = (field: string): string | undefined => (typeof value[field] === 'string' && value[field] !== '' ? (value[field] as string) : undefined);
  const action = text('action');
  if (!action || !ACTION.test(action)) return `${at}: 'action' must be identity:<name>`;
  const scope = text('scope');
  if (scope !== 'project' && scope !== 'domain' && scope !== 'system' && scope !== 'unscoped') return `${at}: 'scope' must be project, domain, system or unscoped`;
  const roles = value.roles ?? [];
  if (!Array.isArray(roles) || !roles.every((role) => typeof role === 'string')) return `${at}: 'roles' must be a list of strings`;
  const expect = text('expect');
  if (expect !== 'allow' && expect !== 'deny') return `${at}: 'expect' must be allow or deny`;
  const subject: IdentitySubject = { roles: roles as string[], scope, userId: text('user_id') ?? 'fixture-user' };
  if (text('project_id')) subject.projectId = text('project_id');
  if (text('project_domain_id')) subject.projectDomainId = text('project_domain_id');
  if (text('domain_id')) subject.domainId = text('domain_id');
  const target = parseTarget(value.target ?? {});
  if (typeof target === 'string') return `${at}: ${target}`;
  const fixture: IdentityFixtureCase = { label, name, action, subject, target, expect };
  if (text('rule')) fixture.rule = text('rule');
  return fixture;
}

/** A fixture's target, written with Keystone's attribute names (user: {id, domain_id}, ...). */
function parseTarget(raw: unknown): IdentityTarget | string {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `'target' must be a mapping`;
  const target: IdentityTarget = {};
  for (const [kind, attributes] of Object.entries(raw as Record<string, unknown>)) {
    const allowed = TARGET_KINDS[kind];
    if (!allowed) return `unknown target kind '${kind}' (known: ${Object.keys(TARGET_KINDS).join(', ')})`;
    if (kind === 'domain_id') {
      if (typeof attributes !== 'string') return `'target.domain_id' must be a string`;
      target.domainId = attributes;
      continue;
    }
    if (typeof attributes !== 'object' || attributes === null) return `'target.${kind}' must be a mapping`;
    const values = attributes as Record<string, unknown>;
    const extra = Object.keys(values).filter((key) => !allowed.includes(key));
    if (extra.length > 0) return `unknown attribute(s) of target.${kind}: ${extra.join(', ')}`;
    if (kind === 'trust') {
      const trust: NonNullable<IdentityTarget['trust']> = {};
      for (const [key, field] of [['trustor_user_id', 'trustorUserId'], ['trustee_user_id', 'trusteeUserId']] as const) {
        if (values[key] === undefined) continue;
        if (typeof values[key] !== 'string') return `'target.trust.${key}' must be a string`;
        trust[field] = values[key];
      }
      target.trust = trust;
      continue;
    }
    const id = values.id ?? values.user_id;
    // An entity being created has no id yet: only users, groups and projects are created.
    const idOptional = kind === 'user' || kind === 'group' || kind === 'project';
    if (typeof id !== 'string' && !(idOptional && id === undefined)) return `'target.${kind}' needs ${kind === 'token' || kind === 'credential' ? 'user_id' : 'id'}`;
    const domainId = values.domain_id;
    if (domainId !== undefined && domainId !== null && typeof domainId !== 'string') return `'target.${kind}.domain_id' must be a string or null`;
    switch (kind) {
      case 'token':
        target.token = { userId: id as string };
        break;
      case 'credential':
        target.credential = { userId: id as string };
        break;
      case 'domain':
        target.domain = { id: id as string };
        break;
      case 'role':
        target.role = { id: id as string, domainId: (domainId as string | null | undefined) ?? null };
        break;
      default: {
        const entity: { id?: string; domainId?: string } = {};
        if (typeof id === 'string') entity.id = id;
        if (typeof domainId === 'string') entity.domainId = domainId;
        target[kind as 'user' | 'group' | 'project'] = entity;
      }
    }
  }
  return target;
}
