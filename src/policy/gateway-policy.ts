import { readdir } from 'node:fs/promises';
import path from 'node:path';
import type * as CasbinModule from 'casbin';
import type { Assertion, Model } from 'casbin';
import { GenerationCache } from '../support/cache.ts';
import { splitSegments } from '../support/segments.ts';
import { parseRuleFile, runPolicyFixtures } from './gateway-policy-files.ts';
import type { GatewayPolicyOptions, PolicyDecision, PolicyExplanation, PolicyLine, PolicyMatch, PolicyRequest } from './gateway-policy-types.ts';
import { compileTemplate, NodeIds, PathIndex, templateMatches, type OwnerSegment, type PathNode } from './path-template.ts';
import {
  casbin,
  isFile,
  messageOf,
  parseModel,
  PolicyLoadError,
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

const MODEL_FIELDS = { request: ['roles', 'scope', 'project', 'user', 'obj', 'act'], policy: ['sub', 'scope', 'obj', 'act', 'eft'] } as const;
const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const DEFAULT_CACHE_SIZE = 10_000;

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

  /** Whether a policy file for `serviceType` was loaded (the gateway serves the type only then). */
  hasService(serviceType: string): boolean {
    return this.byService.has(serviceType);
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
    // Concatenated, not an array joined: this runs on every proxied request.
    if (hasNul(service.name) || hasNul(roles) || hasNul(request.scope) || hasNul(request.method)) return undefined;
    let key = `${service.name}\0${roles}\0${request.scope}\0${request.method}\0`;
    if (!this.keyedByTemplate) {
      const projectId = request.projectId ?? '';
      if (hasNul(projectId) || hasNul(request.userId) || hasNul(request.path)) return undefined;
      key += `${projectId}\0${request.userId}\0${request.path}\0`;
    }
    for (const node of candidates.nodes) {
      key += node.id;
      for (const owners of node.ownerSets) key += ownersMatch(owners, candidates.segments, request) ? '+' : '-';
      key += ',';
    }
    return key;
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

function hasNul(part: string): boolean {
  return part.includes('\0');
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
  const segments = splitSegments(request.path, 1);
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
