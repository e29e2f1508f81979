// Keystone 22's federation mapping engine (keystone/federation/utils.py): RuleProcessor turns an
// identity provider's assertion into "mapped properties" (the user, group ids, groups by name and
// domain, projects) with a mapping's rules. Pure: no storage, no clock. What Keystone then does
// against the database (group ids checked, group names resolved, the ephemeral user's id) is below
// the engine, behind the MappedGroupLookup interface.
//
// Where Keystone's answer depends on Python's set order (whitelist/blacklist results, group_ids),
// which changes from one process to the next, this engine keeps the assertion's (first-seen) order.

import { AuthenticationError, NotFoundError, ValidationError } from '../support/errors.ts';
import { hashKey, literalEval, literalToJson, pyFormat, pyQuote, pyRepr, pythonRegex, type FormatArgument, type PyLiteral } from './mapping-python.ts';
import {
  DirectMappingError,
  MappedGroupNotFoundError,
  MappingEngineError,
  MappingValidation,
  type Assertion,
  type DomainRef,
  type JsonValue,
  type MappedGroupName,
  type MappedLiteral,
  type MappedProperties,
  type MappedUser,
  type MappingRule,
  type ProjectRule,
  type RemoteRequirement,
} from './mapping-types.ts';

export type { MappedProperties } from './mapping-types.ts';

/** A local rule after its direct maps are filled in (any JSON object). */
type IdentityValue = { [key: string]: JsonValue };

/** Keystone's DirectMaps: one entry per remote requirement that maps values (not any_one_of/not_any_of). */
class DirectMaps {
  private readonly matches: string[][] = [];
  add(values: string[]): void {
    this.matches.push(values);
  }
  /** What `{N}` sees: a single value alone, else the list (formatted as Python's str(list)). */
  arguments(): FormatArgument[] {
    return this.matches.map((values) => (values.length === 1 ? values[0]! : values));
  }
  toString(): string {
    return pyRepr(this.matches);
  }
}

/** Debug lines, as Keystone logs them with --engine-debug. */
export type MappingDebugLog = (message: string) => void;

export class RuleProcessor {
  /** Compiled regular expressions of this mapping's rules, by pattern. */
  private readonly regexes = new Map<string, RegExp>();

  constructor(
    readonly mappingId: string,
    readonly rules: readonly MappingRule[],
    private readonly debug: MappingDebugLog = () => {},
  ) {}

  /**
   * Keystone's RuleProcessor.process: each rule whose remote requirements the assertion meets adds
   * its local rules (direct maps filled in); the result is then normalised (_transform).
   * Throws ValidationError (Keystone's, 400; a failed login once in an authentication) when nothing
   * maps, for an unknown user type and for `groups` without a domain; DirectMappingError for a `{N}`
   * with no remote match N; MappingEngineError where Keystone's Python raises otherwise (500).
   */
  process(assertionData: Assertion): MappedProperties {
    this.debug(`assertion data: ${pyRepr(assertionData)}`);
    // Values are split on ';' into lists; what is not a string is left out.
    const assertion = new Map<string, string[]>();
    for (const [name, value] of Object.entries(assertionData)) if (typeof value === 'string') assertion.set(name, value.split(';'));
    this.debug(`assertion: ${pyRepr(Object.fromEntries(assertion))}`);
    const identityValues: IdentityValue[] = [];
    this.debug(`rules: ${pyRepr(this.rules)}`);
    for (const rule of this.rules) {
      const directMaps = this.verifyAllRequirements(rule.remote, assertion);
      // The rule does not apply.
      if (directMaps === undefined) continue;
      // Keystone tests `if not direct_maps`, but DirectMaps has no length: every matching rule's
      // locals go through the substitution, even with no direct maps.
      for (const local of rule.local) identityValues.push(this.updateLocalMapping(local as unknown as IdentityValue, directMaps));
    }
    this.debug(`identity_values: ${pyRepr(identityValues)}`);
    const mapped = this.transform(identityValues);
    this.debug(`mapped_properties: ${pyRepr(mapped)}`);
    return mapped;
  }

  /** Keystone's _verify_all_requirements: undefined when the rule does not apply. */
  private verifyAllRequirements(requirements: readonly RemoteRequirement[], assertion: Map<string, string[]>): DirectMaps | undefined {
    const directMaps = new DirectMaps();
    for (const requirement of requirements) {
      if (!isObject(requirement) || !('type' in requirement)) throw new MappingEngineError("'type'", 'KeyError');
      let values = typeof requirement.type === 'string' ? assertion.get(requirement.type) : undefined;
      const regex = truthy(requirement.regex);
      if (!values) return undefined;

      if (requirement.any_one_of !== undefined && requirement.any_one_of !== null) {
        if (this.matches(requirement.any_one_of, values, regex).length > 0) continue;
        return undefined;
      }
      if (requirement.not_any_of !== undefined && requirement.not_any_of !== null) {
        if (this.matches(requirement.not_any_of, values, regex).length === 0) continue;
        return undefined;
      }
      const blacklist = requirement.blacklist ?? undefined;
      const whitelist = requirement.whitelist ?? undefined;
      // Keystone's schema refuses a requirement with both; its engine would apply the blacklist.
      if (blacklist !== undefined && whitelist !== undefined) {
        throw new ValidationError(`${pyRepr(requirement)} is not valid under any of the given schemas\n`);
      }
      if (blacklist !== undefined) {
        const matched = new Set(this.matches(blacklist, values, regex));
        values = distinct(values.filter((value) => !matched.has(value)));
      } else if (whitelist !== undefined) {
        // Without regex, Keystone's matches are a set (distinct values); with regex, a list.
        values = regex ? this.matches(whitelist, values, true) : distinct(this.matches(whitelist, values, false));
      }
      directMaps.add(values);
      this.debug(`updating a direct mapping: ${pyRepr(values)}`);
    }
    return directMaps;
  }

  /**
   * Keystone's _evaluate_requirement filter: the assertion values matching one of the rule's values
   * (by equality, or by re.search when `regex`), in assertion order.
   */
  private matches(ruleValues: unknown, values: string[], regex: boolean): string[] {
    if (!Array.isArray(ruleValues)) throw new MappingEngineError(`'${typeof ruleValues}' object is not iterable`, 'TypeError');
    if (regex) {
      // Keystone runs every pattern on every value (any([...]) of a list): a bad one always fails.
      const patterns = ruleValues.map((pattern) => {
        if (typeof pattern !== 'string') throw new MappingEngineError('first argument must be string or compiled pattern', 'TypeError');
        return this.regex(pattern);
      });
      return values.filter((value) => patterns.some((pattern) => pattern.test(value)));
    }
    // set(values): a list or an object among them is unhashable.
    for (const ruleValue of ruleValues) if (ruleValue !== null && typeof ruleValue === 'object') throw new MappingEngineError(`unhashable type: '${Array.isArray(ruleValue) ? 'list' : 'dict'}'`, 'TypeError');
    const allowed = new Set(ruleValues.filter((ruleValue): ruleValue is string => typeof ruleValue === 'string'));
    return values.filter((value) => allowed.has(value));
  }

  private regex(pattern: string): RegExp {
    let compiled = this.regexes.get(pattern);
    if (!compiled) {
      compiled = pythonRegex(pattern);
      this.regexes.set(pattern, compiled);
    }
    // Not global or sticky: test() keeps no state between values.
    return compiled;
  }

  /** Keystone's _update_local_mapping: every string of the local rule is str.format-ed with the direct maps. */
  private updateLocalMapping(local: IdentityValue, directMaps: DirectMaps): IdentityValue {
    this.debug(`direct_maps: ${directMaps}`);
    this.debug(`local: ${pyRepr(local)}`);
    if (!isObject(local)) throw new MappingEngineError(`'${pyTypeName(local)}' object has no attribute 'items'`, 'AttributeError');
    const args = directMaps.arguments();
    const result: IdentityValue = {};
    for (const [key, value] of Object.entries(local)) {
      if (isObject(value)) result[key] = this.updateLocalMapping(value, directMaps);
      else if (Array.isArray(value)) result[key] = value.map((item) => this.updateLocalMapping(item as IdentityValue, directMaps));
      else if (typeof value === 'string') result[key] = pyFormat(value, args, () => new DirectMappingError(this.mappingId));
      else throw new MappingEngineError(`'${pyTypeName(value)}' object has no attribute 'format'`, 'AttributeError');
    }
    return result;
  }

  /** Keystone's _transform: the identity values folded into the mapped properties. */
  private transform(identityValues: IdentityValue[]): MappedProperties {
    // A mapping that yields nothing fails rather than making up a user.
    if (identityValues.length === 0) throw MappingValidation.nothingMapped();
    let user: IdentityValue = {};
    const groupIds = new Map<string, MappedLiteral>();
    const groupNames: MappedGroupName[] = [];
    const groupsByDomain = new Map<string, Map<string, IdentityValue>>();
    let projects: ProjectRule[] = [];

    for (const identityValue of identityValues) {
      if ('user' in identityValue) {
        // The first non-empty user wins (Keystone logs "Ignoring user name" for the others).
        if (Object.keys(user).length === 0) user = identityValue.user as IdentityValue;
      }
      if ('group' in identityValue) {
        const group = identityValue.group as IdentityValue;
        if (!isObject(group)) throw new MappingEngineError('group is not an object', 'TypeError');
        if ('id' in group) addGroupId(groupIds, { kind: 'str', value: group.id as string });
        else if ('name' in group) {
          if (!isObject(group.domain)) throw new MappingEngineError("'domain'", 'KeyError');
          const domain = (group.domain.name || group.domain.id) ?? null;
          const key = hashKey(literalOf(domain));
          let groups = groupsByDomain.get(key);
          if (!groups) groupsByDomain.set(key, (groups = new Map()));
          // {g['name']: g for g in groups}: the last group of a name, in the first one's place.
          groups.set(hashKey(literalOf(group.name)), group);
        }
        // Keystone adds every group by name seen so far, each time a `group` comes by.
        for (const groups of groupsByDomain.values()) for (const named of groups.values()) groupNames.push(named as MappedGroupName);
      }
      if ('groups' in identityValue) groupNames.push(...this.normalizeGroups(identityValue));
      if ('group_ids' in identityValue) for (const id of astLiteralEval(identityValue.group_ids)) addGroupId(groupIds, id);
      if ('projects' in identityValue) projects = identityValue.projects as unknown as ProjectRule[];
    }

    const type = user.type;
    if (type !== undefined && type !== null && truthy(type) && type !== 'ephemeral' && type !== 'local') throw MappingValidation.userType(String(type));
    if (type === undefined || type === null) user = { ...user, type: 'ephemeral' };
    return { user: user as unknown as MappedUser, group_ids: [...groupIds.values()], group_names: groupNames, projects };
  }

  /** Keystone's _normalize_groups: `groups` (a name or a Python list of names) with their domain. */
  private normalizeGroups(identityValue: IdentityValue): MappedGroupName[] {
    const groups = identityValue.groups;
    // `'name' in groups`: a substring test on the mapped string (the "JSON:{...}" form).
    if (contains(groups, 'name')) {
      const names = astLiteralEval(groups);
      const dicts = names.map((group): MappedGroupName => {
        if (group.kind !== 'str') throw new MappingEngineError(`'${group.kind}' object has no attribute 'startswith'`, 'AttributeError');
        if (!group.value.startsWith('JSON:')) return group.value;
        // str.lstrip('JSON:') strips those characters, not the prefix.
        const text = group.value.replace(/^[JSON:]+/, '');
        try {
          return JSON.parse(text) as MappedGroupName;
        } catch (error) {
          throw new MappingEngineError(error instanceof Error ? error.message : String(error), 'JSONDecodeError');
        }
      });
      for (const group of dicts) if (!contains(group, 'domain')) throw MappingValidation.groupsWithoutDomain(pyRepr(identityValue));
      return dicts;
    }
    if (!('domain' in identityValue)) throw MappingValidation.groupsWithoutDomain(pyRepr(identityValue));
    const domain = identityValue.domain as DomainRef;
    return astLiteralEval(groups).map((name) => ({ name: literalToJson(name), domain }));
  }
}

/** Keystone's RuleProcessor(mapping_id, rules).process(assertion). */
export function processAssertion(mappingId: string, rules: readonly MappingRule[], assertion: Assertion, debug?: MappingDebugLog): MappedProperties {
  return new RuleProcessor(mappingId, rules, debug).process(assertion);
}

/**
 * Keystone's get_assertion_params_from_env: the request environment's entries whose names start
 * with `prefix` (FEDERATION_ASSERTION_PREFIX; '' takes them all), bytes read as ISO-8859-1.
 */
export function assertionFromEnvironment(environment: Iterable<[string, unknown]> | Record<string, unknown>, prefix = ''): Assertion {
  const entries = Symbol.iterator in environment ? (environment as Iterable<[string, unknown]>) : Object.entries(environment);
  const assertion: Assertion = {};
  for (const [name, value] of entries) {
    if (!name.startsWith(prefix)) continue;
    assertion[name] = value instanceof Uint8Array ? Buffer.from(value).toString('latin1') : value;
  }
  return assertion;
}

// ---------------------------------------------------------------------------------------------
// After the engine: what Keystone's mapped auth plugin does with the mapped properties.

/** The lookups Keystone's mapped auth plugin makes against the identity and resource back ends. */
export interface MappedGroupLookup {
  /** Whether a group with this id exists (identity_api.get_group). */
  groupExists(groupId: string): Promise<boolean>;
  /** The id of the group of this name in this domain (identity_api.get_group_by_name), if any. */
  findGroupId(name: string, domainId: string): Promise<string | undefined>;
  /** The id of the domain of this name (resource_api.get_domain_by_name), if any. */
  findDomainId(name: string): Promise<string | undefined>;
}

/**
 * Keystone's validate_mapped_group_ids and transform_to_group_ids (apply_mapping_filter): every
 * mapped group id must exist (MappedGroupNotFoundError, a 500 in Keystone); groups by name are
 * resolved in their domain and dropped when missing; an unknown domain name is Keystone's
 * DomainNotFound (404). Returns the distinct group ids, the mapped ones first.
 */
export async function resolveMappedGroups(mapped: MappedProperties, mappingId: string, lookup: MappedGroupLookup): Promise<string[]> {
  const ids: string[] = [];
  for (const id of mapped.group_ids) {
    if (typeof id !== 'string' || !(await lookup.groupExists(id))) throw new MappedGroupNotFoundError(String(id), mappingId);
    ids.push(id);
  }
  for (const group of mapped.group_names) {
    if (!isObject(group)) throw new MappingEngineError('string indices must be integers', 'TypeError');
    const domain = group.domain;
    if (!isObject(domain)) throw new MappingEngineError("'domain'", isObject(group) && 'domain' in group ? 'AttributeError' : 'KeyError');
    let domainId = typeof domain.id === 'string' && domain.id ? domain.id : undefined;
    if (domainId === undefined) {
      const name = domain.name;
      domainId = typeof name === 'string' ? await lookup.findDomainId(name) : undefined;
      if (domainId === undefined) throw NotFoundError.of('domain', String(name ?? 'None'));
    }
    const name = group.name;
    const id = typeof name === 'string' ? await lookup.findGroupId(name, domainId) : undefined;
    if (id !== undefined) ids.push(id);
  }
  return [...new Set(ids)];
}

/**
 * The engine and the group resolution as a federated login runs them (Keystone's
 * apply_mapping_filter): a mapping that is invalid or maps nothing fails the authentication (401,
 * Keystone's Unauthorized, the cause kept for the audit trail). Returns the mapped properties with
 * `group_ids` resolved.
 */
export async function applyMappingFilter(mappingId: string, rules: readonly MappingRule[], assertion: Assertion, lookup: MappedGroupLookup): Promise<MappedProperties & { group_ids: string[] }> {
  let mapped: MappedProperties;
  try {
    mapped = processAssertion(mappingId, rules, assertion);
  } catch (error) {
    if (error instanceof ValidationError) throw AuthenticationError.because({ reason: error.message, code: 401 });
    throw error;
  }
  return { ...mapped, group_ids: await resolveMappedGroups(mapped, mappingId, lookup) };
}

/**
 * Keystone's get_user_unique_id_and_display_name for an ephemeral user: the user's id (its name
 * when the rules set none), URL-quoted, and its display name (`remoteUser`, the request's
 * REMOTE_USER, when the rules set no name). Without either: Unauthorized.
 */
export function ephemeralUserIdentity(user: MappedUser, remoteUser?: string): { id: string; name: string } {
  const userId = truthy(user.id) ? String(user.id) : undefined;
  const userName = truthy(user.name) ? String(user.name) : remoteUser || undefined;
  if (!userId && !userName) {
    throw new AuthenticationError(
      'Could not map user while setting ephemeral user identity. Either mapping rules must specify user id/name or REMOTE_USER environment variable must be set.',
    );
  }
  const id = userId ?? userName!;
  return { id: pyQuote(id), name: userName ?? userId! };
}

// ---------------------------------------------------------------------------------------------

/** Keystone's _ast_literal_eval: a Python list literal's items, else the value itself as the only item. */
function astLiteralEval(value: JsonValue | undefined): PyLiteral[] {
  if (typeof value !== 'string') {
    // ast.literal_eval of a non-string: a list passes through, anything else is a ValueError.
    if (Array.isArray(value)) return value.map(literalOf);
    return [literalOf(value ?? null)];
  }
  const literal = literalEval(value);
  return literal?.kind === 'list' ? literal.items : [{ kind: 'str', value }];
}

function literalOf(value: JsonValue): PyLiteral {
  if (typeof value === 'string') return { kind: 'str', value };
  if (typeof value === 'number') return Number.isInteger(value) ? { kind: 'int', value: BigInt(value) } : { kind: 'float', value };
  if (typeof value === 'boolean') return { kind: 'bool', value };
  if (value === null) return { kind: 'none' };
  if (Array.isArray(value)) return { kind: 'list', items: value.map(literalOf) };
  return { kind: 'dict', entries: Object.entries(value).map(([key, item]) => [{ kind: 'str', value: key }, literalOf(item)]) };
}

function addGroupId(groupIds: Map<string, MappedLiteral>, id: PyLiteral): void {
  const key = hashKey(id);
  if (!groupIds.has(key)) groupIds.set(key, literalToJson(id));
}

/** Python's `needle in haystack` for a str, a list or a dict. */
function contains(haystack: unknown, needle: string): boolean {
  if (typeof haystack === 'string') return haystack.includes(needle);
  if (Array.isArray(haystack)) return haystack.includes(needle);
  if (isObject(haystack)) return needle in haystack;
  throw new MappingEngineError(`argument of type '${pyTypeName(haystack)}' is not iterable`, 'TypeError');
}

function distinct(values: string[]): string[] {
  return [...new Set(values)];
}

/** Python truthiness of a JSON value. */
function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (isObject(value)) return Object.keys(value).length > 0;
  return Boolean(value);
}

function isObject(value: unknown): value is { [key: string]: JsonValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function pyTypeName(value: unknown): string {
  if (value === null || value === undefined) return 'NoneType';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'string') return 'str';
  return Array.isArray(value) ? 'list' : 'dict';
}
