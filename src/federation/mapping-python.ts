// The pieces of Python that Keystone's mapping engine leans on, reproduced so the engine gives the
// same answers: str() of a list (what `{0}` becomes for a multi-valued match), ast.literal_eval (how
// `groups` and `group_ids` read it back), str.format (the direct maps), re.search (regex
// requirements), urllib.parse.quote (the ephemeral user's id) and the repr of a dict (in an error
// text). Each covers what mapping rules and assertions can produce; the rest is named where it is
// refused.

import { MappingEngineError, type MappedLiteral } from './mapping-types.ts';

// ---------------------------------------------------------------------------------------------
// repr

const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/** Python's repr() of a str. */
export function pyStrRepr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const char of value) {
    const code = char.codePointAt(0)!;
    if (char === quote || char === '\\') out += `\\${char}`;
    else if (char === '\t') out += '\\t';
    else if (char === '\n') out += '\\n';
    else if (char === '\r') out += '\\r';
    else if (code < 0x20 || code === 0x7f) out += `\\x${hex(code, 2)}`;
    else if (code < 0x7f || !NOT_PRINTABLE.test(char)) out += char;
    else if (code <= 0xff) out += `\\x${hex(code, 2)}`;
    else if (code <= 0xffff) out += `\\u${hex(code, 4)}`;
    else out += `\\U${hex(code, 8)}`;
  }
  return out + quote;
}

/** Python's repr() of a JSON-like value (str(list), the repr of a dict). */
export function pyRepr(value: unknown): string {
  if (typeof value === 'string') return pyStrRepr(value);
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : pyFloatRepr(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(', ')}]`;
  if (typeof value === 'object') {
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([key, item]) => `${pyStrRepr(key)}: ${pyRepr(item)}`)
      .join(', ')}}`;
  }
  return String(value);
}

function pyFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf';
  const text = String(value);
  // JS writes 1e+21 where Python writes 1e+21 too; both switch to exponents at 1e16 / 1e-5.
  return text.includes('e') || text.includes('.') ? text.replace(/e([+-])(\d)$/, 'e$10$2') : `${text}.0`;
}

// ---------------------------------------------------------------------------------------------
// ast.literal_eval

/** A Python literal as literal_eval builds it (tuples and sets are told apart from lists). */
export type PyLiteral =
  | { kind: 'str'; value: string }
  | { kind: 'int'; value: bigint }
  | { kind: 'float'; value: number }
  | { kind: 'bool'; value: boolean }
  | { kind: 'none' }
  | { kind: 'list' | 'tuple' | 'set'; items: PyLiteral[] }
  | { kind: 'dict'; entries: [PyLiteral, PyLiteral][] };

/** literal_eval refused the text (SyntaxError or ValueError: Keystone then keeps the text as is). */
class NotALiteral extends Error {}

/**
 * Python's ast.literal_eval(text) for the literals a mapping can meet: str (all prefixes but b and
 * f; escapes; implicit concatenation), int, float, True/False/None, lists, tuples, dicts, sets and
 * unary signs. Returns undefined where Python raises ValueError or SyntaxError. Bytes and complex
 * literals (valid in Python) are refused here too. A set or dict key that is not hashable raises
 * TypeError in Python, which Keystone does not catch: MappingEngineError.
 */
export function literalEval(text: string): PyLiteral | undefined {
  try {
    // literal_eval strips leading spaces and tabs (Python 3.10+).
    const parser = new LiteralParser(text.replace(/^[ \t]+/, ''));
    return parser.parse();
  } catch (error) {
    if (error instanceof NotALiteral) return undefined;
    throw error;
  }
}

const SIMPLE_ESCAPES: Record<string, string> = { '\\': '\\', "'": "'", '"': '"', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };

class LiteralParser {
  private pos = 0;
  private depth = 0;
  constructor(private readonly text: string) {}

  parse(): PyLiteral {
    const value = this.expression();
    this.skip();
    if (this.pos < this.text.length) throw new NotALiteral();
    return value;
  }

  /** Skips blanks and comments; newlines and backslash continuations only inside brackets. */
  private skip(): void {
    for (;;) {
      const char = this.text[this.pos];
      if (char === ' ' || char === '\t' || char === '\f') this.pos++;
      else if (char === '#') while (this.pos < this.text.length && this.text[this.pos] !== '\n') this.pos++;
      else if (char === '\\' && (this.text[this.pos + 1] === '\n' || this.text.startsWith('\r\n', this.pos + 1))) this.pos += this.text[this.pos + 1] === '\n' ? 2 : 3;
      else if ((char === '\n' || char === '\r') && this.depth > 0) this.pos++;
      else if ((char === '\n' || char === '\r') && this.text.slice(this.pos).trim() === '') this.pos = this.text.length;
      else return;
    }
  }

  private peek(): string | undefined {
    this.skip();
    return this.text[this.pos];
  }

  private expect(char: string): void {
    if (this.peek() !== char) throw new NotALiteral();
    this.pos++;
  }

  /** A tuple display without brackets ("1, 2") is an expression too. */
  private expression(): PyLiteral {
    const first = this.atom();
    if (this.peek() !== ',') return first;
    const items = [first];
    while (this.peek() === ',') {
      this.pos++;
      const next = this.peek();
      if (next === undefined || next === ')' || next === ']' || next === '}' || next === ':') break;
      items.push(this.atom());
    }
    return { kind: 'tuple', items };
  }

  private atom(): PyLiteral {
    const char = this.peek();
    if (char === undefined) throw new NotALiteral();
    if (char === '[') return this.sequence('[', ']', 'list');
    if (char === '(') return this.parenthesised();
    if (char === '{') return this.braces();
    if (char === '+' || char === '-') {
      this.pos++;
      const operand = this.atom();
      if (operand.kind === 'int') return { kind: 'int', value: char === '-' ? -operand.value : operand.value };
      if (operand.kind === 'float') return { kind: 'float', value: char === '-' ? -operand.value : operand.value };
      throw new NotALiteral();
    }
    if (/[0-9.]/.test(char)) return this.number();
    if (/[A-Za-z_]/.test(char) || char.charCodeAt(0) > 0x7f) {
      const string = this.strings();
      if (string) return string;
      const name = /^[\p{L}\p{Nl}_][\p{L}\p{Nl}\p{Mn}\p{Mc}\p{Nd}\p{Pc}]*/u.exec(this.text.slice(this.pos))?.[0];
      if (!name) throw new NotALiteral();
      this.pos += name.length;
      if (name === 'True' || name === 'False') return { kind: 'bool', value: name === 'True' };
      if (name === 'None') return { kind: 'none' };
      throw new NotALiteral();
    }
    if (char === "'" || char === '"') return this.strings()!;
    throw new NotALiteral();
  }

  private parenthesised(): PyLiteral {
    this.pos++;
    this.depth++;
    if (this.peek() === ')') {
      this.pos++;
      this.depth--;
      return { kind: 'tuple', items: [] };
    }
    const value = this.expression();
    this.expect(')');
    this.depth--;
    return value;
  }

  private sequence(open: string, close: string, kind: 'list' | 'set', first?: PyLiteral): PyLiteral {
    if (first === undefined) {
      this.expect(open);
      this.depth++;
    }
    const items: PyLiteral[] = first ? [first] : [];
    if (first && this.peek() === ',') this.pos++;
    while (this.peek() !== close) {
      items.push(this.atom());
      if (this.peek() === ',') this.pos++;
      else if (this.peek() !== close) throw new NotALiteral();
    }
    this.pos++;
    this.depth--;
    if (kind === 'set') for (const item of items) hashKey(item);
    return { kind, items };
  }

  private braces(): PyLiteral {
    this.pos++;
    this.depth++;
    if (this.peek() === '}') {
      this.pos++;
      this.depth--;
      return { kind: 'dict', entries: [] };
    }
    const first = this.atom();
    if (this.peek() !== ':') return this.sequence('{', '}', 'set', first);
    const entries: [PyLiteral, PyLiteral][] = [];
    let key = first;
    for (;;) {
      this.expect(':');
      entries.push([key, this.atom()]);
      if (this.peek() === ',') this.pos++;
      if (this.peek() === '}') break;
      key = this.atom();
    }
    this.pos++;
    this.depth--;
    for (const [entryKey] of entries) hashKey(entryKey);
    // Later keys win, in the first key's place (a dict display).
    const merged = new Map<string, [PyLiteral, PyLiteral]>();
    for (const [entryKey, value] of entries) {
      const hash = hashKey(entryKey);
      const existing = merged.get(hash);
      merged.set(hash, [existing ? existing[0] : entryKey, value]);
    }
    return { kind: 'dict', entries: [...merged.values()] };
  }

  private number(): PyLiteral {
    const rest = this.text.slice(this.pos);
    const match =
      /^0[xX](?:_?[0-9a-fA-F])+|^0[oO](?:_?[0-7])+|^0[bB](?:_?[01])+/.exec(rest) ??
      /^(?:(?:[0-9](?:_?[0-9])*)?\.[0-9](?:_?[0-9])*|[0-9](?:_?[0-9])*\.?)(?:[eE][+-]?[0-9](?:_?[0-9])*)?/.exec(rest);
    if (!match) throw new NotALiteral();
    const token = match[0];
    const after = rest[token.length];
    // Complex (j) and anything glued to the number (1abc) are refused.
    if (after !== undefined && /[\p{L}\p{N}_.]/u.test(after)) throw new NotALiteral();
    this.pos += token.length;
    const digits = token.replace(/_/g, '');
    if (/^0[xXoObB]/.test(digits)) return { kind: 'int', value: BigInt(digits) };
    if (/[.eE]/.test(digits)) return { kind: 'float', value: Number(digits) };
    // "0123" is a SyntaxError in Python 3; "00" is fine.
    if (/^0+[1-9]/.test(digits)) throw new NotALiteral();
    return { kind: 'int', value: BigInt(digits) };
  }

  /** One or more adjacent string literals (implicit concatenation), or undefined if none starts here. */
  private strings(): PyLiteral | undefined {
    let value: string | undefined;
    for (;;) {
      this.skip();
      const prefix = /^([rRuU]|[rR]?)(?=['"])/.exec(this.text.slice(this.pos));
      const bytesOrF = /^(?:[bBfF]|[bB][rR]|[rR][bB]|[fF][rR]|[rR][fF])(?=['"])/.exec(this.text.slice(this.pos));
      if (bytesOrF) throw new NotALiteral();
      if (!prefix) break;
      this.pos += prefix[0].length;
      const part = this.string(/[rR]/.test(prefix[0]));
      value = (value ?? '') + part;
    }
    return value === undefined ? undefined : { kind: 'str', value };
  }

  private string(raw: boolean): string {
    const quote = this.text[this.pos]!;
    const triple = this.text.startsWith(quote.repeat(3), this.pos);
    const delimiter = triple ? quote.repeat(3) : quote;
    this.pos += delimiter.length;
    let out = '';
    for (;;) {
      if (this.pos >= this.text.length) throw new NotALiteral();
      if (this.text.startsWith(delimiter, this.pos)) {
        this.pos += delimiter.length;
        return out;
      }
      const char = this.text[this.pos]!;
      if ((char === '\n' || char === '\r') && !triple) throw new NotALiteral();
      if (char !== '\\') {
        out += char;
        this.pos++;
        continue;
      }
      const next = this.text[this.pos + 1];
      if (next === undefined) throw new NotALiteral();
      if (raw) {
        // A raw string keeps the backslash; it still hides the next character from the delimiter.
        out += char + next;
        this.pos += 2;
        continue;
      }
      this.pos += 2;
      if (next === '\n') continue;
      if (next === '\r') {
        if (this.text[this.pos] === '\n') this.pos++;
        continue;
      }
      const simple = SIMPLE_ESCAPES[next];
      if (simple !== undefined) {
        out += simple;
        continue;
      }
      if (/[0-7]/.test(next)) {
        const octal = /^[0-7]{0,2}/.exec(this.text.slice(this.pos))![0];
        this.pos += octal.length;
        out += String.fromCodePoint(parseInt(next + octal, 8));
        continue;
      }
      const width = next === 'x' ? 2 : next === 'u' ? 4 : next === 'U' ? 8 : 0;
      if (width) {
        const digits = this.text.slice(this.pos, this.pos + width);
        if (!new RegExp(`^[0-9a-fA-F]{${width}}$`).test(digits)) throw new NotALiteral();
        const code = parseInt(digits, 16);
        if (code > 0x10ffff) throw new NotALiteral();
        this.pos += width;
        out += String.fromCodePoint(code);
        continue;
      }
      // \N{name} needs Unicode's name table: refused (Python accepts it).
      if (next === 'N') throw new NotALiteral();
      // An unknown escape keeps its backslash (a DeprecationWarning in Python).
      out += char + next;
    }
  }
}

/** Python's hash identity of a literal (equal values, equal keys); TypeError for unhashable ones. */
export function hashKey(value: PyLiteral): string {
  switch (value.kind) {
    case 'str':
      return `s${JSON.stringify(value.value)}`;
    // 1 == 1.0 == True in Python.
    case 'int':
      return `n${value.value}`;
    case 'float':
      return Number.isInteger(value.value) && Number.isSafeInteger(value.value) ? `n${BigInt(value.value)}` : `n${value.value}`;
    case 'bool':
      return `n${value.value ? 1 : 0}`;
    case 'none':
      return 'None';
    case 'tuple':
      return `(${value.items.map(hashKey).join(',')})`;
    default:
      throw new MappingEngineError(`unhashable type: '${value.kind}'`, 'TypeError');
  }
}

/** A literal as Keystone's JSON shows it (oslo's jsonutils: tuples and sets as lists). */
export function literalToJson(value: PyLiteral): MappedLiteral {
  switch (value.kind) {
    case 'str':
      return value.value;
    case 'int':
      return Number(value.value);
    case 'float':
      return value.value;
    case 'bool':
      return value.value;
    case 'none':
      return null;
    case 'list':
    case 'tuple':
    case 'set':
      return value.items.map(literalToJson);
    case 'dict':
      return Object.fromEntries(value.entries.map(([key, item]) => [jsonKey(key), literalToJson(item)]));
  }
}

function jsonKey(key: PyLiteral): string {
  switch (key.kind) {
    case 'str':
      return key.value;
    case 'bool':
      return key.value ? 'true' : 'false';
    case 'none':
      return 'null';
    case 'int':
    case 'float':
      return String(literalToJson(key));
    default:
      throw new MappingEngineError('keys must be str, int, float, bool or None', 'TypeError');
  }
}

// ---------------------------------------------------------------------------------------------
// str.format

/** A positional argument of str.format: a string, or the list a multi-valued match is. */
export type FormatArgument = string | string[];

/**
 * Python's `template.format(*args)` for mapping templates: `{}`, `{N}`, `{N[i]}`, `{{`/`}}`,
 * conversions `!s`/`!r`/`!a` and, for strings, the fill/align/width/precision format spec. An index
 * out of range raises IndexError (`onIndexError` is called: Keystone's DirectMappingError);
 * the other Python errors (KeyError, ValueError, TypeError, AttributeError) are MappingEngineErrors.
 */
export function pyFormat(template: string, args: readonly FormatArgument[], onIndexError: () => Error): string {
  let out = '';
  let auto: number | undefined;
  let manual = false;
  let i = 0;
  while (i < template.length) {
    const char = template[i]!;
    if (char === '}') {
      if (template[i + 1] !== '}') throw new MappingEngineError("Single '}' encountered in format string", 'ValueError');
      out += '}';
      i += 2;
      continue;
    }
    if (char !== '{') {
      out += char;
      i++;
      continue;
    }
    if (template[i + 1] === '{') {
      out += '{';
      i += 2;
      continue;
    }
    // The replacement field, up to its matching '}' (a format spec may nest one level of fields).
    let depth = 1;
    let j = i + 1;
    while (j < template.length && depth > 0) {
      if (template[j] === '{') depth++;
      else if (template[j] === '}') depth--;
      if (depth > 0) j++;
    }
    if (depth > 0) throw new MappingEngineError("expected '}' before end of string", 'ValueError');
    const field = template.slice(i + 1, j);
    i = j + 1;
    // field_name[!conversion][:format_spec]; '[' … ']' in the field name may hold ':' or '!'.
    let end = 0;
    while (end < field.length && field[end] !== '!' && field[end] !== ':') {
      if (field[end] === '[') {
        const close = field.indexOf(']', end);
        if (close < 0) throw new MappingEngineError("Missing ']' in format string", 'ValueError');
        end = close;
      }
      end++;
    }
    const name = field.slice(0, end);
    let conversion: string | undefined;
    let spec = '';
    let rest = field.slice(end);
    if (rest.startsWith('!')) {
      conversion = rest[1];
      rest = rest.slice(2);
      if (conversion === undefined || (rest !== '' && !rest.startsWith(':'))) throw new MappingEngineError('expected \':\' after conversion specifier', 'ValueError');
    }
    if (rest.startsWith(':')) spec = rest.slice(1);
    if (spec.includes('{')) throw new MappingEngineError('nested replacement fields in a format spec are not supported', 'ValueError');

    const first = /^[^.[]*/.exec(name)![0];
    let index: number;
    if (first === '') {
      if (manual) throw new MappingEngineError('cannot switch from manual field specification to automatic field numbering', 'ValueError');
      auto = (auto ?? -1) + 1;
      index = auto;
    } else if (/^[0-9]+$/.test(first)) {
      if (auto !== undefined) throw new MappingEngineError('cannot switch from automatic field numbering to manual field specification', 'ValueError');
      manual = true;
      index = Number(first);
    } else {
      // A keyword field: format() got none.
      throw new MappingEngineError(pyStrRepr(first), 'KeyError');
    }
    if (index >= args.length) throw onIndexError();
    let value: string | string[] = args[index]!;
    // Attribute and item accessors after the argument.
    let accessors = name.slice(first.length);
    while (accessors) {
      if (accessors.startsWith('.')) throw new MappingEngineError('attribute access in a format field', 'AttributeError');
      const item = /^\[([^\]]*)\]/.exec(accessors);
      if (!item) throw new MappingEngineError('Only \'.\' or \'[\' may follow \']\' in format field specifier', 'ValueError');
      accessors = accessors.slice(item[0].length);
      const key = item[1]!;
      if (!/^[0-9]+$/.test(key)) throw new MappingEngineError(`${Array.isArray(value) ? 'list' : 'string'} indices must be integers`, 'TypeError');
      const position = Number(key);
      if (Array.isArray(value)) {
        if (position >= value.length) throw onIndexError();
        value = value[position]!;
      } else {
        const chars = [...value];
        if (position >= chars.length) throw onIndexError();
        value = chars[position]!;
      }
    }
    let text: string;
    let isString = !Array.isArray(value);
    if (conversion === undefined || conversion === 's') text = Array.isArray(value) ? pyRepr(value) : value;
    else if (conversion === 'r') text = pyRepr(value);
    else if (conversion === 'a') text = pyAscii(pyRepr(value));
    else throw new MappingEngineError(`Unknown conversion specifier ${conversion}`, 'ValueError');
    if (conversion !== undefined) isString = true;
    out += applySpec(text, spec, isString);
  }
  return out;
}

function pyAscii(repr: string): string {
  let out = '';
  for (const char of repr) {
    const code = char.codePointAt(0)!;
    out += code < 0x80 ? char : code <= 0xff ? `\\x${hex(code, 2)}` : code <= 0xffff ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
  }
  return out;
}

/** str.__format__'s spec: [[fill]align][0][width][.precision][s]. */
function applySpec(text: string, spec: string, isString: boolean): string {
  if (spec === '') return text;
  if (!isString) throw new MappingEngineError('unsupported format string passed to list.__format__', 'TypeError');
  const match = /^(?:(.)?([<>^=]))?([+\- ])?(z)?(#)?(0)?([0-9]*)([,_])?(?:\.([0-9]+))?([a-zA-Z%])?$/su.exec(spec);
  if (!match) throw new MappingEngineError('Invalid format specifier', 'ValueError');
  const [, fillChar, alignChar, sign, , alternate, zero, widthText, grouping, precisionText, type] = match;
  if (type !== undefined && type !== 's') throw new MappingEngineError(`Unknown format code '${type}' for object of type 'str'`, 'ValueError');
  if (sign !== undefined) throw new MappingEngineError('Sign not allowed in string format specifier', 'ValueError');
  if (alternate !== undefined) throw new MappingEngineError('Alternate form (#) not allowed in string format specifier', 'ValueError');
  if (grouping !== undefined) throw new MappingEngineError(`Cannot specify '${grouping}' with 's'.`, 'ValueError');
  if (alignChar === '=') throw new MappingEngineError("'=' alignment not allowed in string format specifier", 'ValueError');
  let chars = [...text];
  if (precisionText !== undefined) chars = chars.slice(0, Number(precisionText));
  const width = widthText ? Number(widthText) : 0;
  const fill = fillChar ?? (zero !== undefined && alignChar === undefined ? '0' : ' ');
  const align = alignChar ?? '<';
  const padding = Math.max(0, width - chars.length);
  const body = chars.join('');
  if (align === '>') return fill.repeat(padding) + body;
  if (align === '^') return fill.repeat(Math.floor(padding / 2)) + body + fill.repeat(padding - Math.floor(padding / 2));
  return body + fill.repeat(padding);
}

// ---------------------------------------------------------------------------------------------
// re.search

const WORD = '\\p{L}\\p{N}_';
const SYNTAX = new Set([...'^$\\.*+?()[]{}|/']);
const PY_FLAGS = new Set([...'aiLmsux']);

/**
 * A Python regular expression (str pattern, re.search semantics) as a JS RegExp with the same
 * meaning: Unicode \w \d \b, `$` that also matches before a final newline, `.` that stops only at
 * \n, (?P<name>…), (?P=name), \A, \Z, literal `{` and `]`, Python's escapes, leading global flags
 * (?aimsu). Throws MappingEngineError('re.error') for patterns Python refuses and for the few it
 * accepts that are not translated (verbose mode, \N{…}, conditionals, atomic groups, possessive
 * quantifiers).
 */
export function pythonRegex(pattern: string): RegExp {
  let flags = '';
  let ascii = false;
  let multiline = false;
  let dotAll = false;
  let out = '';
  let i = 0;
  let inClass = false;
  let classStart = false;
  const refuse = (why: string): never => {
    throw new MappingEngineError(`${why} in regular expression ${pyStrRepr(pattern)}`, 're.error');
  };
  // Global flags must open the pattern (Python 3.11 refuses them elsewhere).
  for (;;) {
    const global = /^\(\?([aiLmsux]+)\)/.exec(pattern.slice(i));
    if (!global) break;
    for (const flag of global[1]!) {
      if (flag === 'x') refuse('verbose mode (?x) is not supported');
      if (flag === 'L') refuse('bad inline flag: cannot use \'L\' flag with a str pattern');
      if (flag === 'i' && !flags.includes('i')) flags += 'i';
      if (flag === 'm') multiline = true;
      if (flag === 's') dotAll = true;
      if (flag === 'a') ascii = true;
    }
    i += global[0].length;
  }
  const word = ascii ? 'A-Za-z0-9_' : WORD;
  const digit = ascii ? '0-9' : '\\p{Nd}';
  const wordClass = `[${word}]`;
  const boundary = `(?:(?<=${wordClass})(?!${wordClass})|(?<!${wordClass})(?=${wordClass}))`;
  const notBoundary = `(?:(?<=${wordClass})(?=${wordClass})|(?<!${wordClass})(?!${wordClass}))`;
  const groupNames = new Set<string>();
  while (i < pattern.length) {
    const char = pattern[i]!;
    if (inClass) {
      if (char === ']' && !classStart) {
        out += ']';
        inClass = false;
        i++;
        continue;
      }
      classStart = false;
      if (char === '\\') {
        const [text, length] = classEscape(pattern, i + 1, digit, word, refuse);
        out += text;
        i += 1 + length;
        continue;
      }
      out += char === ']' || char === '[' ? `\\${char}` : char;
      i++;
      continue;
    }
    if (char === '[') {
      inClass = true;
      out += '[';
      i++;
      if (pattern[i] === '^') {
        out += '^';
        i++;
      }
      classStart = true;
      continue;
    }
    if (char === '\\') {
      const next = pattern[i + 1];
      if (next === undefined) refuse('bad escape (end of pattern)');
      i += 2;
      if (next === 'A') out += '(?<![\\s\\S])';
      else if (next === 'Z') out += '(?![\\s\\S])';
      else if (next === 'b') out += boundary;
      else if (next === 'B') out += notBoundary;
      else if (next === 'd') out += ascii ? '[0-9]' : '\\p{Nd}';
      else if (next === 'D') out += ascii ? '[^0-9]' : '\\P{Nd}';
      else if (next === 'w') out += wordClass;
      else if (next === 'W') out += `[^${word}]`;
      else if (next === 's') out += '[ \\t\\n\\r\\f\\v\\x1c-\\x1f\\x85\\p{Z}]';
      else if (next === 'S') out += '[^ \\t\\n\\r\\f\\v\\x1c-\\x1f\\x85\\p{Z}]';
      else if (/[1-9]/.test(next!)) {
        // sre_parse: three octal digits are a character, otherwise one or two digits name a group.
        const second = pattern[i];
        if (second !== undefined && /[0-9]/.test(second) && /[0-7]/.test(next!) && /[0-7]/.test(second) && /[0-7]/.test(pattern[i + 1] ?? '')) {
          const code = parseInt(pattern.slice(i - 1, i + 2), 8);
          if (code > 0o377) refuse(`octal escape value \\${pattern.slice(i - 1, i + 2)} outside of range 0-0o377`);
          out += escapeLiteral(String.fromCodePoint(code));
          i += 2;
        } else {
          const reference = second !== undefined && /[0-9]/.test(second) ? next! + second : next!;
          out += `(?:\\${reference})`;
          i += reference.length - 1;
        }
      } else {
        const [text, length] = commonEscape(pattern, i - 2, false, refuse);
        out += text;
        i += length - 2;
      }
      continue;
    }
    if (char === '(') {
      if (pattern[i + 1] !== '?') {
        out += '(';
        i++;
        continue;
      }
      const rest = pattern.slice(i);
      const named = /^\(\?P<([^>]*)>/.exec(rest);
      if (named) {
        if (!/^[\p{L}_][\p{L}\p{N}_]*$/u.test(named[1]!)) refuse(`bad character in group name ${pyStrRepr(named[1]!)}`);
        groupNames.add(named[1]!);
        out += `(?<${named[1]}>`;
        i += named[0].length;
        continue;
      }
      const backReference = /^\(\?P=([^)]*)\)/.exec(rest);
      if (backReference) {
        if (!groupNames.has(backReference[1]!)) refuse(`unknown group name ${pyStrRepr(backReference[1]!)}`);
        out += `\\k<${backReference[1]}>`;
        i += backReference[0].length;
        continue;
      }
      const comment = /^\(\?#[^)]*\)/.exec(rest);
      if (comment) {
        i += comment[0].length;
        continue;
      }
      if (/^\(\?(?::|=|!|<=|<!)/.test(rest)) {
        const opener = /^\(\?(?::|=|!|<=|<!)/.exec(rest)![0];
        out += opener;
        i += opener.length;
        continue;
      }
      const scoped = /^\(\?([aimsux]*)(?:-([imsx]+))?:/.exec(rest);
      if (scoped) {
        if (`${scoped[1]}${scoped[2] ?? ''}`.includes('x')) refuse('verbose mode (?x) is not supported');
        // JS modifiers take i; Python's `.`, `^` and `$` are rewritten here, so scoped s and m are not.
        if (/[aums]/.test(`${scoped[1]}${scoped[2] ?? ''}`)) refuse('scoped flags other than i are not supported');
        out += scoped[0];
        i += scoped[0].length;
        continue;
      }
      if (/^\(\?[aiLmsux]+\)/.test(rest)) refuse('global flags not at the start of the expression');
      refuse(`unknown extension ${pyStrRepr(rest.slice(0, 3))}`);
    }
    if (char === '{') {
      const quantifier = /^\{([0-9]*)(?:(,)([0-9]*))?\}/.exec(pattern.slice(i));
      if (quantifier && (quantifier[1] !== '' || quantifier[2] !== undefined)) {
        const min = quantifier[1] || '0';
        out += quantifier[2] === undefined ? `{${min}}` : `{${min},${quantifier[3]}}`;
        i += quantifier[0].length;
        if (pattern[i] === '+') refuse('possessive quantifiers are not supported');
        continue;
      }
      out += '\\{';
      i++;
      continue;
    }
    if (char === '}') {
      out += '\\}';
      i++;
      continue;
    }
    if (char === '.') {
      out += dotAll ? '[\\s\\S]' : '[^\\n]';
      i++;
      continue;
    }
    if (char === '$') {
      out += multiline ? '(?=\\n|(?![\\s\\S]))' : '(?=\\n?(?![\\s\\S]))';
      i++;
      continue;
    }
    if (char === '^') {
      out += multiline ? '(?:(?<![\\s\\S])|(?<=\\n))' : '(?<![\\s\\S])';
      i++;
      continue;
    }
    if ((char === '+' || char === '*' || char === '?' || char === '}') && pattern[i + 1] === '+' && /[+*?}]/.test(char)) {
      refuse('possessive quantifiers are not supported');
    }
    if (char === '/') {
      out += '\\/';
      i++;
      continue;
    }
    out += char;
    i++;
  }
  if (inClass) refuse('unterminated character set');
  try {
    return new RegExp(out, `${flags}u`);
  } catch (error) {
    return refuse(error instanceof Error ? error.message : String(error));
  }
}

function escapeLiteral(char: string, inClass = false): string {
  if (SYNTAX.has(char) || (inClass && char === '-')) return `\\${char}`;
  const code = char.codePointAt(0)!;
  return code < 0x20 ? `\\x${hex(code, 2)}` : char;
}

/** The escapes a pattern shares with a character class: \n, \x41, \u00e9, \. … */
function commonEscape(pattern: string, at: number, inClass: boolean, refuse: (why: string) => never): [string, number] {
  const next = pattern[at + 1]!;
  const simple: Record<string, string> = { a: '\\x07', f: '\\f', n: '\\n', r: '\\r', t: '\\t', v: '\\v' };
  if (simple[next]) return [simple[next]!, 2];
  if (next === '0') {
    const octal = /^[0-7]{0,2}/.exec(pattern.slice(at + 2))![0];
    return [`\\x${hex(parseInt(`0${octal}`, 8), 2)}`, 2 + octal.length];
  }
  const width = next === 'x' ? 2 : next === 'u' ? 4 : next === 'U' ? 8 : 0;
  if (width) {
    const digits = pattern.slice(at + 2, at + 2 + width);
    if (!new RegExp(`^[0-9a-fA-F]{${width}}$`).test(digits)) refuse(`incomplete escape \\${next}${digits}`);
    const code = parseInt(digits, 16);
    if (code > 0x10ffff) refuse(`bad escape \\${next}${digits}`);
    return [`\\u{${code.toString(16)}}`, 2 + width];
  }
  if (next === 'N') refuse('\\N{…} escapes are not supported');
  if (/[A-Za-z0-9]/.test(next)) refuse(`bad escape \\${next}`);
  // Any other escaped character stands for itself.
  const char = String.fromCodePoint(pattern.codePointAt(at + 1)!);
  return [escapeLiteral(char, inClass), 1 + char.length];
}

function classEscape(pattern: string, at: number, digit: string, word: string, refuse: (why: string) => never): [string, number] {
  const next = pattern[at];
  if (next === undefined) refuse('bad escape (end of pattern)');
  if (next === 'd') return [digit, 1];
  if (next === 'w') return [word, 1];
  if (next === 's') return [' \\t\\n\\r\\f\\v\\x1c-\\x1f\\x85\\p{Z}', 1];
  if (next === 'D' || next === 'W' || next === 'S') return refuse(`\\${next} inside a character set is not supported`);
  if (next === 'b') return ['\\x08', 1];
  if (/[1-7]/.test(next!)) {
    const octal = /^[0-7]{1,3}/.exec(pattern.slice(at))![0];
    return [`\\x${hex(parseInt(octal, 8) & 0xff, 2)}`, octal.length];
  }
  const [text, length] = commonEscape(pattern, at - 1, true, refuse);
  return [text, length - 1];
}

// ---------------------------------------------------------------------------------------------
// urllib.parse.quote

/** Python's urllib.parse.quote(value) (safe='/'): UTF-8, upper-case %XX, A-Z a-z 0-9 _.-~/ kept. */
export function pyQuote(value: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(value)) {
    const char = String.fromCharCode(byte);
    out += /[A-Za-z0-9_.\-~/]/.test(char) ? char : `%${hex(byte, 2).toUpperCase()}`;
  }
  return out;
}
