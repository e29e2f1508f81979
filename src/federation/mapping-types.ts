// Types and errors of the federation mapping engine (mapping-engine.ts), a port of Keystone 22's
// keystone/federation/utils.py RuleProcessor. Keystone 22 (Zed) has one rule format: the
// `schema_version` 2.0 and RuleProcessorToHonorDomainOption came in a later release.
//
// The rules reaching the engine are the stored, schema-checked ones (mapping-rules-schema.ts checks
// them against Keystone's MAPPING_SCHEMA when a mapping is created or updated); the engine still
// fails cleanly on shapes the schema would refuse, the way Keystone's does (see the errors below).

import { ValidationError } from '../support/errors.ts';

/** A JSON value, as a stored mapping holds it. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A domain named by id or by name (Keystone's "domain" definition). */
export interface DomainRef {
  id?: string;
  name?: string;
}

/** One requirement of a rule's `remote` list: an assertion attribute, optionally filtered. */
export interface RemoteRequirement {
  type: string;
  any_one_of?: JsonValue[];
  not_any_of?: JsonValue[];
  whitelist?: JsonValue[];
  blacklist?: JsonValue[];
  /** The values above are Python regular expressions (re.search: a match anywhere in the value). */
  regex?: boolean;
}

/** A role of a mapped project. */
export interface ProjectRole {
  name: string;
  [key: string]: JsonValue;
}

/** A project (with roles) an ephemeral user is given (Keystone's shadow mapping). */
export interface ProjectRule {
  name: string;
  roles: ProjectRole[];
}

/** The user object of a local rule; `{0}`, `{1}`… refer to the rule's remote matches. */
export interface LocalUser {
  id?: string;
  name?: string;
  email?: string;
  domain?: DomainRef;
  /** 'ephemeral' (the default) or 'local'. */
  type?: string;
}

/** A group named by id, or by name within a domain. */
export type LocalGroup = { id: string } | { name: string; domain: DomainRef };

/** One element of a rule's `local` list. */
export interface LocalRule {
  user?: LocalUser;
  group?: LocalGroup;
  /** A group name, or a Python list of them ("['a', 'b']", what a multi-valued match becomes). */
  groups?: string;
  /** The same for group ids. */
  group_ids?: string;
  /** The domain of `groups` (and, at the rule level, of the user). */
  domain?: DomainRef;
  projects?: ProjectRule[];
}

export interface MappingRule {
  local: LocalRule[];
  remote: RemoteRequirement[];
}

/** A mapping's rules: `{"rules": [...]}` as stored. */
export interface MappingRules {
  rules: MappingRule[];
}

/**
 * The assertion: attribute name → value as the web server put it in the request environment, a
 * ';' separating the values of a multi-valued attribute. Values that are not strings are ignored.
 */
export type Assertion = Record<string, unknown>;

/**
 * A value Python's ast.literal_eval gave for a `groups` or `group_ids` entry: usually a string; a
 * number or another literal when the mapped value reads as one ("[1, 2]").
 */
export type MappedLiteral = string | number | boolean | null | MappedLiteral[] | { [key: string]: MappedLiteral };

/** The mapped user: the rule's user object with its direct maps filled in, and its type. */
export interface MappedUser {
  id?: string;
  name?: string;
  email?: string;
  domain?: DomainRef;
  /** 'ephemeral' unless the rule says 'local' (or, as Keystone lets through, ''). */
  type: string;
}

/**
 * A group named by name and domain, to be resolved to an id against the database. Keystone's JSON
 * form of `groups` ("JSON:{...}") passes whatever the JSON held.
 */
export type MappedGroupName = { name: MappedLiteral; domain: DomainRef | JsonValue; [key: string]: JsonValue | MappedLiteral | DomainRef } | MappedLiteral;

/** Keystone's "mapped properties": what RuleProcessor.process returns. */
export interface MappedProperties {
  user: MappedUser;
  /** Distinct group ids (Keystone's comes from a set, in no order; here in first-mapped order). */
  group_ids: MappedLiteral[];
  group_names: MappedGroupName[];
  /** The last `projects` mapped (always present, [] when none). */
  projects: ProjectRule[];
}

/**
 * A failure Keystone does not anticipate in the mapping engine: its UnexpectedError family
 * (DirectMappingError, MappedGroupNotFound) or a Python exception escaping RuleProcessor (a bad
 * format string, an invalid regular expression…). Not a ServiceError: the API answers 500 with the
 * generic "unexpected error" text, as Keystone does (it hides the detail unless insecure_debug).
 */
export class MappingEngineError extends Error {
  override name = 'MappingEngineError';
  constructor(
    message: string,
    /** The Python exception Keystone raises here (e.g. "KeyError", "re.error"). */
    readonly pythonException: string,
  ) {
    super(message);
  }
}

/** Keystone's DirectMappingError: a local `{N}` (or `{N[i]}`) refers to a remote match that does not exist. */
export class DirectMappingError extends MappingEngineError {
  override name = 'DirectMappingError';
  constructor(readonly mappingId: string) {
    super(`Local section in mapping ${mappingId} refers to a remote match that doesn't exist (e.g. {0} in a local section).`, 'DirectMappingError');
  }
}

/** Keystone's MappedGroupNotFound: a mapped group id that is not in the identity back end. */
export class MappedGroupNotFoundError extends MappingEngineError {
  override name = 'MappedGroupNotFoundError';
  constructor(
    readonly groupId: string,
    readonly mappingId: string,
  ) {
    super(`Group ${groupId} returned by mapping ${mappingId} was not found in the backend.`, 'MappedGroupNotFound');
  }
}

/** Keystone's texts for the ValidationErrors of the engine (400; 401 once in an authentication). */
export const MappingValidation = {
  /** No rule matched (or the matching rules had empty `local` lists). */
  nothingMapped: () =>
    new ValidationError('Could not map any federated user properties to identity values. Check debug logs or the mapping used for additional details.'),
  userType: (type: string) => new ValidationError(`User type ${type} not supported`),
  /** `groups` without `domain`; `rule` is Python's repr of the local rule after substitution. */
  groupsWithoutDomain: (rule: string) => new ValidationError(`Invalid rule: ${rule}. Both 'groups' and 'domain' keywords must be specified.`),
} as const;
