/**
 * A bounded least-recently-used map whose entries belong to a generation: an entry from an older
 * generation is a miss. Bumping the generation (any committed write, here or on another node)
 * therefore empties the cache in O(1) without a TTL guess.
 */
export class GenerationCache<K, V> {
  private readonly entries = new Map<K, { generation: number; value: V }>();

  constructor(
    private readonly capacity: number,
    private readonly currentGeneration: () => number,
  ) {}

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.generation !== this.currentGeneration()) {
      this.entries.delete(key);
      return undefined;
    }
    // Re-insert to mark it most recently used.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Stores a value computed while `generation` was current (a result that straddled a change is dropped). */
  set(key: K, value: V, generation: number): void {
    if (generation !== this.currentGeneration()) return;
    this.entries.delete(key);
    this.entries.set(key, { generation, value });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as K);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  /** The generation now; pass it to set() for a value computed from now on. */
  generation(): number {
    return this.currentGeneration();
  }

  get size(): number {
    return this.entries.size;
  }
}
