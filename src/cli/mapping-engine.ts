// `npm run manage -- mapping_engine`: Keystone's `keystone-manage mapping_engine`, the federation
// mapping engine run offline on a rules file and an assertion file, printing the mapped properties.

import { validateMapping } from '../federation/mapping-rules-schema.ts';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError } from '../config.ts';
import { processAssertion } from '../federation/mapping-engine.ts';
import { MappingEngineError, type Assertion, type MappingRule } from '../federation/mapping-types.ts';
import { ValidationError } from '../support/errors.ts';

export const MAPPING_ENGINE_USAGE = `Usage: npm run manage -- mapping_engine --rules FILE --input FILE [--prefix PREFIX] [--engine-debug]

  --rules FILE     the mapping's rules: JSON, {"rules": [...]} (or the bare list)
  --input FILE     the assertion: one "name: value" a line, a ';' in a value separating the
                   values of a multi-valued attribute, e.g.
                       EMAIL: me@example.com
                       LOGIN: me
                       GROUPS: group1;group2;group3
  --prefix PREFIX  only the attributes whose names start with PREFIX (e.g. ASDF_)
  --engine-debug   print the rules and the assertion used, and the engine's steps

Prints the mapped properties as JSON, as keystone-manage mapping_engine does (group names are not
resolved against the database). Exit 1 when the engine refuses the rules or the assertion.
`;

/** Python's str.splitlines separators. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;

/** json.dumps(value, indent=2) as oslo's jsonutils writes it: non-ASCII escaped. */
export function pythonJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(/[\u0080-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** keystone-manage's normalize_assertion: `name: value` lines, blank lines skipped, PREFIX filtered. */
export function parseAssertionFile(text: string, pathname: string, prefix?: string): Assertion {
  const assertion: Assertion = {};
  const lines = text.trim().split(LINE_BREAK);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon < 0) throw new ConfigError(`assertion file ${pathname} at line ${index + 1} expected 'key: value' but found '${line}' see help for file format`);
    const key = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (!prefix || key.startsWith(prefix)) assertion[key] = value;
  }
  return assertion;
}

/**
 * The rules file's content as the engine's rules: {"rules": [...]} or the bare list. Only what the
 * engine needs is checked here (a list of rules with `local` and `remote` lists, each requirement a
 * `type`); Keystone's whole MAPPING_SCHEMA is the mapping validator's (mapping-rules-schema.ts).
 */
export function rulesOf(content: unknown): MappingRule[] {
  const document = Array.isArray(content) ? { rules: content } : content;
  // Keystone's validate_mapping_structure: the whole rule schema, with its messages.
  validateMapping(document);
  const rules = typeof document === 'object' && document !== null ? (document as { rules?: unknown }).rules : undefined;
  if (!Array.isArray(rules)) throw new ValidationError("'rules' is a required property\n");
  for (const rule of rules) {
    const { local, remote } = (rule ?? {}) as { local?: unknown; remote?: unknown };
    if (!Array.isArray(local) || !Array.isArray(remote)) throw new ValidationError(`${JSON.stringify(rule)}: a rule needs a 'local' and a 'remote' list\n`);
    for (const requirement of remote) {
      if (typeof requirement !== 'object' || requirement === null || typeof (requirement as { type?: unknown }).type !== 'string') {
        throw new ValidationError(`${JSON.stringify(requirement)}: each remote requirement needs a 'type'\n`);
      }
    }
  }
  return rules as MappingRule[];
}

export class MappingEngineUsageError extends Error {}

/** Runs the command; its output goes through `write` (stdout). */
export function mappingEngineCommand(args: string[], write: (text: string) => void): number {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: { rules: { type: 'string' }, input: { type: 'string' }, prefix: { type: 'string' }, 'engine-debug': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new MappingEngineUsageError(error instanceof Error ? error.message : String(error));
  }
  if (values.help) {
    write(MAPPING_ENGINE_USAGE);
    return 0;
  }
  const missing = (['rules', 'input'] as const).filter((name) => !values[name]);
  if (missing.length) throw new MappingEngineUsageError(`the following arguments are required: ${missing.map((name) => `--${name}`).join(', ')}`);

  const rulesPath = values.rules!;
  const inputPath = values.input!;
  let content: unknown;
  try {
    content = JSON.parse(readFile(rulesPath));
  } catch (error) {
    if (error instanceof SyntaxError) throw new ConfigError(`Error while parsing rules ${rulesPath}: ${error.message}`);
    throw error;
  }
  const rules = rulesOf(content);
  const assertion = parseAssertionFile(readFile(inputPath), inputPath, values.prefix);
  const engineDebug = values['engine-debug'] === true;
  if (engineDebug) {
    write(`Using Rules:\n${pythonJson(Array.isArray(content) ? { rules: content } : content)}\n`);
    write(`Using Assertion:\n${pythonJson(assertion)}\n`);
  }
  // Keystone's debug log lines go to stdout too.
  const mapped = processAssertion('mapping_engine', rules, assertion, engineDebug ? (line) => write(`DEBUG keystone.federation.utils [-] ${line}\n`) : undefined);
  write(`${pythonJson(mapped)}\n`);
  return 0;
}

function readFile(pathname: string): string {
  try {
    return fs.readFileSync(pathname, 'utf8');
  } catch (error) {
    throw new ConfigError(`Error while opening file ${pathname}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The message of a failure of the engine, for the command's stderr. */
export function mappingEngineFailure(error: unknown): string | undefined {
  if (error instanceof ValidationError) return `ValidationError: ${error.message.trimEnd()}`;
  if (error instanceof MappingEngineError) return `${error.pythonException}: ${error.message}`;
  return undefined;
}
