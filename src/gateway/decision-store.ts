import type { Redis } from 'ioredis';
import type { DecisionRecord, DecisionRule } from '../policy/gateway-explain.ts';
import type { PolicySubject } from '../policy/gateway-explain.ts';
import type { ReplayableDecision } from '../policy/policy-replay.ts';
import type { Clock } from '../support/clock.ts';
import type { Outcome } from './outcome.ts';
import type { Authorization, ProxiedRequest } from './proxied-request.ts';
import { REQUEST_ID_BYTE_AT, requestIdText } from '../support/request-id.ts';

interface Logger {
  warn(object: object, message: string): void;
}

export interface DecisionStoreOptions {
  /** How many decisions this process keeps, and Redis keeps (the oldest go first); 0 keeps none. */
  kept: number;
  clock: Clock;
  /** With REDIS_URL: every node records there (in batches, within ~10 ms), so any node answers for any request. */
  redis?: { client: Redis; keyPrefix: string; ttlSeconds: number; log: Logger } | undefined;
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
 * A key per decision (SET with a TTL, LPUSH of its id, RPOP and DEL of the oldest: ~260 calls per
 * batch of 64) cost Redis 8–12 µs of CPU per decision, on the same cores as the gateway; a batch
 * as one element costs it ~2.2 (bench/README.md). (MULTI with the batch in an LPUSH beside the
 * script spared Redis another µs, but ioredis's transaction objects quintupled the gateway's
 * promoted bytes.) KEYS: batches, sizes, count; ARGV: kept, the batch's size, the TTL in seconds,
 * the newest record's time (ms), the batch.
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

/**
 * Decisions go to Redis in batches: at most this many, and at most FLUSH_DELAY_MS after the first
 * of a batch. One command per request (an EVAL, its promise and its reply) cost the gateway more
 * than a third of its CPU per proxied request in the PostgreSQL + Redis bench, and under load the
 * queued commands outlived young-generation collections (old-generation growth, mark-compacts).
 */
const BATCH = 64;
const FLUSH_DELAY_MS = 10;
/**
 * A batch is written into one of a few reused buffers. Measured with ioredis: the batch as strings
 * (one per record, or one for all) was promoted (540–610 bytes per decision, with mark-compacts to
 * clear them); a new Buffer per batch was external memory churn, which V8 answers with
 * mark-compacts too. A buffer goes back to the pool only once Redis has answered (so the socket
 * has written it); a batch larger than one gets its own.
 */
const BATCH_BUFFER_BYTES = 256 * 1024;
const BATCH_BUFFERS_KEPT = 4;

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
 * overwritten), and with Redis batches of records, bounded by count and TTL (RECORD_SCRIPT).
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
  private warned = false;
  /** Recorded, not yet sent to Redis: the ring's last `unsent` slots. */
  private unsent = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly batchBuffers: Buffer[] = [];
  private keys: ReturnType<typeof decisionKeys> | undefined;
  private readonly flushSoon = () => {
    this.flushTimer = undefined;
    void this.flush();
  };

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
  }

  /** The response of `proxied` closed with `outcome`. */
  record(proxied: ProxiedRequest, outcome: Outcome): void {
    const slot = this.next;
    this.odd[slot] = writeId(outcome.request_id, this.ids, slot * ID_BYTES, this.idText) ? undefined : outcome.request_id;
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
    if (!this.options.redis) return;
    this.unsent += 1;
    // Before the ring comes round to the oldest unsent slot.
    if (this.unsent >= Math.min(BATCH, this.size)) void this.flush();
    else if (!this.flushTimer) {
      this.flushTimer = setTimeout(this.flushSoon, FLUSH_DELAY_MS);
      this.flushTimer.unref();
    }
  }

  /** Sends the decisions not yet in Redis, as one batch; resolves when Redis has them (or failed). */
  async flush(): Promise<void> {
    const redis = this.options.redis;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (!redis || this.unsent === 0) return;
    let buffer = this.batchBuffers.pop() ?? Buffer.allocUnsafeSlow(BATCH_BUFFER_BYTES);
    let length = 0;
    const size = Math.min(this.unsent, this.size);
    for (let step = size; step >= 1; step--) {
      const slot = (this.next - step + this.size) % this.size;
      const record = `${this.recordJson(slot, this.odd[slot] ?? requestIdText(this.ids, slot * ID_BYTES, this.idText))}\n`;
      // At most three UTF-8 bytes per UTF-16 unit: room enough without measuring the text first.
      const bytes = 3 * record.length;
      if (length + bytes > buffer.length) {
        const larger = Buffer.allocUnsafeSlow(Math.max(2 * buffer.length, length + bytes));
        buffer.copy(larger, 0, 0, length);
        if (buffer.length === BATCH_BUFFER_BYTES) this.batchBuffers.push(buffer);
        buffer = larger;
      }
      length += buffer.write(record, length);
    }
    this.unsent = 0;
    const keys = (this.keys ??= decisionKeys(redis.keyPrefix));
    try {
      const newest = this.times[(this.next - 1 + this.size) % this.size]!;
      await redis.client.eval(RECORD_SCRIPT, 3, keys.batches, keys.sizes, keys.count, this.options.kept, size, redis.ttlSeconds, Math.floor(newest), buffer.subarray(0, length));
      // Answered, so written: the buffer may carry the next batch (not after a failure, when a
      // write may still be queued on a socket).
      if (buffer.length === BATCH_BUFFER_BYTES && this.batchBuffers.length < BATCH_BUFFERS_KEPT) this.batchBuffers.push(buffer);
      this.warned = false;
    } catch (error) {
      this.warnOnce(error, 'Redis unreachable: gateway decisions are kept by this node only');
    }
  }

  /**
   * JSON.stringify(this.entryAt(slot)), made from pieces: what many requests share (the policy's
   * answer, the shadow's, the token's subject: the same objects request after request) is
   * stringified once per object. Every decision goes to Redis, and building each record as objects
   * to stringify them whole cost ~2.7 µs of the gateway's CPU per request (bench/README.md).
   */
  private recordJson(slot: number, requestId: string): string {
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
      const slot = (this.next - step + this.size) % this.size;
      if (plain ? this.odd[slot] === undefined && sameId(this.ids, slot * ID_BYTES, wanted) : this.odd[slot] === requestId) return slot;
    }
    return -1;
  }

  /** The decision of request `requestId`: this node's, else (with Redis) any node's; undefined when none is kept. */
  async find(requestId: string): Promise<DecisionRecord | undefined> {
    if (!REQUEST_ID.test(requestId)) return undefined;
    const slot = this.slotOf(requestId);
    const local = slot < 0 ? undefined : this.entryAt(slot);
    if (local || !this.options.redis) return local && timed(local);
    // How every record sent starts (recordJson): the quotes are JSON's own, so the text cannot
    // occur inside a record's strings, where a quote is escaped.
    const start = Buffer.from(`{"decision":{"request_id":${JSON.stringify(requestId)},`);
    let found: ReplayableDecision | undefined;
    try {
      await this.eachKeptInRedis((record) => {
        if (record.length < start.length || !record.subarray(0, start.length).equals(start)) return true;
        found = this.readRecord(record);
        return found === undefined;
      });
    } catch (error) {
      this.warnOnce(error, 'Redis unreachable: gateway decisions of other nodes cannot be looked up');
      return undefined;
    }
    return found?.decision.request_id === requestId ? timed(found) : undefined;
  }

  /** The last `limit` decisions, newest first: every node's with Redis, else this node's. */
  async latest(limit: number): Promise<ReplayableDecision[]> {
    if (this.options.redis) {
      const latest: ReplayableDecision[] = [];
      try {
        await this.eachKeptInRedis((record) => {
          const entry = this.readRecord(record);
          if (entry) latest.push(entry);
          return latest.length < limit;
        });
        return latest;
      } catch (error) {
        this.warnOnce(error, 'Redis unreachable: replaying this node\'s decisions only');
      }
    }
    const latest: ReplayableDecision[] = [];
    for (let step = 1; step <= this.count && latest.length < limit; step++) latest.push(this.entryAt((this.next - step + this.size) % this.size));
    return latest;
  }

  /**
   * Calls `visit` with each record in Redis, newest first, until it returns false or `kept` records
   * have been visited: Redis may hold up to a batch more than the bound (it drops whole batches),
   * and those are never answered. Batches are read a few at a time while other nodes push new ones
   * in front, which moves those already read into the next read: a batch is known by its first
   * record (its request id is in it) and visited once.
   */
  private async eachKeptInRedis(visit: (record: Buffer) => boolean): Promise<void> {
    const { client, keyPrefix } = this.options.redis!;
    const { batches } = (this.keys ??= decisionKeys(keyPrefix));
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
          if (visited === this.options.kept || !visit(batch.subarray(start, end))) return;
          visited += 1;
          end = start - 1;
        }
      }
      if (read.length < BATCHES_PER_READ) return;
    }
  }

  /**
   * A record read from Redis; undefined when older than GATEWAY_DECISIONS_TTL_SECONDS (Redis drops
   * a batch by time only as later ones come), or not one this version can read.
   */
  private readRecord(record: Buffer): ReplayableDecision | undefined {
    let entry: ReplayableDecision;
    try {
      entry = JSON.parse(record.toString('utf8')) as ReplayableDecision;
    } catch {
      return undefined;
    }
    if (typeof entry?.decision?.request_id !== 'string' || typeof entry.at !== 'number') return undefined;
    return entry.at > this.options.clock.now() - this.options.redis!.ttlSeconds * 1000 ? entry : undefined;
  }

  private warnOnce(error: unknown, message: string): void {
    if (this.warned) return;
    this.warned = true;
    this.options.redis?.log.warn({ err: error instanceof Error ? error.message : String(error) }, message);
  }
}

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
