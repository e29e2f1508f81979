import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { ChangeTopic } from './change-topics.ts';
import type { RevocationEvent } from './revocation.ts';

/**
 * What nodes tell each other: revocation events (the id of the last, and the events themselves, so
 * a node cut off from the database still applies them), "data changed" (with the topics it changed,
 * absent for every topic), or "token keys changed in the database".
 */
export type ClusterMessage =
  | { type: 'revoked'; eventId: number; events?: RevocationEvent[]; topics?: ChangeTopic[]; accessEpoch?: number }
  | { type: 'changed'; topics?: ChangeTopic[]; accessEpoch?: number }
  | { type: 'keys-changed' };

export interface EventBus {
  /** True when messages from other nodes are known to arrive (always true for a single node). */
  readonly connected: boolean;
  /** True when the bus links this node to other nodes (Redis), not only to itself or its workers. */
  readonly linksNodes?: boolean;
  publish(message: ClusterMessage): void;
  /** Messages from other nodes; `reconnected` after an outage, when some may have been missed. */
  subscribe(handlers: { message(message: ClusterMessage): void; reconnected(): void }): void;
  close(): Promise<void>;
}

/** One node, no Redis: there is nobody to tell. */
export class LocalEventBus implements EventBus {
  readonly connected = true;
  publish(): void {}
  subscribe(): void {}
  async close(): Promise<void> {}
}

interface Logger {
  warn(object: object, message: string): void;
  info(object: object, message: string): void;
}

/**
 * One message to every node, from a process that is no node (the manage CLI after a key rotation).
 * False when Redis did not take it; the nodes' polling catches up then.
 */
export async function publishOnce(url: string, channel: string, message: ClusterMessage): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.publish(channel, JSON.stringify({ ...message, node: randomUUID() }));
    return true;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

export interface RedisEventBusOptions {
  /** REDIS_EVENTS_CHANNEL: deployments sharing one Redis must not hear each other. */
  channel?: string;
  /**
   * How often the node sends itself a heartbeat through Redis. Open connections prove nothing in a
   * silent partition (nothing answers, nothing closes): a heartbeat missing for three intervals
   * marks the bus disconnected, so validations check the database until it comes back; after three
   * heartbeats sent without an answer the connections are replaced.
   */
  heartbeatIntervalMs?: number;
}

/** Redis pub/sub between the nodes that share a database. */
export class RedisEventBus implements EventBus {
  readonly linksNodes = true;
  private readonly node = randomUUID();
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private handlers: Parameters<EventBus['subscribe']>[0] | undefined;
  private wasConnected = false;
  private readonly heartbeatIntervalMs: number;
  private readonly channel: string;
  private readonly heartbeatTimer: NodeJS.Timeout;
  /** performance.now() when our own heartbeat last came back (or the subscription was made). */
  private lastHeartbeatAt = -Infinity;
  /**
   * Heartbeats sent since our own last came back. Reconnecting counts beats rather than time: a
   * stalled event loop (a long synchronous task) delays the beats as much as their answers, and the
   * timer can run before the answer that arrived meanwhile is read.
   */
  private unansweredBeats = 0;
  /** Set while heartbeats are missing on connections that still look open. */
  private silent = false;

  constructor(
    url: string,
    private readonly log: Logger,
    options: RedisEventBusOptions = {},
  ) {
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? 1000;
    this.channel = options.channel ?? 'keystone-gateway:events';
    const connectionOptions = {
      // Fail fast rather than queue: a node that cannot publish falls back to the database.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      retryStrategy: (attempt: number) => Math.min(attempt * 100, 1000),
      lazyConnect: false,
    };
    // A publish into a silent partition must not wait forever (one pending promise per write).
    this.publisher = new Redis(url, { ...connectionOptions, commandTimeout: 1000 });
    this.subscriber = new Redis(url, { ...connectionOptions, enableOfflineQueue: true });
    for (const connection of [this.publisher, this.subscriber]) connection.on('error', () => {});
    this.subscriber.on('message', (_channel: string, raw: string) => this.receive(raw));
    this.subscriber.on('ready', () => {
      this.subscriber.subscribe(this.channel).then(
        () => {
          if (this.wasConnected) this.log.info({}, 'Redis is back: catching up from the database');
          this.wasConnected = true;
          this.lastHeartbeatAt = performance.now();
          this.unansweredBeats = 0;
          this.silent = false;
          // Anything published while we were away is in the database; let the owner catch up.
          this.handlers?.reconnected();
        },
        (error: unknown) => this.log.warn({ err: error }, 'Redis subscribe failed'),
      );
    });
    this.subscriber.on('close', () => {
      if (this.wasConnected && !this.silent) this.log.warn({}, 'Redis connection lost: checking the database for revocations on every validation');
    });
    this.heartbeatTimer = setInterval(() => this.beat(), this.heartbeatIntervalMs);
    this.heartbeatTimer.unref();
  }

  get connected(): boolean {
    return this.publisher.status === 'ready' && this.subscriber.status === 'ready' && !this.heartbeatOverdue();
  }

  private heartbeatOverdue(): boolean {
    return performance.now() - this.lastHeartbeatAt > 3 * this.heartbeatIntervalMs;
  }

  private beat(): void {
    if (this.publisher.status === 'ready' && this.subscriber.status === 'ready' && this.unansweredBeats >= 3 && this.heartbeatOverdue() && !this.silent) {
      this.silent = true;
      this.log.warn({ missedForMs: Math.round(performance.now() - this.lastHeartbeatAt) }, 'Redis stopped answering: checking the database for revocations on every validation, reconnecting');
      // The open connections may be dead ends: new ones either work or fail visibly.
      this.publisher.disconnect(true);
      this.subscriber.disconnect(true);
      return;
    }
    if (this.publisher.status !== 'ready') return;
    this.unansweredBeats++;
    this.publisher.publish(this.channel, JSON.stringify({ type: 'heartbeat', node: this.node })).catch(() => {});
  }

  publish(message: ClusterMessage): void {
    if (this.publisher.status !== 'ready') return;
    this.publisher.publish(this.channel, JSON.stringify({ ...message, node: this.node })).catch(() => {});
  }

  subscribe(handlers: Parameters<EventBus['subscribe']>[0]): void {
    this.handlers = handlers;
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeatTimer);
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }

  private receive(raw: string): void {
    let parsed: (ClusterMessage & { node?: string }) | undefined;
    try {
      parsed = JSON.parse(raw) as ClusterMessage & { node?: string };
    } catch {
      return;
    }
    if (!parsed) return;
    if (parsed.node === this.node) {
      if ((parsed as { type: string }).type === 'heartbeat') {
        this.lastHeartbeatAt = performance.now();
        this.unansweredBeats = 0;
      }
      return;
    }
    // The access epoch a commit wrote (see AccessEpoch), when it took access away.
    const epoch = (parsed.type === 'revoked' || parsed.type === 'changed') && Number.isSafeInteger(parsed.accessEpoch) ? { accessEpoch: parsed.accessEpoch } : {};
    // The topics too are checked by ClusterSync (absent or unknown: every topic).
    const topics = (parsed.type === 'revoked' || parsed.type === 'changed') && parsed.topics !== undefined ? { topics: parsed.topics } : {};
    if (parsed.type === 'revoked' && Number.isInteger(parsed.eventId)) {
      // The events are checked by whoever applies them (ClusterSync): a sibling's IPC carries them too.
      this.handlers?.message({ type: 'revoked', eventId: parsed.eventId, ...(parsed.events === undefined ? {} : { events: parsed.events }), ...topics, ...epoch });
    }
    else if (parsed.type === 'changed') this.handlers?.message({ type: 'changed', ...topics, ...epoch });
    else if (parsed.type === 'keys-changed') this.handlers?.message({ type: 'keys-changed' });
  }
}
