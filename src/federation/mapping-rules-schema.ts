import { pythonRegex } from './mapping-python.ts';
import { ValidationError } from '../support/errors.ts';

// Keystone 22's MAPPING_SCHEMA (keystone/federation/utils.py) and its validate_mapping_structure:
// every error of a Draft 4 validation (not only the first), each as jsonschema 4.10 words it
// (instances quoted as Python prints them), sorted as Python sorts the errors (by their text, which
// starts with the message), one per line, each line ending with "\n".
//
// Keystone 22 has one mapping schema. A mapping's `schema_version` (added to Keystone later, with
// the 2.0 rules) is neither stored nor checked by it: any extra key of the mapping object is let
// through, and the rules are checked against this schema whatever version is named.

/** The schema versions a mapping may name; Keystone 22 checks every one against the same schema. */
export const DEFAULT_MAPPING_SCHEMA_VERSION = '1.0';

type Schema = boolean | { [keyword: string]: unknown };

const ROLE_PROPERTIES = {
  type: 'array',
  items: {
    type: 'object',
    required: ['name'],
    // Keystone's schema has `additionalProperties: False` inside `properties` (a property named so,
    // whose schema is False), not beside it: kept as it is.
    properties: { name: { type: 'string' }, additionalProperties: false },
  },
};

const remoteWith = (keyword: string) => ({
  type: 'object',
  additionalProperties: false,
  required: ['type', keyword],
  properties: { type: { type: 'string' }, [keyword]: { type: 'array' }, regex: { type: 'boolean' } },
});

export const MAPPING_SCHEMA = {
  type: 'object',
  required: ['rules'],
  properties: {
    rules: {
      minItems: 1,
      type: 'array',
      items: {
        type: 'object',
        required: ['local', 'remote'],
        additionalProperties: false,
        properties: {
          local: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              properties: {
                user: {
                  type: 'object',
                  properties: {
                    id: { type: 'string' },
                    name: { type: 'string' },
                    email: { type: 'string' },
                    domain: { $ref: '#/definitions/domain' },
                    type: { type: 'string', enum: ['ephemeral', 'local'] },
                  },
                  additionalProperties: false,
                },
                projects: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['name', 'roles'],
                    additionalProperties: false,
                    properties: { name: { type: 'string' }, roles: ROLE_PROPERTIES },
                  },
                },
                group: {
                  type: 'object',
                  oneOf: [{ $ref: '#/definitions/group_by_id' }, { $ref: '#/definitions/group_by_name' }],
                },
                groups: { type: 'string' },
                group_ids: { type: 'string' },
                domain: { $ref: '#/definitions/domain' },
              },
            },
          },
          remote: {
            minItems: 1,
            type: 'array',
            items: {
              type: 'object',
              oneOf: [
                { $ref: '#/definitions/empty' },
                { $ref: '#/definitions/any_one_of' },
                { $ref: '#/definitions/not_any_of' },
                { $ref: '#/definitions/blacklist' },
                { $ref: '#/definitions/whitelist' },
              ],
            },
          },
        },
      },
    },
  },
  definitions: {
    empty: { type: 'object', required: ['type'], properties: { type: { type: 'string' } }, additionalProperties: false },
    any_one_of: remoteWith('any_one_of'),
    not_any_of: remoteWith('not_any_of'),
    blacklist: remoteWith('blacklist'),
    whitelist: remoteWith('whitelist'),
    domain: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' } }, additionalProperties: false },
    group_by_id: { type: 'object', properties: { id: { type: 'string' } }, additionalProperties: false, required: ['id'] },
    group_by_name: {
      type: 'object',
      properties: { name: { type: 'string' }, domain: { $ref: '#/definitions/domain' } },
      additionalProperties: false,
      required: ['name', 'domain'],
    },
  },
} as const;

const DEFINITIONS = MAPPING_SCHEMA.definitions as unknown as Record<string, Schema>;

/**
 * Checks a mapping's rules as Keystone 22 does when a mapping is created or updated (`rules`
 * undefined: the mapping has none). Throws a ValidationError with Keystone's text, e.g.
 * "'rules' is a required property\n" or "[] is too short\n".
 */
export function validateMappingRules(rules: unknown, schemaVersion?: string): void {
  void schemaVersion; // one schema in Keystone 22 (see above)
  validateMapping(rules === undefined ? {} : { rules });
  if (Array.isArray(rules)) checkRegexes(rules);
}

/**
 * Beyond Keystone: every value of a `regex` requirement must compile as the engine will run it.
 * Keystone stores a broken pattern and fails each login it meets with a 500; here the write that
 * brings it is the 400.
 */
function checkRegexes(rules: unknown[]): void {
  for (const rule of rules) {
    const remote = (rule as { remote?: unknown }).remote;
    if (!Array.isArray(remote)) continue;
    for (const requirement of remote as Record<string, unknown>[]) {
      if (requirement?.regex !== true) continue;
      for (const keyword of ['any_one_of', 'not_any_of', 'whitelist', 'blacklist']) {
        const values = requirement[keyword];
        if (!Array.isArray(values)) continue;
        for (const value of values) {
          if (typeof value !== 'string') continue;
          try {
            pythonRegex(value);
          } catch (error) {
            const reason = error instanceof Error ? error.message : String(error);
            throw new ValidationError(`Invalid regular expression ${pythonRepr(value)} in ${keyword} of ${pythonRepr(requirement.type)}: ${reason}`);
          }
        }
      }
    }
  }
}

/** The whole mapping object of a request (`{"rules": [...], ...}`) against MAPPING_SCHEMA. */
export function validateMapping(mapping: unknown): void {
  const messages = mappingSchemaErrors(mapping);
  if (messages.length) throw new ValidationError(messages.map((message) => `${message}\n`).join(''));
}

/** The messages of every error, in Keystone's order (empty: valid). */
export function mappingSchemaErrors(mapping: unknown): string[] {
  const messages = [...iterErrors(mapping, MAPPING_SCHEMA as unknown as Schema)];
  // Python sorts the errors by str(error): the message, then "\n\nFailed validating…".
  return messages.map((message) => ({ message, key: `${message}\n` })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map((each) => each.message);
}

// ---- a Draft 4 validator for the keywords MAPPING_SCHEMA uses ----------------------------------

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isType(value: unknown, type: string): boolean {
  switch (type) {
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'boolean':
      return typeof value === 'boolean';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'null':
      return value === null;
    default:
      return true;
  }
}

function* iterErrors(instance: unknown, schema: Schema): Generator<string> {
  if (schema === true) return;
  if (schema === false) {
    yield `False schema does not allow ${pythonRepr(instance)}`;
    return;
  }
  // Draft 4: a $ref replaces its siblings.
  const ref = schema.$ref;
  if (typeof ref === 'string') {
    const name = ref.replace('#/definitions/', '');
    yield* iterErrors(instance, DEFINITIONS[name] ?? true);
    return;
  }
  for (const [keyword, value] of Object.entries(schema)) {
    switch (keyword) {
      case 'type': {
        const types = Array.isArray(value) ? (value as string[]) : [value as string];
        if (!types.some((type) => isType(instance, type))) yield `${pythonRepr(instance)} is not of type ${types.map((type) => pythonRepr(type)).join(', ')}`;
        break;
      }
      case 'required':
        if (isObject(instance)) for (const name of value as string[]) if (!(name in instance)) yield `${pythonRepr(name)} is a required property`;
        break;
      case 'properties':
        if (isObject(instance)) {
          for (const [name, subschema] of Object.entries(value as Record<string, Schema>)) {
            if (Object.hasOwn(instance, name)) yield* iterErrors(instance[name], subschema);
          }
        }
        break;
      case 'additionalProperties':
        if (isObject(instance) && value === false) {
          const known = (schema.properties ?? {}) as Record<string, unknown>;
          const extras = Object.keys(instance).filter((name) => !Object.hasOwn(known, name)).sort(pythonStringOrder);
          if (extras.length) {
            yield `Additional properties are not allowed (${extras.map((name) => pythonRepr(name)).join(', ')} ${extras.length === 1 ? 'was' : 'were'} unexpected)`;
          }
        }
        break;
      case 'items':
        if (Array.isArray(instance)) for (const item of instance) yield* iterErrors(item, value as Schema);
        break;
      case 'minItems':
        if (Array.isArray(instance) && instance.length < (value as number)) yield `${pythonRepr(instance)} is too short`;
        break;
      case 'enum': {
        const options = value as unknown[];
        if (!options.some((option) => pythonEquals(option, instance))) yield `${pythonRepr(instance)} is not one of ${pythonRepr(options)}`;
        break;
      }
      case 'oneOf': {
        const subschemas = value as Schema[];
        let firstValid = -1;
        for (let index = 0; index < subschemas.length; index++) {
          if (!hasErrors(instance, subschemas[index]!)) {
            firstValid = index;
            break;
          }
        }
        if (firstValid < 0) {
          yield `${pythonRepr(instance)} is not valid under any of the given schemas`;
        } else {
          const moreValid = subschemas.slice(firstValid + 1).filter((subschema) => !hasErrors(instance, subschema));
          if (moreValid.length) {
            yield `${pythonRepr(instance)} is valid under each of ${[...moreValid, subschemas[firstValid]!].map((each) => pythonRepr(each)).join(', ')}`;
          }
        }
        break;
      }
      // definitions and anything else: no check.
    }
  }
}

function hasErrors(instance: unknown, schema: Schema): boolean {
  return !iterErrors(instance, schema).next().done;
}

/** Python's `==` on JSON values, as jsonschema's enum uses it (True == 1, False == 0). */
function pythonEquals(a: unknown, b: unknown): boolean {
  const number = (value: unknown) => (typeof value === 'boolean' ? Number(value) : value);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((each, index) => pythonEquals(each, b[index]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && pythonEquals(a[key], b[key]));
  }
  return number(a) === number(b);
}

/** Python's order of str: by code point. */
function pythonStringOrder(a: string, b: string): number {
  const left = [...a].map((character) => character.codePointAt(0)!);
  const right = [...b].map((character) => character.codePointAt(0)!);
  for (let index = 0; index < Math.min(left.length, right.length); index++) if (left[index] !== right[index]) return left[index]! - right[index]!;
  return left.length - right.length;
}

// Characters Python's str.isprintable() refuses (repr escapes them).
const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}]|[^\P{Zs} ]/u;

function pythonStringRepr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const character of value) {
    if (character === quote || character === '\\') out += `\\${character}`;
    else if (character === '\n') out += '\\n';
    else if (character === '\r') out += '\\r';
    else if (character === '\t') out += '\\t';
    else if (NOT_PRINTABLE.test(character)) {
      const code = character.codePointAt(0)!;
      out += code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : code <= 0xffff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\U${code.toString(16).padStart(8, '0')}`;
    } else out += character;
  }
  return out + quote;
}

function pythonNumberRepr(value: number): string {
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : value < 0 ? '-inf' : 'nan';
  // A JSON integer is a Python int (all its digits); JSON cannot tell 1.0 from 1, read as the int.
  if (Number.isInteger(value)) return BigInt(value).toString();
  // A float: the shortest round-trip digits, as Python, which writes an exponent below 1e-4 and from 1e16.
  const [digits, exponentText] = value.toExponential().split('e') as [string, string];
  const exponent = Number(exponentText);
  if (exponent < -4 || exponent >= 16) return `${digits}e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
  return String(value);
}

/** A JSON value as Python's repr() prints it (jsonschema quotes instances so in its messages). */
export function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return pythonStringRepr(value);
  if (typeof value === 'number') return pythonNumberRepr(value);
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`;
  if (typeof value === 'object') return `{${Object.entries(value).map(([key, each]) => `${pythonStringRepr(key)}: ${pythonRepr(each)}`).join(', ')}}`;
  return String(value);
}
