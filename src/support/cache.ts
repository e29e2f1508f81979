/** Lookups a cache answered and missed: plain fields, read by metrics, shareable by caches that replace each other. */
export interface CacheStats {
  hits: number;
  misses: number;
}

/**
 * A bounded least-recently-used map whose entries belong to a generation: an entry from an older
 * generation is a miss. Bumping the generation (a committed write of what the cache holds, here or
 * on another node: see events/change-topics.ts) therefore empties the cache in O(1) without a TTL
 * guess.
 */
export class GenerationCache<K, V> {
  private readonly entries = new Map<K, { generation: number; value: V; insertedAt: number }>();
  /** Counts insertions: how far back an entry was (re)inserted, without walking the map. */
  private insertions = 0;
  /**
   * Walks the map in insertion order as entries are evicted. Everything it has passed is deleted, so
   * its next key is the oldest; a fresh keys() iterator would step over every deleted slot at the
   * front of the Map first (11–28 µs per eviction at 10k entries).
   */
  private eviction = this.entries.keys();

  constructor(
    private readonly capacity: number,
    private readonly currentGeneration: () => number,
    readonly stats: CacheStats = { hits: 0, misses: 0 },
    /**
     * True while the source cannot be asked (the database is unreachable): then an entry of an older
     * generation is a hit, as its last known value. Asked only when the generations differ.
     */
    private readonly servingLastKnown?: () => boolean,
  ) {}

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    // A stale entry is kept (until replaced or evicted) as the last known value: see lastKnown().
    if (!entry || (entry.generation !== this.currentGeneration() && !this.servingLastKnown?.())) {
      this.stats.misses++;
      return undefined;
    }
    return this.hit(key, entry);
  }

  /** Like get(), but a missing or stale entry is not counted as a miss (the caller asks get() next). */
  getIfCurrent(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry || (entry.generation !== this.currentGeneration() && !this.servingLastKnown?.())) return undefined;
    return this.hit(key, entry);
  }

  private hit(key: K, entry: { generation: number; value: V; insertedAt: number }): V {
    this.stats.hits++;
    // Re-insert to mark it most recently used, but only once it has drifted into the older half:
    // a delete and set on a large Map per hit cost tens of µs, and an entry inserted fewer than
    // capacity/2 insertions ago is nowhere near eviction.
    if (this.insertions - entry.insertedAt > this.capacity / 2) {
      this.entries.delete(key);
      entry.insertedAt = ++this.insertions;
      this.entries.set(key, entry);
    }
    return entry.value;
  }

  /**
   * Stores a value computed while `generation` was current. One that straddled a change is stored
   * as stale: never a hit while the source can be asked, but the last known value while it cannot
   * (a validation that overlapped another node's unrelated write is as good as one that finished just
   * before it; dropping it left the node with nothing to serve in a partition). It never replaces a
   * value of a newer generation.
   */
  set(key: K, value: V, generation: number): void {
    if (generation !== this.currentGeneration()) {
      const held = this.entries.get(key);
      if (held && held.generation >= generation) return;
    }
    this.entries.delete(key);
    this.entries.set(key, { generation, value, insertedAt: ++this.insertions });
    if (this.entries.size > this.capacity) {
      let oldest = this.eviction.next();
      // A finished Map iterator stays finished even when entries are added later.
      if (oldest.done) {
        this.eviction = this.entries.keys();
        oldest = this.eviction.next();
      }
      this.entries.delete(oldest.value as K);
    }
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  /**
   * The value stored for `key` whatever its generation, without touching its recency: the last
   * known answer, for when the source cannot be asked (the database is unreachable).
   */
  lastKnown(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  /** The generation now; pass it to set() for a value computed from now on. */
  generation(): number {
    return this.currentGeneration();
  }

  get size(): number {
    return this.entries.size;
  }
}

/**
 * Where cached data gets its generation (ClusterSync.epochOf): any committed write anywhere of the
 * topics the cache holds changes it.
 */
export interface CacheEpoch {
  readonly generation: number;
  /** False while other nodes' writes may go unseen (Redis down): nothing is cached then. */
  readonly cachesTrusted: boolean;
}

/**
 * Read-through cache of database lookups for one data generation. Concurrent misses of a key share
 * one load (a burst of requests after a change costs one query, not one per request); a load that
 * straddled a generation change is returned to its callers but not kept. Without an epoch, or
 * while caches are not trusted, every call loads. Values must be treated as read-only: they are
 * shared by every caller (cacheRow() freezes rows).
 */
export class LoadingCache<K, V> {
  private readonly cache: GenerationCache<K, { value: V }>;
  private readonly loading = new Map<K, { generation: number; promise: Promise<V> }>();

  constructor(
    capacity: number,
    private readonly epoch: CacheEpoch | undefined,
  ) {
    this.cache = new GenerationCache(capacity, () => epoch?.generation ?? 0);
  }

  get(key: K, load: () => Promise<V>): Promise<V> {
    const epoch = this.epoch;
    if (!epoch?.cachesTrusted) return load();
    const hit = this.cache.get(key);
    if (hit) return Promise.resolve(hit.value);
    const generation = epoch.generation;
    const pending = this.loading.get(key);
    if (pending && pending.generation === generation) return pending.promise;
    return this.start(key, generation, load);
  }

  /** Loads again whatever is cached (the caller has reason to doubt it) and keeps the result. */
  reload(key: K, load: () => Promise<V>): Promise<V> {
    const epoch = this.epoch;
    if (!epoch?.cachesTrusted) return load();
    this.cache.delete(key);
    return this.start(key, epoch.generation, load);
  }

  private start(key: K, generation: number, load: () => Promise<V>): Promise<V> {
    const promise = load();
    const entry = { generation, promise };
    this.loading.set(key, entry);
    const settled = () => {
      if (this.loading.get(key) === entry) this.loading.delete(key);
    };
    promise.then(
      (value) => {
        settled();
        this.cache.set(key, { value }, generation);
      },
      settled,
    );
    return promise;
  }

  get size(): number {
    return this.cache.size;
  }
}

/**
 * A cacheable copy of an ORM row: a plain object, frozen with its JSON columns, detached from the
 * unit of work that loaded it (which it would otherwise keep alive).
 */
export function cacheRow<T extends object>(row: T): T;
export function cacheRow<T extends object>(row: T | null): T | null;
export function cacheRow<T extends object>(row: T | null): T | null {
  if (!row) return null;
  const copy = { ...row } as Record<string, unknown>;
  for (const value of Object.values(copy)) {
    if (value && typeof value === 'object' && !(value instanceof Date)) Object.freeze(value);
  }
  return Object.freeze(copy) as T;
}
