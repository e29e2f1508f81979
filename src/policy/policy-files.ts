import { readdir, readFile, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type * as CasbinModule from 'casbin';
import type { Adapter, Assertion, Effect, Effector, EffectorStream, Model } from 'casbin';
import { parseDocument } from 'yaml';

// What the gateway policy and the identity policy share: reading their files, fixtures, and the
// Casbin plumbing around a read-only rule set.

// The CommonJS build of Casbin, on purpose: its ESM build down-levels object spread into a
// defineProperty loop that roughly doubles the cost of every policy line evaluated.
export const casbin = createRequire(import.meta.url)('casbin') as typeof CasbinModule;

/** A policy directory (model, a rule file or a fixture set) is unusable; names the file and line. */
export class PolicyLoadError extends Error {
  constructor(
    message: string,
    readonly file?: string,
    readonly line?: number,
    /** Fixture failures, when fixtures are what failed. */
    readonly failures: readonly string[] = [],
  ) {
    super(message);
    this.name = 'PolicyLoadError';
  }
}

export interface PolicyFixtureResult {
  passed: number;
  failures: string[];
}

/** One entry of a fixture file, not yet checked: `label` is tests/<file>, `index` 0-based. */
export interface RawFixture {
  label: string;
  index: number;
  value: unknown;
}

/** Reads every `*.yaml`/`*.yml` file of `testsDirectory` as a list of cases; a missing directory holds none. */
export async function readFixtureFiles(testsDirectory: string): Promise<{ fixtures: RawFixture[]; failures: string[] }> {
  let entries: string[];
  try {
    entries = await readdir(testsDirectory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { fixtures: [], failures: [] };
    return { fixtures: [], failures: [`${testsDirectory}: ${messageOf(error)}`] };
  }
  const fixtures: RawFixture[] = [];
  const failures: string[] = [];
  for (const entry of entries.sort()) {
    if (!/\.ya?ml$/.test(entry) || entry.startsWith('.')) continue;
    const file = path.join(testsDirectory, entry);
    const label = path.join(path.basename(testsDirectory), entry);
    let document: ReturnType<typeof parseDocument>;
    try {
      if (!(await isFile(file))) continue;
      document = parseDocument(await readFile(file, 'utf8'));
    } catch (error) {
      failures.push(`${label}: ${messageOf(error)}`);
      continue;
    }
    const syntaxError = document.errors[0];
    if (syntaxError) {
      failures.push(`${label}: YAML error: ${syntaxError.message.split('\n')[0]}`);
      continue;
    }
    const content: unknown = document.toJS();
    if (content === null || content === undefined) continue;
    if (!Array.isArray(content)) {
      failures.push(`${label}: expected a list of cases`);
      continue;
    }
    content.forEach((value: unknown, index) => fixtures.push({ label, index, value }));
  }
  return { fixtures, failures };
}

/** Hands Casbin rows that were read and checked elsewhere; the rule set never changes in place. */
export class RowsAdapter implements Adapter {
  constructor(private readonly rows: string[][]) {}
  async loadPolicy(model: Model): Promise<void> {
    model.addPolicies('p', 'p', this.rows);
  }
  async savePolicy(): Promise<boolean> {
    throw new Error('policies are read-only');
  }
  async addPolicy(): Promise<void> {
    throw new Error('policies are read-only');
  }
  async removePolicy(): Promise<void> {
    throw new Error('policies are read-only');
  }
  async removeFilteredPolicy(): Promise<void> {
    throw new Error('policies are read-only');
  }
}

/** Records every line's effect (Casbin pushes one per evaluated line, in order) and never stops early. */
export class RecordingEffector implements Effector {
  last: RecordingStream | undefined;
  newStream(expr: string): EffectorStream {
    this.last = new RecordingStream(new casbin.DefaultEffector().newStream(expr));
    return this.last;
  }
}

class RecordingStream implements EffectorStream {
  readonly effects: Effect[] = [];
  private done = false;
  constructor(private readonly inner: EffectorStream) {}
  current(): boolean {
    return this.inner.current();
  }
  pushEffect(effect: Effect): [boolean, boolean, boolean] {
    this.effects.push(effect);
    if (this.done) return [this.inner.current(), false, false];
    const [result, record, done] = this.inner.pushEffect(effect);
    this.done = done;
    return [result, record, false];
  }
}

/** roleMatch(roles, sub): the role list is parsed once per request, not once per line. */
export function roleMatcher(): (roles: string, sub: string) => boolean {
  let lastRoles: string | undefined;
  let lastSet = new Set<string>();
  return (roles, sub) => {
    if (sub === '*') return true;
    if (roles !== lastRoles) {
      lastRoles = roles;
      lastSet = new Set(roles === '' ? [] : roles.split(','));
    }
    return lastSet.has(sub);
  };
}

/** Sorted, de-duplicated roles as one string; a name with a comma could never match a line, so it is dropped. */
export function roleList(roles: readonly string[]): string {
  const usable = roles.filter((role) => role !== '' && !role.includes(','));
  return [...new Set(usable)].sort().join(',');
}

/** A rule line with single spaces after its commas, for comparing lines as written. */
export function normaliseRule(rule: string): string {
  return rule
    .split(',')
    .map((field) => field.trim())
    .join(', ');
}

export function rowKey(fields: readonly string[]): string {
  return fields.join('\0');
}

export async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch (error) {
    throw new PolicyLoadError(`${file}: ${messageOf(error)}`, file);
  }
}

/**
 * A `.csv` rule file's text. One with nothing in it (not even a comment) is refused like one that
 * does not parse: an editor that truncates before writing would otherwise load as deny-all for that
 * service until the write lands. A service meant to allow nothing says so in a comment line.
 */
export async function readRuleFile(file: string): Promise<string> {
  const text = await readText(file);
  if (text.trim() === '') throw new PolicyLoadError(`${file}: the rule file is empty (being rewritten?); a deny-all file needs a comment line`, file);
  return text;
}

export async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw new PolicyLoadError(`${file}: cannot read: ${messageOf(error)}`, file);
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** One enforce over some of a rule set's lines, and what each line's effect was when `record` is set. */
export interface NarrowedResult {
  allowed: boolean;
  /** The deciding row, [] when none. */
  row: string[];
  /** Per given row, in order: the effect Casbin pushed (explain only). */
  effects?: readonly Effect[];
}

/**
 * Runs Casbin's matcher over `rows` only (lines a pre-filter picked out of the whole set), not
 * over every line it holds. Safe because enforceExSync runs to completion synchronously: nothing
 * else sees the narrowed set.
 */
export function enforceNarrowed(
  enforcer: CasbinModule.Enforcer,
  rules: Assertion,
  rows: string[][],
  record: boolean,
  request: unknown[],
): NarrowedResult {
  const recorder = record ? new RecordingEffector() : undefined;
  const allRows = rules.policy;
  rules.policy = rows;
  if (recorder) enforcer.setEffector(recorder);
  try {
    const [allowed, row] = enforcer.enforceExSync(...request);
    return recorder ? { allowed, row, effects: recorder.last?.effects ?? [] } : { allowed, row };
  } finally {
    rules.policy = allRows;
    if (recorder) enforcer.setEffector(DEFAULT_EFFECTOR);
  }
}

const DEFAULT_EFFECTOR: Effector = new casbin.DefaultEffector();

/** A rule line as written in its file. */
export interface WrittenLine {
  text: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
}

/** The lines Casbin found matching (effect allow or deny), in the order they were given. */
export function matchingLines(effects: readonly Effect[], lines: readonly WrittenLine[]): { rule: string; source: string; line: number; effect: 'allow' | 'deny' }[] {
  const matches: { rule: string; source: string; line: number; effect: 'allow' | 'deny' }[] = [];
  effects.forEach((effect, position) => {
    if (effect !== casbin.Effect.Allow && effect !== casbin.Effect.Deny) return;
    const line = lines[position]!;
    matches.push({ rule: line.text, source: line.source, line: line.line, effect: line.effect });
  });
  return matches;
}

const DENY_OVERRIDES = 'some(where (p_eft == allow)) && !some(where (p_eft == deny))';

/**
 * Parses a model.conf and checks it has the request and policy fields the loader passes, in that
 * order, and the deny-overrides effect (decision reasons such as 'denied by rule' rely on it).
 */
export function parseModel(text: string, file: string, fields: { request: readonly string[]; policy: readonly string[] }): Model {
  let model: Model;
  try {
    model = casbin.newModelFromString(text);
  } catch (error) {
    throw new PolicyLoadError(`${file}: ${messageOf(error)}`, file);
  }
  const tokens = (section: string) => (model.model.get(section)?.get(section)?.tokens ?? []).join();
  if (tokens('r') !== fields.request.map((field) => `r_${field}`).join()) {
    throw new PolicyLoadError(`${file}: request_definition must be r = ${fields.request.join(', ')}`, file);
  }
  if (tokens('p') !== fields.policy.map((field) => `p_${field}`).join()) {
    throw new PolicyLoadError(`${file}: policy_definition must be p = ${fields.policy.join(', ')}`, file);
  }
  if (model.model.get('e')?.get('e')?.value !== DENY_OVERRIDES) {
    throw new PolicyLoadError(`${file}: policy_effect must be some(where (p.eft == allow)) && !some(where (p.eft == deny))`, file);
  }
  return model;
}
