import type { Store } from '../store/database.ts';
import { databaseUnreachableReason } from '../store/unavailable.ts';
import type { EventBus } from './event-bus.ts';
import type { Revocations } from './revocation.ts';

interface Logger {
  error(object: object, message: string): void;
}

/**
 * Keeps this node's in-memory token state (revocation index, validation and role caches) in step
 * with the database and the other nodes. Every committed write bumps `generation`, which drops what
 * caches hold, and tells the other nodes (Redis), which then re-read revocation events from the
 * database and bump theirs. While Redis is configured but unreachable, other nodes' writes go
 * unseen, so each validation re-reads new revocation events and caches are not trusted.
 */
export class ClusterSync {
  /** Changes whenever data that tokens depend on may have changed, here or on another node. */
  generation = 0;

  /**
   * Set when the catch-up after another node's revocation (or after an outage of Redis) could not
   * read the database: the revocation index may miss events until a later catch-up succeeds.
   */
  private behind = false;

  constructor(
    private readonly store: Store,
    private readonly revocations: Revocations,
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.store.onCommit((transaction) => {
      this.generation++;
      // Whether the commit revoked anything tells the others whether missing it would be unsafe.
      const eventId = this.revocations.eventRecordedIn(transaction);
      this.bus.publish(eventId === undefined ? { type: 'changed' } : { type: 'revoked', eventId });
    });
    this.bus.subscribe({
      message: (message) => {
        if (message.type === 'keys-changed') this.notifyKeyListeners();
        else this.refresh(message.type === 'revoked');
      },
      reconnected: () => {
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

  /** Drops every cache of this node (e.g. the signing keys changed). */
  invalidate(): void {
    this.generation++;
  }

  /** Whether caches may be trusted right now (other nodes' changes are known to reach us). */
  get cachesTrusted(): boolean {
    return this.bus.connected;
  }

  /**
   * Also reads new revocation events every `intervalMs` while the bus is up. A node cut off from
   * Redis alone (the others still connected) writes revocations nobody is told of: this bounds how
   * long the others can miss them.
   */
  pollRevocations(intervalMs: number): void {
    clearInterval(this.poller);
    this.poller = setInterval(() => {
      if (!this.bus.connected || this.behind || this.polling) return;
      this.polling = true;
      this.revocations
        .catchUp()
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
    return this.revocationRead === undefined && this.bus.connected && !this.behind;
  }

  /**
   * Call before a validation. Returns whether in-memory caches may be used; when the bus is down it
   * first reads new revocation events from the database, so a revoked token is never accepted.
   */
  async prepareValidation(): Promise<boolean> {
    // Another node revoked something and its event is being read: no answer before it is indexed.
    if (this.revocationRead) await this.revocationRead;
    if (this.bus.connected && !this.behind) return true;
    const wasBehind = this.behind;
    await this.revocations.catchUp();
    if (wasBehind && this.bus.connected) {
      this.behind = false;
      this.generation++;
    }
    return false;
  }

  /**
   * Another node committed (or we reconnected after missing messages): caches drop what they hold
   * and new revocation events are read. When `revoked` (an event was, or may have been, written)
   * and the read fails, this node is behind until a validation's own catch-up succeeds.
   */
  private refresh(revoked: boolean): void {
    this.generation++;
    const read = this.revocations.catchUp().then(
      () => {
        // Events indexed after the first bump: drop anything cached in between as well.
        this.generation++;
      },
      (error: unknown) => {
        // Validations catch up themselves (and fail while the database is down) until one succeeds.
        if (revoked) this.behind = true;
        this.log.error({ reason: databaseUnreachableReason(error) ?? 'query failed' }, 'could not read revocation events');
      },
    );
    if (!revoked) return;
    this.revocationRead = read;
    void read.finally(() => {
      if (this.revocationRead === read) this.revocationRead = undefined;
    });
  }

  /** The read of the events another node announced, while under way (it never rejects). */
  private revocationRead: Promise<void> | undefined;
}
