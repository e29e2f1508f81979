import type { Store } from '../store/database.ts';
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

  constructor(
    private readonly store: Store,
    private readonly revocations: Revocations,
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.store.onCommit(() => {
      this.generation++;
      this.bus.publish({ type: 'changed' });
    });
    this.bus.subscribe({
      message: () => this.refresh(),
      reconnected: () => this.refresh(),
    });
  }

  /** Drops every cache of this node (e.g. the signing keys changed). */
  invalidate(): void {
    this.generation++;
  }

  /** Whether caches may be trusted right now (other nodes' changes are known to reach us). */
  get cachesTrusted(): boolean {
    return this.bus.connected;
  }

  async close(): Promise<void> {
    await this.bus.close();
  }

  /**
   * Call before a validation. Returns whether in-memory caches may be used; when the bus is down it
   * first reads new revocation events from the database, so a revoked token is never accepted.
   */
  async prepareValidation(): Promise<boolean> {
    if (this.bus.connected) return true;
    await this.revocations.catchUp();
    return false;
  }

  private refresh(): void {
    this.generation++;
    this.revocations.catchUp().then(
      () => {
        // Events indexed after the first bump: drop anything cached in between as well.
        this.generation++;
      },
      (error: unknown) => this.log.error({ err: error }, 'could not read revocation events'),
    );
  }
}
