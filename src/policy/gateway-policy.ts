import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type * as CasbinModule from 'casbin';
import type { Assertion, Model } from 'casbin';
import { GenerationCache, type CacheStats } from '../support/cache.ts';
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
import { isShippedModel } from './shipped-matcher.ts';

export type PolicyScope = 'project' | 'domain' | 'system';

export interface PolicyRequest {
  /** The service type, i.e. the first path segment at the gateway (compute, placement, ...). */
  service: string;
  /** Role names of the token, implied roles already expanded; never changed once passed (it is memoised). */
  roles: string[];
  scope: PolicyScope;
  projectId?: string;
  userId: string;
  method: string;
  /** The canonical path after the service prefix, e.g. /v2.1/abc/servers. */
  path: string;
}

export interface PolicyDecision {
  allowed: boolean;
  /** the policy line that decided, as written in the file, e.g. "p, member, project, /v2.1/{project_id}/servers, GET, allow" */
  rule?: string;
  /** file it came from */
  source?: string;
  /** 1-based line number of `rule` in `source` */
  line?: number;
  reason: 'allowed' | 'denied by rule' | 'no rule allows' | 'unknown service';
}

export interface PolicyMatch {
  rule: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
}

export interface PolicyExplanation extends PolicyDecision {
  /** Every line that matched the request, allow and deny, in file order. */
  matches: PolicyMatch[];
}

export interface PolicyFixtureCase {
  /** The fixture file, relative to the policy directory, and the case's position in it. */
  file: string;
  index: number;
  name: string;
  request: PolicyRequest;
  expect: 'allow' | 'deny';
  rule?: string;
}

export interface GatewayPolicyOptions {
  /** Bound of the decision cache (entries); 0 disables it. */
  decisionCacheSize?: number;
  /** Where the decision cache counts hits and misses; pass the same object to every reload so counts carry over. */
  decisionCacheStats?: CacheStats;
}

const SCOPES = new Set(['project', 'domain', 'system', '*']);
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);
const MODEL_FIELDS = { request: ['roles', 'scope', 'project', 'user', 'obj', 'act'], policy: ['sub', 'scope', 'obj', 'act', 'eft'] } as const;
const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const PLACEHOLDER = /^\{[A-Za-z_][A-Za-z0-9_]*\}$/;
const DEFAULT_CACHE_SIZE = 10_000;

type TemplateSegment =
  | { kind: 'literal'; value: string }
  | { kind: 'one' }
  | { kind: 'project' }
  | { kind: 'user' }
  | { kind: 'rest' };

interface PathTemplate {
  segments: TemplateSegment[];
  /** Position of the single '**' segment, or -1. */
  rest: number;
  /** The owner placeholders, located in the request path (fixed even with a '**'). */
  owners: OwnerSegment[];
}

interface OwnerSegment {
  kind: 'project' | 'user';
  /** Index into the request's segments: from the start if >= 0, from the end if negative. */
  offset: number;
}

interface PolicyLine {
  /** [sub, scope, obj, act, eft]: the row Casbin holds. */
  fields: string[];
  /** The line as written (trimmed). */
  text: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
  template: PathTemplate;
}

interface ServicePolicy {
  name: string;
  enforcer: CasbinModule.Enforcer;
  /** Casbin's `p` assertion; its policy array is narrowed to the candidates for one synchronous enforce. */
  rules: Assertion;
  lines: PolicyLine[];
  lineByRow: Map<string, PolicyLine>;
  /** Per method, the lines naming that method or '*'; `otherMethods` holds only the '*' lines. */
  byMethod: Map<string, PathIndex>;
  otherMethods: PathIndex;
}

/** A request's path segments and the index nodes holding the lines whose template has its shape. */
interface Candidates {
  segments: string[];
  /** Each reached once at most (a template holds one '**' at most, so a node below it sits at a fixed depth): no line repeats. */
  nodes: PathNode[];
  /** The lines' positions in file order; computed on first use (a cache hit never needs them). */
  positions: readonly number[] | undefined;
}

interface Evaluation {
  decision: PolicyDecision;
  matches?: PolicyMatch[];
}

const UNKNOWN_SERVICE: PolicyDecision = Object.freeze({ allowed: false, reason: 'unknown service' });
const NO_RULE: PolicyDecision = Object.freeze({ allowed: false, reason: 'no rule allows' });

/** Casbin's enforcer without its built-in matcher functions: fewer keys copied per evaluated line. */
class GatewayEnforcer extends casbin.Enforcer {
  constructor() {
    super();
    this.fm = new casbin.FunctionMap();
  }
}

/**
 * The gateway's authorization policy: one Casbin enforcer per service type, loaded from one
 * directory and immutable afterwards. A reload builds a new instance (with an empty decision cache)
 * and the caller swaps the reference. With the shipped model.conf the candidate lines are decided
 * in plain JavaScript instead of by the enforcer (same decisions; see evaluateShippedMatcher).
 */
export class GatewayPolicy {
  private readonly decisions: GenerationCache<string, PolicyDecision>;
  private readonly roleLists = new WeakMap<string[], string>();
  private readonly cacheEnabled: boolean;

  private constructor(
    readonly directory: string,
    private readonly byService: Map<string, ServicePolicy>,
    /** True when the matcher sees path, project and user only through pathMatch: see decisionKey. */
    private readonly keyedByTemplate: boolean,
    /**
     * True when model.conf is the shipped model: its matcher is then evaluated in plain JavaScript
     * (evaluateShippedMatcher), an order of magnitude faster than Casbin's interpreter per line.
     */
    readonly usesShippedMatcher: boolean,
    options: GatewayPolicyOptions,
  ) {
    const size = options.decisionCacheSize ?? DEFAULT_CACHE_SIZE;
    this.cacheEnabled = size > 0;
    // One generation for the instance's lifetime: a reload is a new instance.
    this.decisions = new GenerationCache(Math.max(size, 1), () => 0, options.decisionCacheStats);
  }

  /** Reads `model.conf` and every `<service_type>.csv` in `directory`; throws PolicyLoadError on any problem. */
  static async load(directory: string, options: GatewayPolicyOptions = {}): Promise<GatewayPolicy> {
    const modelFile = path.join(directory, 'model.conf');
    const modelText = await readText(modelFile);
    const model = parseModel(modelText, modelFile, MODEL_FIELDS);
    const keyedByTemplate = readsPathOnlyThroughPathMatch(model);

    const ruleFiles: string[] = [];
    let entries: string[];
    try {
      entries = await readdir(directory);
    } catch (error) {
      throw new PolicyLoadError(`${directory}: cannot read the policy directory: ${messageOf(error)}`, directory);
    }
    for (const entry of entries.sort()) {
      if (!entry.endsWith('.csv') || entry.startsWith('.')) continue;
      const file = path.join(directory, entry);
      // stat follows symlinks (a Kubernetes ConfigMap mounts every file as one).
      if (!(await isFile(file))) continue;
      ruleFiles.push(entry);
    }

    const byService = new Map<string, ServicePolicy>();
    const policy = new GatewayPolicy(directory, byService, keyedByTemplate, isShippedModel(model), options);
    for (const entry of ruleFiles) {
      const service = entry.slice(0, -'.csv'.length);
      const file = path.join(directory, entry);
      if (!SERVICE_NAME.test(service)) {
        throw new PolicyLoadError(`${file}: '${service}' is not a valid service type name`, file);
      }
      const lines = parseRuleFile(await readRuleFile(file), file, entry);
      byService.set(service, await policy.buildService(service, lines, modelText, modelFile));
    }
    return policy;
  }

  services(): string[] {
    return [...this.byService.keys()].sort();
  }

  summary(): Record<string, unknown> {
    return { services: this.services(), matcher: this.usesShippedMatcher ? 'shipped (JavaScript)' : 'custom (Casbin)' };
  }

  /**
   * Decides one gateway request; synchronous. Decisions are cached (bounded LRU) per route
   * template rather than per concrete path, so requests differing only in resource ids share one.
   */
  decide(request: PolicyRequest): PolicyDecision {
    const service = this.byService.get(request.service);
    if (!service) return UNKNOWN_SERVICE;
    const candidates = candidatesFor(service, request);
    if (!candidates) return NO_RULE;
    const key = this.cacheEnabled ? this.decisionKey(service, request, this.roleListOf(request.roles), candidates) : undefined;
    if (key === undefined) return this.evaluate(service, request, candidates, false).decision;
    const cached = this.decisions.get(key);
    if (cached) return cached;
    const decision = this.evaluate(service, request, candidates, false).decision;
    this.decisions.set(key, decision, 0);
    return decision;
  }

  /** The sorted role string of a roles array, kept per array: callers pass one array per token. */
  private roleListOf(roles: string[]): string {
    let list = this.roleLists.get(roles);
    if (list === undefined) {
      list = roleList(roles);
      this.roleLists.set(roles, list);
    }
    return list;
  }

  /** Like decide(), never cached, and lists every matching line (allow and deny) for security teams. */
  explain(request: PolicyRequest): PolicyExplanation {
    const service = this.byService.get(request.service);
    if (!service) return { ...UNKNOWN_SERVICE, matches: [] };
    const candidates = candidatesFor(service, request);
    if (!candidates) return { ...NO_RULE, matches: [] };
    const { decision, matches } = this.evaluate(service, request, candidates, true);
    return { ...decision, matches: matches ?? [] };
  }

  /** Runs the fixtures of `testsDirectory` (default: `<directory>/tests`) against this policy. */
  runFixtures(testsDirectory: string = path.join(this.directory, 'tests')): Promise<PolicyFixtureResult> {
    return runPolicyFixtures(this, testsDirectory);
  }

  /** Number of cached decisions (for tests and metrics). */
  get cachedDecisions(): number {
    return this.decisions.size;
  }

  /**
   * The cache key. Within one service the candidates are exactly the lines whose template has the
   * path's shape, so the matcher's path term reduces to each owner placeholder's equality with the
   * token's project or user; with that recorded per candidate, the concrete path and ids add
   * nothing. A matcher that reads r.obj, r.project or r.user elsewhere gets them in the key too.
   * The candidates are named by their index nodes, and owner outcomes recorded once per distinct
   * set of owner placeholders in a node: a hundred lines on one template add one node id and one
   * outcome to the key, not a hundred positions.
   * Undefined (not cached) when a part holds the separator and could collide.
   */
  private decisionKey(service: ServicePolicy, request: PolicyRequest, roles: string, candidates: Candidates): string | undefined {
    const parts = [service.name, roles, request.scope, request.method];
    if (!this.keyedByTemplate) parts.push(request.projectId ?? '', request.userId, request.path);
    if (parts.some((part) => part.includes('\0'))) return undefined;
    let lines = '';
    for (const node of candidates.nodes) {
      lines += node.id;
      for (const owners of node.ownerSets) lines += ownersMatch(owners, candidates.segments, request) ? '+' : '-';
      lines += ',';
    }
    parts.push(lines);
    return parts.join('\0');
  }

  private evaluate(service: ServicePolicy, request: PolicyRequest, candidates: Candidates, explain: boolean): Evaluation {
    if (this.usesShippedMatcher) return evaluateShippedMatcher(service, request, candidates, explain);
    return this.evaluateWithCasbin(service, request, candidates, explain);
  }

  /** Casbin's matcher and effect over the candidates: the reference semantics, and the only way for a custom model.conf. */
  private evaluateWithCasbin(service: ServicePolicy, request: PolicyRequest, candidates: Candidates, explain: boolean): Evaluation {
    const positions = candidatePositions(candidates);
    const rows = positions.map((position) => service.lines[position]!.fields);

    const { allowed, row, effects } = enforceNarrowed(service.enforcer, service.rules, rows, explain, [
      explain ? roleList(request.roles) : this.roleListOf(request.roles),
      request.scope,
      request.projectId ?? '',
      request.userId,
      request.path,
      request.method,
    ]);
    const decidingLine = row.length > 0 ? service.lineByRow.get(rowKey(row)) : undefined;
    let decision: PolicyDecision;
    if (allowed && decidingLine) {
      decision = lineDecision(true, 'allowed', decidingLine);
    } else if (!allowed && decidingLine?.effect === 'deny') {
      decision = lineDecision(false, 'denied by rule', decidingLine);
    } else if (allowed) {
      throw new Error(`Casbin allowed ${request.method} ${request.path} without naming a known rule`);
    } else {
      decision = NO_RULE;
    }

    const matches = effects ? matchingLines(effects, positions.map((position) => service.lines[position]!)) : undefined;
    return { decision, matches };
  }

  private async buildService(name: string, lines: PolicyLine[], modelText: string, modelFile: string): Promise<ServicePolicy> {
    const model = parseModel(modelText, modelFile, MODEL_FIELDS);
    const rows = lines.map((line) => line.fields);
    const enforcer = await casbin.newEnforcerWithClass(GatewayEnforcer, model, new RowsAdapter(rows));
    await enforcer.addFunction('roleMatch', roleMatcher());
    await enforcer.addFunction('pathMatch', pathMatcher(lines));
    const rules = enforcer.getModel().model.get('p')?.get('p');
    if (!rules) throw new PolicyLoadError(`${modelFile}: no [policy_definition] p`, modelFile);

    const methods = new Set(lines.map((line) => line.fields[3]!).filter((method) => method !== '*'));
    const nodeIds = new NodeIds();
    const byMethod = new Map<string, PathIndex>([...methods].map((method) => [method, new PathIndex(nodeIds)]));
    const otherMethods = new PathIndex(nodeIds);
    lines.forEach((line, position) => {
      const method = line.fields[3]!;
      if (method === '*') {
        otherMethods.add(line.template, position);
        for (const index of byMethod.values()) index.add(line.template, position);
      } else {
        byMethod.get(method)!.add(line.template, position);
      }
    });

    const service: ServicePolicy = {
      name,
      enforcer,
      rules,
      lines,
      lineByRow: new Map(lines.map((line) => [rowKey(line.fields), line])),
      byMethod,
      otherMethods,
    };
    // A matcher that cannot run (an edited model.conf) must fail the load, not the first request.
    const allRows = rules.policy;
    try {
      if (lines.length > 0) {
        rules.policy = [lines[0]!.fields];
        enforcer.enforceExSync('probe', 'project', 'p', 'u', '/', 'GET');
      }
    } catch (error) {
      throw new PolicyLoadError(`${modelFile}: the matcher fails to evaluate: ${messageOf(error)}`, modelFile);
    } finally {
      rules.policy = allRows;
    }
    return service;
  }
}

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
export async function runPolicyFixtures(policy: GatewayPolicy, testsDirectory: string): Promise<PolicyFixtureResult> {
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

// ---- rule files -------------------------------------------------------------------------------

function parseRuleFile(text: string, file: string, source: string): PolicyLine[] {
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

/** Compiles a path template, or returns why it is invalid. */
function compileTemplate(template: string): PathTemplate | string {
  if (!template.startsWith('/')) return `path template '${template}' must start with '/'`;
  const parts = template.slice(1).split('/');
  const segments: TemplateSegment[] = [];
  const ownerPositions: { kind: OwnerSegment['kind']; position: number }[] = [];
  let rest = -1;
  for (const [position, part] of parts.entries()) {
    // An empty part is only the root template '/' or a deliberate trailing slash.
    if (part === '' && position !== parts.length - 1) return `path template '${template}' has an empty segment`;
    if (part === '**') {
      if (rest !== -1) return `path template '${template}' may use '**' only once`;
      rest = position;
      segments.push({ kind: 'rest' });
    } else if (part === '*') {
      segments.push({ kind: 'one' });
    } else if (part === '{project_id}') {
      segments.push({ kind: 'project' });
      ownerPositions.push({ kind: 'project', position });
    } else if (part === '{user_id}') {
      segments.push({ kind: 'user' });
      ownerPositions.push({ kind: 'user', position });
    } else if (PLACEHOLDER.test(part)) {
      segments.push({ kind: 'one' });
    } else if (/[*{}]/.test(part)) {
      return `path template '${template}': '*', '**' and '{name}' must be whole segments (in '${part}')`;
    } else {
      segments.push({ kind: 'literal', value: part });
    }
  }
  // After a '**' a segment sits at a fixed distance from the end of the path.
  const owners = ownerPositions.map(({ kind, position }) => ({
    kind,
    offset: rest !== -1 && position > rest ? position - segments.length : position,
  }));
  return { segments, rest, owners };
}

/** Whether every owner placeholder of a candidate's template holds the token's own id. */
function ownersMatch(owners: OwnerSegment[], segments: string[], request: PolicyRequest): boolean {
  for (const { kind, offset } of owners) {
    const value = segments[offset >= 0 ? offset : segments.length + offset];
    const expected = kind === 'project' ? (request.projectId ?? '') : request.userId;
    if (value === undefined || value === '' || value !== expected) return false;
  }
  return true;
}

/** The candidate lines for the request's method and path shape; undefined when there are none. */
function candidatesFor(service: ServicePolicy, request: PolicyRequest): Candidates | undefined {
  if (!request.path.startsWith('/')) return undefined;
  const segments = request.path.slice(1).split('/');
  const index = service.byMethod.get(request.method) ?? service.otherMethods;
  const nodes = index.candidateNodes(segments);
  return nodes.length === 0 ? undefined : { segments, nodes, positions: undefined };
}

/** The candidate lines' positions, ascending (file order: the effect's deciding line depends on it). */
function candidatePositions(candidates: Candidates): readonly number[] {
  if (candidates.positions) return candidates.positions;
  const { nodes } = candidates;
  let positions = nodes[0]!.lines;
  for (let next = 1; next < nodes.length; next++) positions = mergeAscending(positions, nodes[next]!.lines);
  candidates.positions = positions;
  return positions;
}

/** Two ascending lists merged into one: linear, where flatMap and sort cost several times more on a hundred-line node. */
function mergeAscending(first: readonly number[], second: readonly number[]): number[] {
  const merged = new Array<number>(first.length + second.length);
  let from = 0;
  let to = 0;
  for (let at = 0; at < merged.length; at++) {
    merged[at] = to >= second.length || (from < first.length && first[from]! < second[to]!) ? first[from++]! : second[to++]!;
  }
  return merged;
}

function segmentMatches(segment: TemplateSegment, value: string, projectId: string, userId: string): boolean {
  switch (segment.kind) {
    case 'literal':
      return value === segment.value;
    case 'one':
      return value !== '';
    case 'project':
      return value !== '' && value === projectId;
    case 'user':
      return value !== '' && value === userId;
    case 'rest':
      return true;
  }
}

function templateMatches(template: PathTemplate, path: string[], projectId: string, userId: string): boolean {
  const { segments, rest } = template;
  if (rest === -1) {
    if (segments.length !== path.length) return false;
    for (let i = 0; i < segments.length; i++) if (!segmentMatches(segments[i]!, path[i]!, projectId, userId)) return false;
    return true;
  }
  const suffix = segments.length - rest - 1;
  if (path.length < rest + suffix) return false;
  for (let i = 0; i < rest; i++) if (!segmentMatches(segments[i]!, path[i]!, projectId, userId)) return false;
  for (let k = 1; k <= suffix; k++) {
    if (!segmentMatches(segments[segments.length - k]!, path[path.length - k]!, projectId, userId)) return false;
  }
  return true;
}

/**
 * A segment trie over one method's templates: finds the lines whose template has the request
 * path's shape, so the matcher evaluates a handful of lines instead of the whole file. Owner
 * placeholders index as any segment; their equality is left to pathMatch.
 */
class PathIndex {
  private readonly root: PathNode;

  /** `nodeIds` numbers the nodes; indexes sharing one (a service's) never repeat an id. */
  constructor(private readonly nodeIds: NodeIds) {
    this.root = new PathNode(nodeIds.next());
  }

  add(template: PathTemplate, position: number): void {
    let node = this.root;
    for (const segment of template.segments) {
      if (segment.kind === 'literal') {
        let child = node.literal.get(segment.value);
        if (!child) node.literal.set(segment.value, (child = new PathNode(this.nodeIds.next())));
        node = child;
      } else if (segment.kind === 'rest') {
        node = node.rest ??= new PathNode(this.nodeIds.next());
      } else {
        node = node.one ??= new PathNode(this.nodeIds.next());
      }
    }
    node.addLine(position, template.owners);
  }

  /** The nodes holding the lines whose template can match `path`. */
  candidateNodes(path: string[]): PathNode[] {
    const found: PathNode[] = [];
    collect(this.root, path, 0, found);
    return found;
  }
}

/** Numbers the nodes of one service's indexes, so a decision key can name the nodes a request reached. */
class NodeIds {
  private count = 0;

  next(): number {
    return this.count++;
  }
}

const NO_OWNER_SETS: readonly OwnerSegment[][] = Object.freeze([]);

class PathNode {
  readonly literal = new Map<string, PathNode>();
  one: PathNode | undefined;
  rest: PathNode | undefined;
  /** Positions of the lines whose template ends here, ascending (they are added in file order). */
  readonly lines: number[] = [];
  /** The distinct owner placeholders of those lines (lines without any are not listed); shared while empty, to save memory. */
  ownerSets: readonly OwnerSegment[][] = NO_OWNER_SETS;

  constructor(readonly id: number) {}

  addLine(position: number, owners: OwnerSegment[]): void {
    this.lines.push(position);
    if (owners.length > 0 && !this.ownerSets.some((known) => sameOwners(known, owners))) this.ownerSets = [...this.ownerSets, owners];
  }
}

function sameOwners(first: OwnerSegment[], second: OwnerSegment[]): boolean {
  return first.length === second.length && first.every((owner, at) => owner.kind === second[at]!.kind && owner.offset === second[at]!.offset);
}

function collect(node: PathNode, path: string[], position: number, found: PathNode[]): void {
  if (position === path.length) {
    if (node.lines.length > 0) found.push(node);
  } else {
    const segment = path[position]!;
    const literal = node.literal.get(segment);
    if (literal) collect(literal, path, position + 1, found);
    if (node.one && segment !== '') collect(node.one, path, position + 1, found);
  }
  // A template holds at most one '**', so below it every walk is linear.
  if (node.rest) for (let next = position; next <= path.length; next++) collect(node.rest, path, next, found);
}

// ---- Casbin plumbing --------------------------------------------------------------------------


/**
 * Whether the matcher reads the request's path, project and user only as the arguments of the
 * canonical pathMatch term, which the template-keyed decision cache relies on.
 */
function readsPathOnlyThroughPathMatch(model: Model): boolean {
  const matcher = (model.model.get('m')?.get('m')?.value ?? '').replace(/\s+/g, '');
  const rest = matcher.split('pathMatch(r_obj,p_obj,r_project,r_user)').join('');
  return !/\br_(obj|project|user)\b/.test(rest);
}

/**
 * The shipped model's matcher and effect in plain JavaScript, deciding exactly as Casbin does over
 * the same candidates (a differential test holds it to that):
 *
 *   m = (p.act == r.act || p.act == "*") && (p.scope == r.scope || p.scope == "*")
 *       && roleMatch(r.roles, p.sub) && pathMatch(r.obj, p.obj, r.project, r.user)
 *   e = some(where (p.eft == allow)) && !some(where (p.eft == deny))
 *
 * Casbin's deny-overrides stream names the first matching deny line when there is one (and stops
 * there), otherwise the last matching allow line. Explain keeps going to list every match.
 */
function evaluateShippedMatcher(service: ServicePolicy, request: PolicyRequest, candidates: Candidates, explain: boolean): Evaluation {
  const { method, scope, roles, userId } = request;
  const projectId = request.projectId ?? '';
  const matches: PolicyMatch[] | undefined = explain ? [] : undefined;
  let lastAllow: PolicyLine | undefined;
  let firstDeny: PolicyLine | undefined;
  for (const position of candidatePositions(candidates)) {
    const line = service.lines[position]!;
    const [sub, lineScope, , act] = line.fields as [string, string, string, string, string];
    if (act !== method && act !== '*') continue;
    if (lineScope !== scope && lineScope !== '*') continue;
    // roleMatch over roleList(roles): a line's role is never empty and holds no comma (the rule
    // file is split on commas), so membership in the raw array is the same answer.
    if (sub !== '*' && !roles.includes(sub)) continue;
    if (!templateMatches(line.template, candidates.segments, projectId, userId)) continue;
    matches?.push({ rule: line.text, source: line.source, line: line.line, effect: line.effect });
    if (line.effect === 'deny') {
      firstDeny ??= line;
      if (!explain) break;
    } else if (!firstDeny) {
      lastAllow = line;
    }
  }
  let decision: PolicyDecision;
  if (firstDeny) decision = lineDecision(false, 'denied by rule', firstDeny);
  else if (lastAllow) decision = lineDecision(true, 'allowed', lastAllow);
  else decision = NO_RULE;
  return { decision, matches };
}

/** pathMatch(obj, template, project, user) over templates compiled at load. */
function pathMatcher(lines: PolicyLine[]): (obj: string, template: string, projectId: string, userId: string) => boolean {
  const templates = new Map(lines.map((line) => [line.fields[2]!, line.template]));
  let lastPath: string | undefined;
  let lastSegments: string[] = [];
  return (obj, template, projectId, userId) => {
    const compiled = templates.get(template) ?? compileTemplate(template);
    if (typeof compiled === 'string' || !obj.startsWith('/')) return false;
    if (obj !== lastPath) {
      lastPath = obj;
      lastSegments = obj.slice(1).split('/');
    }
    return templateMatches(compiled, lastSegments, projectId, userId);
  };
}

// ---- helpers ----------------------------------------------------------------------------------

function lineDecision(allowed: boolean, reason: PolicyDecision['reason'], line: PolicyLine): PolicyDecision {
  return Object.freeze({ allowed, reason, rule: line.text, source: line.source, line: line.line });
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
