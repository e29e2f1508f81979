import { randomChunk } from './random.ts';

/** What a token is scoped to; each variant is one Keystone payload version (§4.5). */
export type TokenPayloadScope =
  | { type: 'unscoped' }
  | { type: 'domain'; domainId: string }
  | { type: 'project'; projectId: string }
  | { type: 'system' }
  | { type: 'trust'; projectId: string; trustId: string }
  | { type: 'application_credential'; projectId: string; applicationCredentialId: string }
  | { type: 'oauth1'; projectId: string; accessTokenId: string }
  | { type: 'federated_unscoped'; groupIds: string[]; identityProviderId: string; protocolId: string }
  | { type: 'federated_project'; projectId: string; groupIds: string[]; identityProviderId: string; protocolId: string }
  | { type: 'federated_domain'; domainId: string; groupIds: string[]; identityProviderId: string; protocolId: string };

export interface TokenPayload {
  userId: string;
  /** Method names; decoding lists them highest bit first, as Keystone does. */
  methods: string[];
  /** Seconds since the epoch, whole seconds. */
  expiresAt: number;
  /** One audit id, or two for a re-scoped token (its own, then its chain's). */
  auditIds: string[];
  scope: TokenPayloadScope;
}

/** An MFA auth receipt's payload (Keystone's receipt formatter). */
export interface ReceiptPayload {
  userId: string;
  /** Method names used so far; decoding lists them highest bit first. */
  methods: string[];
  /** Seconds since the epoch, whole seconds. */
  expiresAt: number;
}

/** The decrypted bytes are not a payload Keystone 22 could have made. */
export class InvalidTokenPayloadError extends Error {
  override name = 'InvalidTokenPayloadError';
}

export interface PayloadCodecOptions {
  /** `[auth] methods` in configured order: the order fixes each method's bit. */
  methods: string[];
  /** `[identity] default_domain_id`: the one non-UUID domain id a v1 payload may carry. */
  defaultDomainId: string;
}

const VERSION = {
  unscoped: 0,
  domain: 1,
  project: 2,
  trust: 3,
  federated_unscoped: 4,
  federated_project: 5,
  federated_domain: 6,
  oauth1: 7,
  system: 8,
  application_credential: 9,
} as const;

// Keystone gives these bits to methods that are never listed in [auth] methods.
const FIXED_METHOD_BITS: ReadonlyArray<readonly [string, number]> = [
  ['ec2credential', 2 ** 32],
  ['oauth2_credential', 2 ** 33],
];

const SYSTEM_ALL = 'all';
const AUDIT_ID = /^[A-Za-z0-9_-]{22}$/;
// datetime's range (years 1..9999): Python cannot render expiry outside it.
const MIN_EXPIRES_AT = -62135596800;
const MAX_EXPIRES_AT = 253402300799;

/** A random audit id: 16 bytes as 22 characters of unpadded base64url. */
export function newAuditId(): string {
  return randomChunk(16).toString('base64url');
}

/** Encodes and decodes Keystone's msgpack token payloads, byte-compatible with Python msgpack ≥ 1.0. */
export class PayloadCodec {
  private readonly methodBits: ReadonlyArray<readonly [string, number]>;
  private readonly defaultDomainId: string;

  constructor(options: PayloadCodecOptions) {
    if (options.methods.length > 32) throw new RangeError('at most 32 [auth] methods fit below the fixed method bits');
    const configured = options.methods.map((name, index) => [name, 2 ** index] as const);
    this.methodBits = [...configured, ...FIXED_METHOD_BITS].sort((a, b) => b[1] - a[1]);
    this.defaultDomainId = options.defaultDomainId;
  }

  encode(payload: TokenPayload): Buffer {
    const writer = new MsgpackWriter();
    const { scope } = payload;
    const methods = this.methodsToInteger(payload.methods);
    switch (scope.type) {
      case 'unscoped':
        writer.arrayHeader(5).int(VERSION.unscoped);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        break;
      case 'domain':
        writer.arrayHeader(6).int(VERSION.domain);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        this.writeBareDomainId(writer, scope.domainId);
        break;
      case 'project':
        writer.arrayHeader(6).int(VERSION.project);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeIdPair(writer, scope.projectId);
        break;
      case 'trust':
        writer.arrayHeader(7).int(VERSION.trust);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeIdPair(writer, scope.projectId);
        writeTimesAndAudit(writer, payload);
        writer.bin(requireUuid(scope.trustId, 'trust id'));
        return writer.finish();
      case 'federated_unscoped':
        writer.arrayHeader(8).int(VERSION.federated_unscoped);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeFederation(writer, scope);
        break;
      case 'federated_project':
      case 'federated_domain':
        writer.arrayHeader(9).int(VERSION[scope.type]);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeIdPair(writer, scope.type === 'federated_project' ? scope.projectId : scope.domainId);
        writeFederation(writer, scope);
        break;
      case 'oauth1':
        writer.arrayHeader(7).int(VERSION.oauth1);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeIdPair(writer, scope.projectId);
        writeIdPair(writer, scope.accessTokenId);
        break;
      case 'system':
        writer.arrayHeader(6).int(VERSION.system);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writer.str(SYSTEM_ALL);
        break;
      case 'application_credential':
        writer.arrayHeader(7).int(VERSION.application_credential);
        writeIdPair(writer, payload.userId);
        writer.int(methods);
        writeIdPair(writer, scope.projectId);
        writeTimesAndAudit(writer, payload);
        writeIdPair(writer, scope.applicationCredentialId);
        return writer.finish();
      default:
        throw new RangeError(`unknown token scope type ${(scope as { type: unknown }).type}`);
    }
    writeTimesAndAudit(writer, payload);
    return writer.finish();
  }

  decode(plaintext: Uint8Array): TokenPayload {
    const root = new MsgpackReader(plaintext).readAll();
    if (!Array.isArray(root) || root.length === 0) throw new InvalidTokenPayloadError('token payload is not a msgpack array');
    const version = root[0]!;
    switch (version) {
      case VERSION.unscoped:
        return { ...this.readCommon(root, 3, 4), scope: { type: 'unscoped' } };
      case VERSION.domain:
        return { ...this.readCommon(root, 4, 5), scope: { type: 'domain', domainId: this.readBareDomainId(field(root, 3)) } };
      case VERSION.project:
        return { ...this.readCommon(root, 4, 5), scope: { type: 'project', projectId: readIdPair(field(root, 3), 'project id') } };
      case VERSION.trust:
        return {
          ...this.readCommon(root, 4, 5),
          scope: { type: 'trust', projectId: readIdPair(field(root, 3), 'project id'), trustId: readUuidBytes(field(root, 6), 'trust id') },
        };
      case VERSION.federated_unscoped:
        return { ...this.readCommon(root, 6, 7), scope: { type: 'federated_unscoped', ...readFederation(root, 3) } };
      case VERSION.federated_project:
        return {
          ...this.readCommon(root, 7, 8),
          scope: { type: 'federated_project', projectId: readIdPair(field(root, 3), 'project id'), ...readFederation(root, 4) },
        };
      case VERSION.federated_domain:
        return {
          ...this.readCommon(root, 7, 8),
          scope: { type: 'federated_domain', domainId: readIdPair(field(root, 3), 'domain id'), ...readFederation(root, 4) },
        };
      case VERSION.oauth1:
        return {
          ...this.readCommon(root, 5, 6),
          scope: { type: 'oauth1', projectId: readIdPair(field(root, 3), 'project id'), accessTokenId: readIdPair(field(root, 4), 'access token id') },
        };
      case VERSION.system:
        if (readText(field(root, 3), 'system scope') !== SYSTEM_ALL) throw new InvalidTokenPayloadError('system scope must be "all"');
        return { ...this.readCommon(root, 4, 5), scope: { type: 'system' } };
      case VERSION.application_credential:
        return {
          ...this.readCommon(root, 4, 5),
          scope: {
            type: 'application_credential',
            projectId: readIdPair(field(root, 3), 'project id'),
            applicationCredentialId: readIdPair(field(root, 6), 'application credential id'),
          },
        };
      default:
        throw new InvalidTokenPayloadError(`This is not a recognized Fernet payload version: ${describe(version)}`);
    }
  }

  /**
   * An MFA auth receipt's payload, as Keystone's ReceiptFormatter writes it: `[user id pair,
   * methods, expires_at]` with no version element (its issued_at is the Fernet timestamp).
   */
  encodeReceipt(receipt: ReceiptPayload): Buffer {
    const writer = new MsgpackWriter();
    writer.arrayHeader(3);
    writeIdPair(writer, receipt.userId);
    writer.int(this.methodsToInteger(receipt.methods));
    writer.float64(receipt.expiresAt);
    return writer.finish();
  }

  decodeReceipt(plaintext: Uint8Array): ReceiptPayload {
    const root = new MsgpackReader(plaintext).readAll();
    if (!Array.isArray(root) || root.length !== 3) throw new InvalidTokenPayloadError('receipt payload is not a 3-element msgpack array');
    return { userId: readIdPair(field(root, 0), 'user id'), methods: this.integerToMethods(field(root, 1)), expiresAt: readExpiresAt(field(root, 2)) };
  }

  private readCommon(root: MsgpackValue[], expiresIndex: number, auditIndex: number): Omit<TokenPayload, 'scope'> {
    return {
      userId: readIdPair(field(root, 1), 'user id'),
      methods: this.integerToMethods(field(root, 2)),
      expiresAt: readExpiresAt(field(root, expiresIndex)),
      auditIds: readAuditIds(field(root, auditIndex)),
    };
  }

  /** Sum of the bits whose name is used, as Keystone sums them (a name never counts twice here). */
  private methodsToInteger(methods: readonly string[]): number {
    const used = new Set(methods);
    let sum = 0;
    for (const [name, bit] of this.methodBits) if (used.has(name)) sum += bit;
    return sum;
  }

  // Mirrors Keystone's walk: an unknown bit above a known one hides the lower ones, as it does there.
  private integerToMethods(value: MsgpackValue): string[] {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw new InvalidTokenPayloadError('methods must be a non-negative integer');
    }
    const methods: string[] = [];
    let remaining = value;
    for (const [name, bit] of this.methodBits) {
      if (Math.trunc(remaining / bit) === 1) {
        methods.push(name);
        remaining -= bit;
      }
    }
    return methods;
  }

  private writeBareDomainId(writer: MsgpackWriter, domainId: string): void {
    const bytes = uuidBytes(domainId);
    if (bytes) writer.bin(bytes);
    else if (domainId === this.defaultDomainId) writer.str(domainId);
    else throw new RangeError(`domain id ${JSON.stringify(domainId)} is neither a UUID nor the default domain id`);
  }

  private readBareDomainId(value: MsgpackValue): string {
    if (Buffer.isBuffer(value) && value.length === 16) return value.toString('hex');
    const bytes = readBytes(value, 'domain id');
    if (utf8OrUndefined(bytes) === this.defaultDomainId) return this.defaultDomainId;
    // A 16-byte str is a UUID from a pre-1.0 msgpack encoder.
    if (bytes.length === 16) return bytes.toString('hex');
    throw new InvalidTokenPayloadError('domain id is neither a UUID nor the default domain id');
  }
}

function writeIdPair(writer: MsgpackWriter, id: string): void {
  const bytes = uuidBytes(id);
  writer.arrayHeader(2);
  if (bytes) writer.bool(true).bin(bytes);
  else writer.bool(false).str(id);
}

function writeTimesAndAudit(writer: MsgpackWriter, payload: TokenPayload): void {
  if (!Number.isFinite(payload.expiresAt)) throw new RangeError(`expiresAt must be a finite number, got ${payload.expiresAt}`);
  // Our decoder (like Keystone's renderer) needs one or two.
  if (payload.auditIds.length < 1 || payload.auditIds.length > 2) throw new RangeError('a token needs one or two audit ids');
  // Always float64, even when integral: that is what Python packs for a float.
  writer.float64(payload.expiresAt);
  writer.arrayHeader(payload.auditIds.length);
  for (const auditId of payload.auditIds) writer.bin(auditIdBytes(auditId));
}

function writeFederation(writer: MsgpackWriter, scope: { groupIds: string[]; identityProviderId: string; protocolId: string }): void {
  writer.arrayHeader(scope.groupIds.length);
  for (const groupId of scope.groupIds) writeIdPair(writer, groupId);
  writeIdPair(writer, scope.identityProviderId);
  writer.str(scope.protocolId);
}

function auditIdBytes(auditId: string): Buffer {
  const bytes = AUDIT_ID.test(auditId) ? Buffer.from(auditId, 'base64url') : undefined;
  // Only canonical ids round-trip, and Keystone only makes canonical ones.
  if (!bytes || bytes.toString('base64url') !== auditId) throw new RangeError(`not an audit id: ${JSON.stringify(auditId)}`);
  return bytes;
}

function requireUuid(id: string, what: string): Buffer {
  const bytes = uuidBytes(id);
  if (!bytes) throw new RangeError(`${what} must be a UUID, got ${JSON.stringify(id)}`);
  return bytes;
}

const CANONICAL_UUID = /^[0-9a-f]{32}$/;
const HEX_32 = /^[0-9a-fA-F]{32}$/;

/**
 * The 16 bytes of `id` if Python's `uuid.UUID(id)` accepts it (the same stripping of `urn:`, `uuid:`,
 * braces and dashes), else undefined. Python's int() oddities (whitespace, `_`, `0x`, non-ASCII
 * digits) are not copied: Keystone never generates such ids.
 */
export function uuidBytes(id: string): Buffer | undefined {
  if (CANONICAL_UUID.test(id)) return Buffer.from(id, 'hex');
  const hex = id.replaceAll('urn:', '').replaceAll('uuid:', '').replace(/^[{}]+|[{}]+$/g, '').replaceAll('-', '');
  return HEX_32.test(hex) ? Buffer.from(hex, 'hex') : undefined;
}

// Keystone reads fields by position and ignores any extra trailing ones; so do we.
function field(root: MsgpackValue[], index: number): MsgpackValue {
  if (index >= root.length) throw new InvalidTokenPayloadError(`payload version ${describe(root[0]!)} is too short`);
  return root[index]!;
}

function readIdPair(value: MsgpackValue, what: string): string {
  if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== 'boolean') {
    throw new InvalidTokenPayloadError(`${what} must be an [is_uuid, id] pair`);
  }
  return value[0] ? readUuidBytes(value[1]!, what) : readText(value[1]!, what);
}

function readUuidBytes(value: MsgpackValue, what: string): string {
  const bytes = readBytes(value, what);
  if (bytes.length !== 16) throw new InvalidTokenPayloadError(`${what} must be 16 bytes`);
  return bytes.toString('hex');
}

/** Group ids, identity provider and protocol: three consecutive fields from `start`. */
function readFederation(root: MsgpackValue[], start: number): { groupIds: string[]; identityProviderId: string; protocolId: string } {
  const groups = field(root, start);
  if (!Array.isArray(groups)) throw new InvalidTokenPayloadError('group ids must be an array');
  const groupIds: string[] = [];
  for (const group of groups) groupIds.push(readIdPair(group, 'group id'));
  return {
    groupIds,
    identityProviderId: readIdPair(field(root, start + 1), 'identity provider id'),
    protocolId: readText(field(root, start + 2), 'protocol id'),
  };
}

function readExpiresAt(value: MsgpackValue): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidTokenPayloadError('expires_at must be a number');
  // Keystone drops the sub-second part when it renders the time.
  const seconds = Math.floor(value);
  if (seconds < MIN_EXPIRES_AT || seconds > MAX_EXPIRES_AT) throw new InvalidTokenPayloadError('expires_at is out of range');
  return seconds;
}

function readAuditIds(value: MsgpackValue): string[] {
  if (!Array.isArray(value) || value.length < 1 || value.length > 2) {
    throw new InvalidTokenPayloadError('audit ids must be an array of one or two ids');
  }
  const auditIds: string[] = [];
  for (const auditId of value) {
    const bytes = readBytes(auditId, 'audit id');
    if (bytes.length !== 16) throw new InvalidTokenPayloadError('audit id must be 16 bytes');
    auditIds.push(bytes.toString('base64url'));
  }
  return auditIds;
}

/** Binary fields: bin, or str as written by msgpack < 1.0. */
function readBytes(value: MsgpackValue, what: string): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof MsgpackStr) return value.bytes;
  throw new InvalidTokenPayloadError(`${what} must be bytes`);
}

/** Text fields: str, or bin holding UTF-8 (Keystone decodes bytes it finds there). */
function readText(value: MsgpackValue, what: string): string {
  const text = utf8OrUndefined(readBytes(value, `${what} (text)`));
  if (text === undefined) throw new InvalidTokenPayloadError(`${what} is not valid UTF-8`);
  return text;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function utf8OrUndefined(bytes: Buffer): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

function describe(value: MsgpackValue): string {
  if (value instanceof MsgpackStr || Buffer.isBuffer(value)) return 'bytes';
  if (Array.isArray(value)) return 'array';
  return String(value);
}

// --- msgpack, only the types Keystone payloads use ---------------------------------------------------

/** Writes the smallest encoding for each value, as Python msgpack does (floats always float64). */
class MsgpackWriter {
  private buffer = Buffer.allocUnsafe(256);
  private length = 0;

  finish(): Buffer {
    return this.buffer.subarray(0, this.length);
  }

  bool(value: boolean): this {
    this.reserve(1);
    this.buffer[this.length++] = value ? 0xc3 : 0xc2;
    return this;
  }

  int(value: number): this {
    if (!Number.isSafeInteger(value)) throw new RangeError(`msgpack int must be a safe integer, got ${value}`);
    this.reserve(9);
    if (value >= 0 && value < 0x80) this.buffer[this.length++] = value;
    else if (value < 0 && value >= -0x20) this.buffer[this.length++] = value & 0xff;
    // Python msgpack packs non-negative ints as unsigned.
    else if (value > 0 && value <= 0xff) this.length = this.buffer.writeUInt8(value, this.prefix(0xcc));
    else if (value > 0 && value <= 0xffff) this.length = this.buffer.writeUInt16BE(value, this.prefix(0xcd));
    else if (value > 0 && value <= 0xffffffff) this.length = this.buffer.writeUInt32BE(value, this.prefix(0xce));
    else if (value > 0) this.length = this.buffer.writeBigUInt64BE(BigInt(value), this.prefix(0xcf));
    else if (value >= -0x80) this.length = this.buffer.writeInt8(value, this.prefix(0xd0));
    else if (value >= -0x8000) this.length = this.buffer.writeInt16BE(value, this.prefix(0xd1));
    else if (value >= -0x80000000) this.length = this.buffer.writeInt32BE(value, this.prefix(0xd2));
    else this.length = this.buffer.writeBigInt64BE(BigInt(value), this.prefix(0xd3));
    return this;
  }

  float64(value: number): this {
    this.reserve(9);
    this.length = this.buffer.writeDoubleBE(value, this.prefix(0xcb));
    return this;
  }

  str(value: string): this {
    const byteLength = Buffer.byteLength(value, 'utf8');
    this.header(byteLength, 0xa0, 31, 0xd9, 0xda, 0xdb);
    this.reserve(byteLength);
    this.length += this.buffer.write(value, this.length, 'utf8');
    return this;
  }

  bin(value: Uint8Array): this {
    this.header(value.length, 0, -1, 0xc4, 0xc5, 0xc6);
    this.reserve(value.length);
    this.buffer.set(value, this.length);
    this.length += value.length;
    return this;
  }

  arrayHeader(count: number): this {
    this.reserve(5);
    if (count < 16) this.buffer[this.length++] = 0x90 | count;
    else if (count <= 0xffff) this.length = this.buffer.writeUInt16BE(count, this.prefix(0xdc));
    else this.length = this.buffer.writeUInt32BE(count, this.prefix(0xdd));
    return this;
  }

  /** Length header: the fix form up to fixMax (-1: none), then the 8/16/32-bit forms. */
  private header(length: number, fixPrefix: number, fixMax: number, prefix8: number, prefix16: number, prefix32: number): void {
    this.reserve(5);
    if (length <= fixMax) this.buffer[this.length++] = fixPrefix | length;
    else if (length <= 0xff) this.length = this.buffer.writeUInt8(length, this.prefix(prefix8));
    else if (length <= 0xffff) this.length = this.buffer.writeUInt16BE(length, this.prefix(prefix16));
    else this.length = this.buffer.writeUInt32BE(length, this.prefix(prefix32));
  }

  /** Writes a type byte; returns where its body starts. */
  private prefix(type: number): number {
    this.buffer[this.length] = type;
    return this.length + 1;
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + extra));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}

/** A msgpack str, kept as bytes: it may be a pre-1.0 encoding of binary data. */
class MsgpackStr {
  constructor(readonly bytes: Buffer) {}
}

type MsgpackValue = null | boolean | number | Buffer | MsgpackStr | MsgpackValue[];

const MAX_DEPTH = 8;

/** Reads one msgpack value spanning all of its input; maps and extensions are refused. */
class MsgpackReader {
  private readonly bytes: Buffer;
  private at = 0;

  constructor(input: Uint8Array) {
    this.bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  }

  readAll(): MsgpackValue {
    const value = this.value(0);
    if (this.at !== this.bytes.length) throw new InvalidTokenPayloadError('token payload has trailing bytes');
    return value;
  }

  // A switch rather than per-call closures: this runs on every token validation.
  private value(depth: number): MsgpackValue {
    if (depth > MAX_DEPTH) throw new InvalidTokenPayloadError('token payload is nested too deeply');
    const bytes = this.bytes;
    const type = bytes[this.need(1)]!;
    if (type < 0x80) return type;
    if (type >= 0xe0) return type - 0x100;
    if (type >= 0xa0 && type <= 0xbf) return new MsgpackStr(this.slice(type & 0x1f));
    if (type >= 0x90 && type <= 0x9f) return this.array(type & 0x0f, depth);
    switch (type) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xc4:
        return this.slice(bytes[this.need(1)]!);
      case 0xc5:
        return this.slice(bytes.readUInt16BE(this.need(2)));
      case 0xc6:
        return this.slice(bytes.readUInt32BE(this.need(4)));
      case 0xca:
        return bytes.readFloatBE(this.need(4));
      case 0xcb:
        return bytes.readDoubleBE(this.need(8));
      case 0xcc:
        return bytes[this.need(1)]!;
      case 0xcd:
        return bytes.readUInt16BE(this.need(2));
      case 0xce:
        return bytes.readUInt32BE(this.need(4));
      case 0xcf:
        return Number(bytes.readBigUInt64BE(this.need(8)));
      case 0xd0:
        return bytes.readInt8(this.need(1));
      case 0xd1:
        return bytes.readInt16BE(this.need(2));
      case 0xd2:
        return bytes.readInt32BE(this.need(4));
      case 0xd3:
        return Number(bytes.readBigInt64BE(this.need(8)));
      case 0xd9:
        return new MsgpackStr(this.slice(bytes[this.need(1)]!));
      case 0xda:
        return new MsgpackStr(this.slice(bytes.readUInt16BE(this.need(2))));
      case 0xdb:
        return new MsgpackStr(this.slice(bytes.readUInt32BE(this.need(4))));
      case 0xdc:
        return this.array(bytes.readUInt16BE(this.need(2)), depth);
      case 0xdd:
        return this.array(bytes.readUInt32BE(this.need(4)), depth);
      default:
        throw new InvalidTokenPayloadError(`unsupported msgpack type 0x${type.toString(16)} in token payload`);
    }
  }

  private array(count: number, depth: number): MsgpackValue[] {
    // Every element takes at least one byte, which bounds what a forged count can allocate.
    if (count > this.bytes.length - this.at) throw new InvalidTokenPayloadError('token payload is truncated');
    const items: MsgpackValue[] = new Array(count);
    for (let index = 0; index < count; index++) items[index] = this.value(depth + 1);
    return items;
  }

  /** Claims `count` bytes and returns where they start. */
  private need(count: number): number {
    const start = this.at;
    if (start + count > this.bytes.length) throw new InvalidTokenPayloadError('token payload is truncated');
    this.at = start + count;
    return start;
  }

  private slice(length: number): Buffer {
    const start = this.need(length);
    return this.bytes.subarray(start, start + length);
  }
}
