import type { Redis } from 'ioredis';
import type { DecisionRecord, DecisionRule } from '../policy/gateway-explain.ts';
import type { PolicySubject } from '../policy/gateway-explain.ts';
import type { ReplayableDecision } from '../policy/policy-replay.ts';
import type { Clock } from '../support/clock.ts';
import type { Outcome } from './outcome.ts';
import type { Authorization, ProxiedRequest } from './proxied-request.ts';

interface Logger {
  warn(object: object, message: string): void;
}

export interface DecisionStoreOptions {
  /** How many decisions this process keeps, and Redis keeps (the oldest go first); 0 keeps none. */
  kept: number;
  clock: Clock;
  /** With REDIS_URL: every node records there, so any node answers for any request. */
  redis?: { client: Redis; keyPrefix: string; ttlSeconds: number; log: Logger } | undefined;
}

// One request id per key, with a TTL; the index list bounds the count (the oldest key is deleted).
const RECORD_SCRIPT = `
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
local count = redis.call('LPUSH', KEYS[2], ARGV[1])
local kept = tonumber(ARGV[4])
while count > kept do
  local oldest = redis.call('RPOP', KEYS[2])
  if oldest then redis.call('DEL', ARGV[5] .. oldest) end
  count = count - 1
end
redis.call('EXPIRE', KEYS[2], ARGV[3])
return count
`;

/** Request ids the gateway issues (req-<uuid>); anything else is looked up nowhere. */
const REQUEST_ID = /^req-[0-9a-f-]{36}$/;

/**
 * The decisions of the last proxied requests, by request id: an in-process ring (the oldest
 * overwritten), and with Redis a key per request with a TTL and a bounded count.
 * Recording keeps references to what the request already made (its outcome, the policy's
 * answers, the subject) in preallocated slots: no object, no index per request. A record is built
 * only when read; a lookup by id scans the ring (an admin's rare request, ~10k comparisons).
 * (Measured in process: a record object and a Map entry per request cost ~2.7 µs with their GC.)
 */
export class DecisionStore {
  private readonly outcomes: (Outcome | undefined)[];
  private readonly authorizations: (Authorization | undefined)[];
  private readonly shadows: (Authorization | undefined)[];
  private readonly subjects: (PolicySubject | undefined)[];
  private readonly policyPaths: (string | undefined)[];
  private readonly times: Float64Array;
  private next = 0;
  private warned = false;

  constructor(private readonly options: DecisionStoreOptions) {
    const size = Math.max(options.kept, 1);
    this.outcomes = new Array<Outcome | undefined>(size).fill(undefined);
    this.authorizations = new Array<Authorization | undefined>(size).fill(undefined);
    this.shadows = new Array<Authorization | undefined>(size).fill(undefined);
    this.subjects = new Array<PolicySubject | undefined>(size).fill(undefined);
    this.policyPaths = new Array<string | undefined>(size).fill(undefined);
    this.times = new Float64Array(size);
  }

  /** The response of `proxied` closed with `outcome`. */
  record(proxied: ProxiedRequest, outcome: Outcome): void {
    const slot = this.next;
    this.outcomes[slot] = outcome;
    this.authorizations[slot] = proxied.authorization;
    this.shadows[slot] = proxied.shadow;
    this.subjects[slot] = proxied.subject;
    this.policyPaths[slot] = proxied.route?.path;
    this.times[slot] = this.options.clock.now();
    this.next = slot + 1 === this.outcomes.length ? 0 : slot + 1;
    const redis = this.options.redis;
    if (redis) {
      const entry = this.entryAt(slot)!;
      redis.client
        .eval(RECORD_SCRIPT, 2, redis.keyPrefix + outcome.request_id, `${redis.keyPrefix}index`, outcome.request_id, JSON.stringify(entry), String(redis.ttlSeconds), String(this.options.kept), redis.keyPrefix)
        .then(() => (this.warned = false))
        .catch((error: unknown) => this.warnOnce(error, 'Redis unreachable: gateway decisions are kept by this node only'));
    }
  }

  /** The decision kept in `slot`, as a record (undefined: none yet). */
  private entryAt(slot: number): ReplayableDecision | undefined {
    const outcome = this.outcomes[slot];
    if (!outcome) return undefined;
    return {
      decision: decisionRecordOf(outcome, this.authorizations[slot], this.shadows[slot]),
      at: this.times[slot]!,
      subject: this.subjects[slot] ?? null,
      policyPath: this.policyPaths[slot] ?? null,
    };
  }

  /** The slot of `requestId` in this node's ring, newest first; -1 when not kept. */
  private slotOf(requestId: string): number {
    const size = this.outcomes.length;
    for (let step = 1; step <= size; step++) {
      const slot = (this.next - step + size) % size;
      const outcome = this.outcomes[slot];
      if (!outcome) return -1;
      if (outcome.request_id === requestId) return slot;
    }
    return -1;
  }

  /** The decision of request `requestId`: this node's, else (with Redis) any node's; undefined when none is kept. */
  async find(requestId: string): Promise<DecisionRecord | undefined> {
    if (!REQUEST_ID.test(requestId)) return undefined;
    const slot = this.slotOf(requestId);
    const local = slot < 0 ? undefined : this.entryAt(slot);
    if (local || !this.options.redis) return local && timed(local);
    const { client, keyPrefix } = this.options.redis;
    let text: string | null;
    try {
      text = await client.get(keyPrefix + requestId);
    } catch (error) {
      this.warnOnce(error, 'Redis unreachable: gateway decisions of other nodes cannot be looked up');
      return undefined;
    }
    if (text === null) return undefined;
    const entry = JSON.parse(text) as ReplayableDecision;
    return entry.decision.request_id === requestId ? timed(entry) : undefined;
  }

  /** The last `limit` decisions, newest first: every node's with Redis, else this node's. */
  async latest(limit: number): Promise<ReplayableDecision[]> {
    const redis = this.options.redis;
    if (redis) {
      try {
        const ids = await redis.client.lrange(`${redis.keyPrefix}index`, 0, limit - 1);
        if (ids.length === 0) return [];
        const texts = await redis.client.mget(ids.map((id) => redis.keyPrefix + id));
        return texts.filter((text): text is string => text !== null).map((text) => JSON.parse(text) as ReplayableDecision);
      } catch (error) {
        this.warnOnce(error, 'Redis unreachable: replaying this node\'s decisions only');
      }
    }
    const latest: ReplayableDecision[] = [];
    const size = this.outcomes.length;
    for (let step = 1; step <= size && latest.length < limit; step++) {
      const entry = this.entryAt((this.next - step + size) % size);
      if (!entry) break;
      latest.push(entry);
    }
    return latest;
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

/**
 * The record of a closed request: its outcome's fields, the rules' places, the shadow's decision.
 * No token reaches it. `time` is filled in when it is read (see timed).
 */
export function decisionRecordOf(outcome: Outcome, authorization: Authorization | undefined, shadow: Authorization | undefined): DecisionRecord {
  return {
    request_id: outcome.request_id,
    time: '',
    service: outcome.service ?? null,
    method: outcome.method,
    path: outcome.path,
    user_id: outcome.user_id ?? null,
    project_id: outcome.project_id ?? null,
    token_audit_id: outcome.audit_id ?? null,
    effect: outcome.effect ?? null,
    reason: authorization?.reason ?? outcome.reason ?? null,
    rule: authorization ? ruleOf(authorization) : null,
    shadow: shadow ? { effect: shadow.allowed ? 'allow' : 'deny', rule: ruleOf(shadow) } : null,
    upstream: outcome.upstream ?? null,
    status: outcome.status,
  };
}
