import { systemClock, type Clock } from '../support/clock.ts';
import { UnavailableError } from '../support/errors.ts';
import type { Store } from '../store/database.ts';
import { DATABASE_RETRY_AFTER_SECONDS, databaseUnreachableReason, isDatabaseKnownUnreachable } from '../store/unavailable.ts';
import type { AccessEpoch } from './access-epoch.ts';
import { ChangeGenerations } from './change-generations.ts';
import { ALL_TOPICS, CACHE_TOPICS, CHANGE_TOPICS, isChangeTopic, topicsOfWrites, type ChangeTopic } from './change-topics.ts';
import type { ClusterMessage, EventBus } from './event-bus.ts';
import { parseRevocationEvents, type Revocations } from './revocation.ts';

interface Logger {
  error(object: object, message: string): void;
}

export interface ClusterSyncOptions {
  clock?: Clock;
  /**
   * STALE_VALIDATION_MAX_SECONDS in ms: while neither the database nor Redis can be reached, cached
   * validations are served for at most this long after the node last heard from either.
   */
  staleValidationMaxMs?: number;
  /** The access_epoch counter: read by the revocation poll, carried by commit messages. */
  accessEpoch?: AccessEpoch;
}

export const STALE_VALIDATION_MESSAGE =
  'The service is temporarily unavailable: neither its database nor its cluster bus can be reached, so cached tokens can no longer be trusted. Retry later.';

/**
 * Keeps this node's in-memory token state (revocation index, validation and role caches) in step
 * with the database and the other nodes. Every committed write bumps the generations of the topics
 * it changed (see change-topics.ts), which drops what the caches depending on them hold, and tells
 * the other nodes (Redis) which topics, so they re-read revocation events from the database and
 * bump theirs. Whenever what changed is not known (a partition's end after missed messages, Redis
 * back, an older node's message) every topic is bumped. While Redis is configured but unreachable,
 * other nodes' writes go unseen, so each validation re-reads new revocation events and caches are
 * not trusted.
 */
export class ClusterSync {
  private readonly changes = new ChangeGenerations();
  private readonly validations = this.changes.generationOf(CACHE_TOPICS.tokenValidation);

  /** Changes whenever any data may have changed, here or on another node (a cache holding a bit of everything). */
  get generation(): number {
    return this.changes.all;
  }

  /** Changes whenever what a validated token holds may have changed (the token validation cache's generation). */
  get validationGeneration(): number {
    return this.validations();
  }

  /** A generation that changes whenever one of `topics` may have changed, here or on another node. */
  generationOf(topics: readonly ChangeTopic[]): () => number {
    return this.changes.generationOf(topics);
  }

  /**
   * Calls `listener` whenever one of `topics` may have changed, here or on another node (after the
   * generations moved): for a cache that must be rebuilt at once. Returns a function that stops it.
   */
  onChange(topics: readonly ChangeTopic[], listener: () => void): () => void {
    return this.changes.watch(topics, listener);
  }

  /** The same, with whether caches may be trusted: for a LoadingCache holding data of `topics`. */
  epochOf(topics: readonly ChangeTopic[]): { readonly generation: number; readonly cachesTrusted: boolean } {
    const generation = this.changes.generationOf(topics);
    const trusted = () => this.cachesTrusted;
    return {
      get generation() {
        return generation();
      },
      get cachesTrusted() {
        return trusted();
      },
    };
  }

  /**
   * Set when the catch-up after another node's revocation (or after an outage of Redis) could not
   * read the database: the revocation index may miss events until a later catch-up succeeds.
   */
  private behind = false;

  private readonly clock: Clock;
  private readonly staleValidationMaxMs: number;
  /**
   * Clock time when the node last heard from the database or the other nodes (Redis), kept while the
   * database is unreachable: how long cached validations have gone unconfirmed.
   */
  private lastHeardAt = 0;
  /** Whether Redis was lost at some point of the current (or last) partition of the database. */
  private busLostDuringPartition = false;

  constructor(
    private readonly store: Store,
    private readonly revocations: Revocations,
    private readonly bus: EventBus,
    private readonly log: Logger,
    options: ClusterSyncOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.staleValidationMaxMs = options.staleValidationMaxMs ?? 300_000;
    this.accessEpoch = options.accessEpoch;
  }

  private readonly accessEpoch: AccessEpoch | undefined;
  /** The newest access epoch this node knows of (read, written or announced); undefined before the first. */
  private seenAccessEpoch: number | undefined;
  /**
   * Set when, while the database is unreachable, another node announces that it took access away
   * (a newer access epoch): what this node validated before may grant too much, and no revocation
   * event says what. Cleared when the database is back (caches are re-read then).
   */
  private accessReducedUnseen = false;

  /**
   * Reads the access epoch; a value this node has not seen means another node took access away
   * (perhaps unannounced: its Redis message is best effort): caches drop what they hold.
   */
  async checkAccessEpoch(): Promise<void> {
    if (!this.accessEpoch) return;
    const value = await this.accessEpoch.read();
    if (this.seenAccessEpoch !== undefined && value <= this.seenAccessEpoch) return;
    this.seenAccessEpoch = value;
    // What was taken away is not known (the message saying so was missed).
    this.changes.bumpAll();
  }

  /** An epoch another node's message carried (or this node's commit wrote). */
  private noteAccessEpoch(value: number | undefined): void {
    if (value === undefined || (this.seenAccessEpoch !== undefined && value <= this.seenAccessEpoch)) return;
    this.seenAccessEpoch = value;
    if (!this.store.health.reachable) this.accessReducedUnseen = true;
  }

  start(): void {
    this.store.onCommit((transaction, writes) => {
      const topics = topicsOfWrites(writes);
      // Whether the commit revoked anything tells the others whether missing it would be unsafe; the
      // events themselves reach nodes that cannot read the database.
      const eventId = this.revocations.eventRecordedIn(transaction);
      const events = this.revocations.eventsRecordedIn(transaction);
      const accessEpoch = this.accessEpoch?.bumpedIn(transaction);
      // A transaction that wrote nothing: nothing to drop, nothing to tell.
      if (topics.size === 0 && eventId === undefined && accessEpoch === undefined) return;
      this.changes.bump(topics);
      // Committed while reachable: this node's caches were just dropped, whatever the epoch was before.
      if (accessEpoch !== undefined) this.seenAccessEpoch = Math.max(this.seenAccessEpoch ?? 0, accessEpoch);
      const epoch = accessEpoch === undefined ? {} : { accessEpoch };
      // No topics said: every topic (as older nodes' messages mean).
      const said = topics.size === CHANGE_TOPICS.length ? {} : { topics: [...topics] };
      this.bus.publish(eventId === undefined ? { type: 'changed', ...said, ...epoch } : { type: 'revoked', eventId, events: [...events], ...said, ...epoch });
    });
    this.store.health.onChange((reachable) => {
      if (!reachable) {
        this.lastHeardAt = this.clock.now();
        this.busLostDuringPartition = !this.bus.connected;
        // A read of announced (not carried) events was under way: it cannot finish now.
        if (this.uncarriedRead) this.behind = true;
        return;
      }
      // Back. An access reduction announced meanwhile (a newer access epoch) is read again with the rest.
      const accessReduced = this.accessReducedUnseen;
      this.accessReducedUnseen = false;
      // Redis up all along and nothing missed: every change made meanwhile already moved the
      // generation, so caches are kept (emptying them all at once would send every request to the
      // database just back); only revocation events are read again, in case one was never announced.
      if (!accessReduced && !this.behind && this.bus.linksNodes && this.bus.connected && !this.busLostDuringPartition) {
        this.refresh(true, false, false);
        return;
      }
      // Otherwise what changed meanwhile is read again, as after an outage of Redis.
      this.refresh(true);
    });
    this.bus.subscribe({
      message: (message) => {
        if (message.type === 'keys-changed') {
          this.notifyKeyListeners();
          return;
        }
        this.noteAccessEpoch(message.accessEpoch);
        const carried = message.type === 'revoked' && message.events !== undefined ? parseRevocationEvents(message.events) : undefined;
        if (carried) this.revocations.apply(carried);
        // A revocation this node cannot read (an older node's message, or too many events to carry):
        // behind at once, not only when the read fails.
        if (message.type === 'revoked' && !carried && !this.store.health.reachable) this.behind = true;
        this.refresh(message.type === 'revoked', carried !== undefined, true, topicsOfMessage(message));
      },
      reconnected: () => {
        if (!this.store.health.reachable) this.busLostDuringPartition = true;
        this.refresh(true);
        // A rotation announced while we were away: the key generation says whether one happened.
        this.notifyKeyListeners();
      },
    });
  }

  /** Token keys changed in the database: tell the other nodes (they reload theirs). */
  keysChanged(): void {
    this.bus.publish({ type: 'keys-changed' });
  }

  /** Hear other nodes' (and the manage CLI's) key changes; returns a function that stops listening. */
  onKeysChanged(listener: () => void): () => void {
    this.keyListeners.add(listener);
    return () => this.keyListeners.delete(listener);
  }

  private readonly keyListeners = new Set<() => void>();

  private notifyKeyListeners(): void {
    for (const listener of this.keyListeners) listener();
  }

  /** The token keys changed (reloaded): drops the validations cached under the old ones. */
  invalidate(): void {
    this.changes.bump(['keys']);
  }

  /** Whether caches may be trusted right now (other nodes' changes are known to reach us). */
  get cachesTrusted(): boolean {
    return this.bus.connected;
  }

  /**
   * True while the database is unreachable: caches serve what they hold whatever its generation (a
   * change that could not be re-read is no reason to wait on a database that does not answer).
   */
  get servingLastKnown(): boolean {
    return !this.store.health.reachable;
  }

  /**
   * While the database is unreachable: whether what caches hold may still be served. Yes while Redis
   * brings the other nodes' revocations; without it, for STALE_VALIDATION_MAX_SECONDS after the node
   * last heard from either; never while the revocation index is known to miss events, nor once
   * another node announced that it took access away (a newer access epoch).
   */
  private lastKnownTrusted(): boolean {
    if (this.behind || this.accessReducedUnseen) return false;
    const now = this.clock.now();
    if (this.bus.linksNodes && this.bus.connected) {
      this.lastHeardAt = now;
      return true;
    }
    return now - this.lastHeardAt <= this.staleValidationMaxMs;
  }

  /**
   * Also reads new revocation events every `intervalMs` while the bus is up. A node cut off from
   * Redis alone (the others still connected) writes revocations nobody is told of: this bounds how
   * long the others can miss them. The access epoch is read with them (checkAccessEpoch).
   */
  pollRevocations(intervalMs: number): void {
    clearInterval(this.poller);
    this.poller = setInterval(() => {
      if (!this.bus.connected || this.behind || this.polling || !this.store.health.reachable) return;
      this.polling = true;
      this.revocations
        .catchUp()
        .then(() => this.checkAccessEpoch())
        .catch((error: unknown) => this.log.error({ reason: databaseUnreachableReason(error) ?? 'query failed' }, 'could not read revocation events'))
        .finally(() => (this.polling = false));
    }, intervalMs);
    this.poller.unref();
  }

  private poller: NodeJS.Timeout | undefined;
  private polling = false;

  async close(): Promise<void> {
    clearInterval(this.poller);
    await this.bus.close();
  }

  /**
   * Whether caches may be used at once: what prepareValidation() would answer true without waiting
   * for anything (no revocation read under way, the bus up, not behind).
   */
  get cachesReady(): boolean {
    if (!this.store.health.reachable) return this.revocationRead === undefined && this.lastKnownTrusted();
    return this.revocationRead === undefined && this.bus.connected && !this.behind;
  }

  /**
   * Call before a validation. Returns whether in-memory caches may be used; when the bus is down it
   * first reads new revocation events from the database, so a revoked token is never accepted.
   * While the database is unreachable: true while what caches hold may be served (see
   * lastKnownTrusted), else a 503 (UnavailableError).
   */
  async prepareValidation(): Promise<boolean> {
    if (!this.store.health.reachable) {
      // A read begun before the partition was known ends with its timeout (then behind, unless carried).
      if (this.revocationRead) await this.revocationRead;
      if (this.lastKnownTrusted()) return true;
      // Behind on revocations (fails at once while unreachable), or unconfirmed for too long.
      if (this.behind) await this.revocations.catchUp();
      throw new UnavailableError(STALE_VALIDATION_MESSAGE, DATABASE_RETRY_AFTER_SECONDS);
    }
    // Another node revoked something and its event is being read: no answer before it is indexed.
    if (this.revocationRead) await this.revocationRead;
    if (this.bus.connected && !this.behind) return true;
    const wasBehind = this.behind;
    await this.revocations.catchUp();
    if (wasBehind && this.bus.connected) {
      this.behind = false;
      this.changes.bumpAll();
    }
    return false;
  }

  /**
   * Another node committed (or we reconnected after missing messages): caches of the `topics` it
   * changed (every topic when not known) drop what they hold and new revocation events are read.
   * When `revoked` (an event was, or may have been, written) and the read fails, this node is
   * behind until a validation's own catch-up succeeds (unless the message carried its events,
   * already indexed).
   */
  private refresh(revoked: boolean, carried = false, flush = true, topics: ReadonlySet<ChangeTopic> = ALL_TOPICS): void {
    if (flush) this.changes.bump(topics);
    const read = this.revocations.catchUp().then(
      () => {
        // Events indexed after the first bump: drop anything cached in between as well.
        if (flush) this.changes.bump(topics);
      },
      (error: unknown) => {
        // Validations catch up themselves (and fail while the database is down) until one succeeds.
        if (revoked && !carried) this.behind = true;
        // While the database is known unreachable, its loss and return are logged once each.
        if (isDatabaseKnownUnreachable(error)) return;
        this.log.error({ reason: databaseUnreachableReason(error) ?? 'query failed' }, 'could not read revocation events');
      },
    );
    if (!revoked) return;
    this.revocationRead = read;
    if (!carried) this.uncarriedRead = read;
    void read.finally(() => {
      if (this.revocationRead === read) this.revocationRead = undefined;
      if (this.uncarriedRead === read) this.uncarriedRead = undefined;
    });
  }

  /** The read of the events another node announced, while under way (it never rejects). */
  private revocationRead: Promise<void> | undefined;
  /** The same, when the events were not carried by the message (only the database has them). */
  private uncarriedRead: Promise<void> | undefined;
}

/** The topics another node's message says it changed: every topic when it says none (an older node). */
function topicsOfMessage(message: ClusterMessage): ReadonlySet<ChangeTopic> {
  if (message.type === 'keys-changed') return ALL_TOPICS;
  // Checked here, as the events are: a sibling's IPC message is not checked by the bus. One topic
  // this node does not know (a newer node's) and it cannot tell which caches hold the change.
  const said: unknown = message.topics;
  if (!Array.isArray(said) || !said.every(isChangeTopic)) return ALL_TOPICS;
  const topics = new Set<ChangeTopic>(said);
  // A revocation event was written, whatever else the message says.
  if (message.type === 'revoked') topics.add('revocation');
  return topics;
}
