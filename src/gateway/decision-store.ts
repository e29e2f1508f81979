import type { Redis } from 'ioredis';
import type { DecisionRecord, DecisionRule } from '../policy/gateway-explain.ts';
import type { PolicySubject } from '../policy/gateway-explain.ts';
import type { ReplayableDecision } from '../policy/policy-replay.ts';
import type { Clock } from '../support/clock.ts';
import type { DecisionPeers } from './decision-peers.ts';
import type { Outcome } from './outcome.ts';
import type { Authorization, ProxiedRequest } from './proxied-request.ts';
import { REQUEST_ID_BYTE_AT, requestIdText } from '../support/request-id.ts';

interface Logger {
  warn(object: object, message: string): void;
}

export interface DecisionStoreOptions {
  /** How many decisions this process keeps, and Redis keeps of stopped nodes (the oldest go first); 0 keeps none. */
  kept: number;
  clock: Clock;
  /** With REDIS_URL: where a node leaves its decisions when it stops, so the others still answer for them. */
  redis?: { client: Redis; keyPrefix: string; ttlSeconds: number; log: Logger } | undefined;
  /** With REDIS_URL: the other nodes, asked for decisions this node does not hold. */
  peers?: DecisionPeers | undefined;
  /** How many stopped nodes' rings Redis keeps (RETIRED_RINGS). */
  retiredRings?: number;
}

/**
 * In Redis, a batch of decisions is one element of the list `<prefix>batches` (newest first): its
 * records, oldest first, one per line (JSON escapes every line break inside a record). Beside it,
 * `<prefix>batch-sizes` holds each batch's record count and its newest record's time ("64
 * 1764590000000", the same order), and `<prefix>count` the sum of the counts. The oldest batches
 * go once the others hold `kept` records, and once their newest record is older than the TTL, so
 * nothing stays in Redis longer than that while traffic goes on (EXPIRE clears all when it stops).
 * One script writes all three, so nodes writing at once keep the two lists in step; when a key was
 * lost (evicted, deleted), the script starts again from what is left in step rather than keeping
 * a wrong count for good.
 *
 * Only a stopping node writes here (its ring, RETIRED_BATCH records a batch). Until 2026-12-01 every
 * node sent every decision, in batches of 64 within 10 ms: that cost the gateway ~8 µs of CPU per
 * proxied request (a quarter of it), Redis ~3 more on the same cores, and promoted ~35 bytes per
 * request, which brought mark-compacts; a node now asks the others instead (decision-peers.ts).
 * KEYS: batches, sizes, count; ARGV: kept, the batch's size, the TTL in seconds, the newest
 * record's time (ms), the batch.
 */
const RECORD_SCRIPT = `
local kept, size, ttl, newest = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local held = redis.call('LPUSH', KEYS[1], ARGV[5])
local batches = redis.call('LPUSH', KEYS[2], size .. ' ' .. newest)
local total
if held ~= batches then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('LPUSH', KEYS[1], ARGV[5])
  batches = redis.call('LPUSH', KEYS[2], size .. ' ' .. newest)
  total = size
  redis.call('SET', KEYS[3], total)
elseif redis.call('EXISTS', KEYS[3]) == 0 then
  total = 0
  for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    total = total + tonumber(string.match(entry, '^%d+'))
  end
  redis.call('SET', KEYS[3], total)
else
  total = redis.call('INCRBY', KEYS[3], size)
end
local expired = newest - ttl * 1000
local dropped = 0
while batches - dropped > 1 do
  local oldestSize, oldestAt = string.match(redis.call('LINDEX', KEYS[2], -1 - dropped), '^(%d+) (%d+)$')
  oldestSize = tonumber(oldestSize)
  if total - oldestSize < kept and tonumber(oldestAt) > expired then break end
  total = total - oldestSize
  dropped = dropped + 1
end
if dropped > 0 then
  redis.call('LTRIM', KEYS[1], 0, batches - dropped - 1)
  redis.call('LTRIM', KEYS[2], 0, batches - dropped - 1)
  redis.call('SET', KEYS[3], total)
end
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('EXPIRE', KEYS[3], ttl)
return total
`;

/** Batches read from Redis per round trip when looking a decision up (~45 KB each when full). */
const BATCHES_PER_READ = 8;
const NEWLINE = 10;

/** The Redis keys of a deployment's decisions (see RECORD_SCRIPT). */
export function decisionKeys(keyPrefix: string): { batches: string; sizes: string; count: string } {
  return { batches: `${keyPrefix}batches`, sizes: `${keyPrefix}batch-sizes`, count: `${keyPrefix}count` };
}

/** Records per batch when a stopping node leaves its ring in Redis (~600 KB a batch). */
const RETIRED_BATCH = 1000;
/**
 * Redis keeps what stopped nodes left up to this many rings (`kept` records each): a rolling restart
 * of up to this many nodes loses none of their decisions (within the TTL), where a bound of one
 * ring let each stopping node push out the one before.
 */
export const RETIRED_RINGS = 8;

/** Request ids the gateway issues (req-<uuid>); anything else is looked up nowhere. */
const REQUEST_ID = /^req-[0-9a-f-]{36}$/;

/** Request ids the gateway issues (req-<uuid>), kept as their 16 bytes. */
const ID_BYTES = 16;
/** Bytes of a canonical path kept in the ring itself; a longer one is kept as a string. */
const PATH_BYTES = 200;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const OTHER_METHOD = 255;

/**
 * The decisions of the last proxied requests, by request id: an in-process ring (the oldest
 * overwritten). With Redis, the other nodes are asked for a decision this node does not hold, and
 * a stopping node leaves its ring in Redis, bounded by count and TTL (RECORD_SCRIPT), where the
 * nodes that are left find it.
 *
 * Recording allocates nothing and keeps nothing the request made: what is new per request (its
 * id, path, method, status, time) is copied into preallocated typed arrays, and the rest are
 * references to what outlives the request anyway (the cached token's ids, the policy's cached
 * answer, the endpoint's origin). A ring of request objects would be promoted to the old generation
 * as it fills (10,000 requests last longer than two scavenges): measured at two thirds of the
 * gateway's promoted bytes, which is what brings mark-compacts, the gateway's longest pauses.
 * A record is built only when read; a lookup by id scans the ring (an admin's rare request).
 */
export class DecisionStore {
  private readonly size: number;
  private readonly ids: Uint8Array;
  /** A request id not of the req-<uuid> form (none the gateway makes), kept whole. */
  private readonly odd: (string | undefined)[];
  private readonly paths: Buffer;
  private readonly pathLengths: Uint16Array;
  /** A canonical path longer than PATH_BYTES, kept whole. */
  private readonly longPaths: (string | undefined)[];
  private readonly methods: Uint8Array;
  private readonly otherMethods: (string | undefined)[];
  private readonly statuses: Uint16Array;
  private readonly times: Float64Array;
  private readonly services: (string | undefined)[];
  private readonly userIds: (string | undefined)[];
  private readonly projectIds: (string | undefined)[];
  private readonly auditIds: (string | undefined)[];
  private readonly upstreams: (string | undefined)[];
  private readonly reasons: (string | undefined)[];
  private readonly authorizations: (Authorization | undefined)[];
  private readonly shadows: (Authorization | undefined)[];
  private readonly subjects: (PolicySubject | undefined)[];
  /** A request id's text, copied here to be read as bytes (writeId), or written here to be read as text (requestIdText). */
  private readonly idText = Buffer.alloc(ID_TEXT_LENGTH);
  /** recordJson's pieces, per object shared by many requests (one map per piece: an answer can be live for one request and the shadow's for another). */
  private readonly decidedFragments = new WeakMap<Authorization, string>();
  private readonly shadowFragments = new WeakMap<Authorization, string>();
  private readonly subjectFragments = new WeakMap<PolicySubject, string>();
  private count = 0;
  private next = 0;
  /** Decisions recorded since start: the next one's sequence number (answers to other nodes go in parts, by number). */
  private recorded = 0;
  /** Warnings given since Redis last answered (each once, not once per lookup). */
  private readonly warned = new Set<string>();
  private readonly keys: ReturnType<typeof decisionKeys> | undefined;
  /** How many records Redis keeps of stopped nodes (RETIRED_RINGS rings). */
  private readonly retiredBound: number;

  constructor(private readonly options: DecisionStoreOptions) {
    const size = Math.max(options.kept, 1);
    this.size = size;
    const slots = <T>() => new Array<T | undefined>(size).fill(undefined);
    this.ids = new Uint8Array(size * ID_BYTES);
    this.odd = slots();
    this.paths = Buffer.alloc(size * PATH_BYTES);
    this.pathLengths = new Uint16Array(size);
    this.longPaths = slots();
    this.methods = new Uint8Array(size);
    this.otherMethods = slots();
    this.statuses = new Uint16Array(size);
    this.times = new Float64Array(size);
    this.services = slots();
    this.userIds = slots();
    this.projectIds = slots();
    this.auditIds = slots();
    this.upstreams = slots();
    this.reasons = slots();
    this.authorizations = slots();
    this.shadows = slots();
    this.subjects = slots();
    this.keys = options.redis && decisionKeys(options.redis.keyPrefix);
    this.retiredBound = options.kept * (options.retiredRings ?? RETIRED_RINGS);
    options.peers?.answerWith({
      find: (requestId) => {
        const slot = this.slotOf(requestId);
        return slot < 0 ? undefined : this.recordJson(slot);
      },
      head: () => this.recorded,
      before: (end, count) => {
        const records: string[] = [];
        // Sequence numbers still in the ring: recorded - count … recorded - 1.
        for (let sequence = Math.min(end, this.recorded) - 1; sequence >= Math.max(end - count, this.recorded - this.count); sequence--) {
          records.push(this.recordJson(this.slotBefore(this.recorded - sequence)));
        }
        return records;
      },
    });
  }

  /** The slot `step` places before the next to be written (1: the newest). */
  private slotBefore(step: number): number {
    return (this.next - step + this.size) % this.size;
  }

  /** The response of `proxied` closed with `outcome`. */
  record(proxied: ProxiedRequest, outcome: Outcome): void {
    const slot = this.next;
    const drawn = proxied.drawnRequestId;
    if (outcome.request_id === drawn.text) {
      // The bytes it was written from: no text to read back (writeId's checks cost more than the rest of a record).
      const ids = this.ids;
      const bytes = drawn.bytes;
      for (let index = 0, from = drawn.at, to = slot * ID_BYTES; index < ID_BYTES; index++) ids[to + index] = bytes[from + index]!;
      this.odd[slot] = undefined;
    } else {
      this.odd[slot] = writeId(outcome.request_id, this.ids, slot * ID_BYTES, this.idText) ? undefined : outcome.request_id;
    }
    const path = outcome.path;
    if (path.length <= PATH_BYTES && Buffer.byteLength(path) <= PATH_BYTES) {
      this.pathLengths[slot] = this.paths.write(path, slot * PATH_BYTES, PATH_BYTES, 'utf8');
      this.longPaths[slot] = undefined;
    } else {
      this.pathLengths[slot] = 0;
      this.longPaths[slot] = path;
    }
    const method = METHODS.indexOf(outcome.method);
    this.methods[slot] = method < 0 ? OTHER_METHOD : method;
    this.otherMethods[slot] = method < 0 ? outcome.method : undefined;
    this.statuses[slot] = outcome.status;
    this.times[slot] = this.options.clock.now();
    this.services[slot] = outcome.service;
    this.userIds[slot] = outcome.user_id;
    this.projectIds[slot] = outcome.project_id;
    this.auditIds[slot] = outcome.audit_id;
    this.upstreams[slot] = outcome.upstream;
    this.reasons[slot] = outcome.reason;
    this.authorizations[slot] = proxied.authorization;
    this.shadows[slot] = proxied.shadow;
    this.subjects[slot] = proxied.subject;
    this.next = slot + 1 === this.size ? 0 : slot + 1;
    if (this.count < this.size) this.count++;
    this.recorded++;
  }

  /**
   * Leaves this node's decisions in Redis, oldest first, RETIRED_BATCH a batch, for the nodes that
   * go on (when this one stops); resolves when Redis has them, or failed to take them.
   */
  async retire(): Promise<void> {
    const redis = this.options.redis;
    const keys = this.keys;
    if (!redis || !keys) return;
    try {
      for (let from = this.count; from >= 1; from -= RETIRED_BATCH) {
        const records: string[] = [];
        const to = Math.max(from - RETIRED_BATCH + 1, 1);
        for (let step = from; step >= to; step--) records.push(this.recordJson(this.slotBefore(step)));
        const newest = this.times[this.slotBefore(to)]!;
        await redis.client.eval(RECORD_SCRIPT, 3, keys.batches, keys.sizes, keys.count, this.retiredBound, records.length, redis.ttlSeconds, Math.floor(newest), `${records.join('\n')}\n`);
      }
      this.warned.clear();
    } catch (error) {
      this.warnOnce(error, 'Redis unreachable: this node\'s gateway decisions are lost as it stops');
    }
  }

  /**
   * JSON.stringify(this.entryAt(slot)), made from pieces: what many requests share (the policy's
   * answer, the shadow's, the token's subject: the same objects request after request) is
   * stringified once per object, and a ring of 10,000 goes out at once when a node stops or is
   * asked for its latest.
   */
  private recordJson(slot: number): string {
    const requestId = this.odd[slot] ?? requestIdText(this.ids, slot * ID_BYTES, this.idText);
    const authorization = this.authorizations[slot];
    const shadow = this.shadows[slot];
    const subject = this.subjects[slot];
    const method = this.methods[slot]!;
    const path = this.pathAt(slot);
    const decided = authorization ? fragment(this.decidedFragments, authorization, decidedJson) : `"effect":null,"reason":${jsonOrNull(this.reasons[slot])},"rule":null`;
    return (
      `{"decision":{"request_id":${JSON.stringify(requestId)},"time":"","service":${jsonOrNull(this.services[slot])}` +
      `,"method":${JSON.stringify(method === OTHER_METHOD ? this.otherMethods[slot]! : METHODS[method]!)},"path":${JSON.stringify(path)}` +
      `,"user_id":${jsonOrNull(this.userIds[slot])},"project_id":${jsonOrNull(this.projectIds[slot])},"token_audit_id":${jsonOrNull(this.auditIds[slot])}` +
      `,${decided},"shadow":${shadow ? fragment(this.shadowFragments, shadow, shadowJson) : 'null'},"upstream":${jsonOrNull(this.upstreams[slot])},"status":${this.statuses[slot]!}}` +
      `,"at":${this.times[slot]!},"subject":${subject ? fragment(this.subjectFragments, subject, JSON.stringify) : 'null'},"policyPath":${JSON.stringify(policyPathOf(path))}}`
    );
  }

  private pathAt(slot: number): string {
    return this.longPaths[slot] ?? this.paths.toString('utf8', slot * PATH_BYTES, slot * PATH_BYTES + this.pathLengths[slot]!);
  }

  /** The decision kept in `slot`, as a record. */
  private entryAt(slot: number): ReplayableDecision {
    const authorization = this.authorizations[slot];
    const shadow = this.shadows[slot];
    const effect = authorization ? (authorization.allowed ? 'allow' : 'deny') : null;
    const method = this.methods[slot]!;
    const decision: DecisionRecord = {
      request_id: this.odd[slot] ?? requestIdText(this.ids, slot * ID_BYTES, this.idText),
      time: '',
      service: this.services[slot] ?? null,
      method: method === OTHER_METHOD ? this.otherMethods[slot]! : METHODS[method]!,
      path: this.pathAt(slot),
      user_id: this.userIds[slot] ?? null,
      project_id: this.projectIds[slot] ?? null,
      token_audit_id: this.auditIds[slot] ?? null,
      effect,
      reason: authorization?.reason ?? this.reasons[slot] ?? null,
      rule: authorization ? ruleOf(authorization) : null,
      shadow: shadow ? { effect: shadow.allowed ? 'allow' : 'deny', rule: ruleOf(shadow) } : null,
      upstream: this.upstreams[slot] ?? null,
      status: this.statuses[slot]!,
    };
    return { decision, at: this.times[slot]!, subject: this.subjects[slot] ?? null, policyPath: policyPathOf(decision.path) };
  }

  /** The slot of `requestId` in this node's ring, newest first; -1 when not kept. */
  private slotOf(requestId: string): number {
    const wanted = new Uint8Array(ID_BYTES);
    const plain = writeId(requestId, wanted, 0, this.idText);
    for (let step = 1; step <= this.count; step++) {
      const slot = this.slotBefore(step);
      if (plain ? this.odd[slot] === undefined && sameId(this.ids, slot * ID_BYTES, wanted) : this.odd[slot] === requestId) return slot;
    }
    return -1;
  }

  /**
   * The decision of request `requestId`: this node's, else (with Redis) that of the node that holds
   * it, else one a stopped node left in Redis; undefined when none is kept.
   */
  async find(requestId: string): Promise<DecisionRecord | undefined> {
    if (!REQUEST_ID.test(requestId)) return undefined;
    const slot = this.slotOf(requestId);
    if (slot >= 0) return timed(this.entryAt(slot));
    const answered = await this.options.peers?.find(requestId);
    const fromPeer = answered && this.readRecord(answered, false);
    if (fromPeer?.decision.request_id === requestId) return timed(fromPeer);
    if (!this.options.redis) return undefined;
    // How every record starts (recordJson): the quotes are JSON's own, so the text cannot occur
    // inside a record's strings, where a quote is escaped.
    const start = Buffer.from(`{"decision":{"request_id":${JSON.stringify(requestId)},`);
    let found: ReplayableDecision | undefined;
    try {
      await this.eachKeptInRedis((record) => {
        if (record.length < start.length || !record.subarray(0, start.length).equals(start)) return true;
        found = this.readRecord(record, true);
        return found === undefined;
      });
      this.warned.clear();
    } catch (error) {
      this.warnOnce(error, 'Redis unreachable: the gateway decisions of stopped nodes cannot be looked up');
      return undefined;
    }
    return found?.decision.request_id === requestId ? timed(found) : undefined;
  }

  /**
   * The last `limit` decisions, newest first: with Redis, of every node that answers in time and
   * those stopped nodes left there; else this node's.
   */
  async latest(limit: number): Promise<ReplayableDecision[]> {
    const latest: ReplayableDecision[] = [];
    for (let step = 1; step <= this.count && latest.length < limit; step++) latest.push(this.entryAt(this.slotBefore(step)));
    if (!this.options.peers && !this.options.redis) return latest;
    for (const record of (await this.options.peers?.latest(limit)) ?? []) {
      const entry = this.readRecord(record, false);
      if (entry) latest.push(entry);
    }
    if (this.options.redis) {
      try {
        // Every one: Redis orders the batches by when their node stopped, not by their records'
        // times (an idle node that stops later left older decisions in front). Only the newest
        // `limit` can be among the answer, so only those are parsed.
        const retired: { at: number; record: Buffer }[] = [];
        await this.eachKeptInRedis((record) => {
          const at = recordTime(record);
          if (at !== undefined) retired.push({ at, record });
          return true;
        });
        retired.sort((a, b) => b.at - a.at);
        for (let index = 0, taken = 0; index < retired.length && taken < limit; index++) {
          const entry = this.readRecord(retired[index]!.record, true);
          if (entry) {
            latest.push(entry);
            taken++;
          }
        }
        this.warned.clear();
      } catch (error) {
        this.warnOnce(error, 'Redis unreachable: replaying without the decisions of stopped nodes');
      }
    }
    // Newest first (a stable sort: this node's first among equal times), each request once.
    latest.sort((a, b) => b.at - a.at);
    const seen = new Set<string>();
    return latest.filter((entry) => !seen.has(entry.decision.request_id) && seen.add(entry.decision.request_id)).slice(0, limit);
  }

  /**
   * Calls `visit` with each record in Redis (the last stopped node's first, each node's newest
   * first), until it returns false or the bound's records (RETIRED_RINGS rings of `kept`) have been
   * visited: Redis may hold up to a batch more than the bound (it drops whole batches),
   * and those are never answered. Batches are read a few at a time while other nodes push new ones
   * in front, which moves those already read into the next read: a batch is known by its first
   * record (its request id is in it) and visited once.
   */
  private async eachKeptInRedis(visit: (record: Buffer) => boolean): Promise<void> {
    const { client } = this.options.redis!;
    const { batches } = this.keys!;
    const seen = new Set<string>();
    let visited = 0;
    for (let first = 0; ; first += BATCHES_PER_READ) {
      const read = await client.lrangeBuffer(batches, first, first + BATCHES_PER_READ - 1);
      for (const batch of read) {
        const firstRecord = batch.toString('latin1', 0, batch.indexOf(NEWLINE));
        if (seen.has(firstRecord)) continue;
        seen.add(firstRecord);
        // A batch is oldest first, each record ending with a line break.
        let end = batch.length - 1;
        while (end > 0) {
          const start = batch.lastIndexOf(NEWLINE, end - 1) + 1;
          if (visited === this.retiredBound || !visit(batch.subarray(start, end))) return;
          visited += 1;
          end = start - 1;
        }
      }
      if (read.length < BATCHES_PER_READ) return;
    }
  }

  /**
   * A record another node answered with or one read from Redis; undefined when not one this version
   * can read, or (`expires`, from Redis) older than GATEWAY_DECISIONS_TTL_SECONDS (Redis drops a
   * batch by time only as later ones come). A node's ring has no TTL, only its count.
   */
  private readRecord(record: Buffer, expires: boolean): ReplayableDecision | undefined {
    let entry: ReplayableDecision;
    try {
      entry = JSON.parse(record.toString('utf8')) as ReplayableDecision;
    } catch {
      return undefined;
    }
    if (typeof entry?.decision?.request_id !== 'string' || typeof entry.at !== 'number') return undefined;
    if (!expires || !this.options.redis) return entry;
    return entry.at > this.options.clock.now() - this.options.redis.ttlSeconds * 1000 ? entry : undefined;
  }

  private warnOnce(error: unknown, message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    this.options.redis?.log.warn({ err: error instanceof Error ? error.message : String(error) }, message);
  }
}

/**
 * A record's time (its `at`, as recordJson writes it: the last member but two, after the decision)
 * without parsing the record; undefined when it has none. The text `,"at":` with its quotes
 * unescaped occurs only as a member name, and no member inside the record is named `at`.
 */
function recordTime(record: Buffer): number | undefined {
  const at = record.lastIndexOf(AT_MEMBER);
  if (at < 0) return undefined;
  let time = 0;
  let digits = 0;
  for (let index = at + AT_MEMBER.length; index < record.length; index++, digits++) {
    const digit = record[index]! - 48;
    if (digit < 0 || digit > 9) break;
    time = time * 10 + digit;
  }
  return digits > 0 ? time : undefined;
}
const AT_MEMBER = Buffer.from(',"at":');

/** The record with its time written out (formatting a date costs more than recording it: done only when read). */
function timed(entry: ReplayableDecision): DecisionRecord {
  return { ...entry.decision, time: new Date(entry.at).toISOString() };
}

function ruleOf(authorization: Authorization): DecisionRule | null {
  return authorization.rule ? { file: authorization.source ?? null, line: authorization.line ?? null, text: authorization.rule } : null;
}

/** What policy saw of a canonical target: the path after /{service_type} (as routeOf cuts it); null for none. */
function policyPathOf(path: string): string | null {
  if (path === '') return null;
  const prefixEnd = path.indexOf('/', 1);
  return prefixEnd === -1 ? '/' : path.slice(prefixEnd);
}

/** `make(of)`, kept in `made` per object (those given here outlive many requests). */
function fragment<T extends object>(made: WeakMap<T, string>, of: T, make: (of: T) => string): string {
  let text = made.get(of);
  if (text === undefined) {
    text = make(of);
    made.set(of, text);
  }
  return text;
}

function jsonOrNull(text: string | undefined): string {
  return text === undefined ? 'null' : JSON.stringify(text);
}

/** A policy answer's effect, reason and rule, as members of a record (entryAt's order). */
function decidedJson(authorization: Authorization): string {
  return `"effect":"${authorization.allowed ? 'allow' : 'deny'}","reason":${JSON.stringify(authorization.reason)},"rule":${JSON.stringify(ruleOf(authorization))}`;
}

function shadowJson(shadow: Authorization): string {
  return JSON.stringify({ effect: shadow.allowed ? 'allow' : 'deny', rule: ruleOf(shadow) });
}

const HEX = '0123456789abcdef';
/** A character code below 256 → its value as a lower-case hex digit, else -1. */
const HEX_VALUE = new Int8Array(256).fill(-1);
for (let digit = 0; digit < 16; digit++) HEX_VALUE[HEX.charCodeAt(digit)] = digit;
const DASH = 45;

/** 'req-' and a uuid's 36 characters. */
const ID_TEXT_LENGTH = 40;

/**
 * Writes the 16 bytes of a req-<uuid> id at `offset`; false (nothing usable written) for any other
 * string. What REQUEST_ID and the dashes' places say, checked on the id's bytes (copied into `text`)
 * with a table, not a branch, per digit: this runs for every proxied request, where the regular
 * expression, id[12]'s one-character strings and one property load per `charCodeAt` (compiled as
 * generic loads in the service) cost more than the rest of recording a decision (bench/README.md).
 */
function writeId(id: string, into: Uint8Array, offset: number, text: Buffer): boolean {
  // Forty bytes in UTF-8 for forty characters: ASCII only (a character beyond it must not be read
  // as the byte a Latin-1 copy would keep of it).
  if (id.length !== ID_TEXT_LENGTH || Buffer.byteLength(id) !== ID_TEXT_LENGTH) return false;
  text.write(id, 0, ID_TEXT_LENGTH, 'latin1');
  // 'req-'
  if (text[0] !== 114 || text[1] !== 101 || text[2] !== 113 || text[3] !== DASH) return false;
  if (text[12] !== DASH || text[17] !== DASH || text[22] !== DASH || text[27] !== DASH) return false;
  // Negative once any digit is not lower-case hex.
  let bad = 0;
  for (let index = 0; index < ID_BYTES; index++) {
    const at = REQUEST_ID_BYTE_AT[index]!;
    const high = HEX_VALUE[text[at]!]!;
    const low = HEX_VALUE[text[at + 1]!]!;
    bad |= high | low;
    into[offset + index] = (high << 4) | low;
  }
  return bad >= 0;
}

function sameId(ids: Uint8Array, offset: number, wanted: Uint8Array): boolean {
  for (let index = 0; index < ID_BYTES; index++) if (ids[offset + index] !== wanted[index]) return false;
  return true;
}
