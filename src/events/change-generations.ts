import { CHANGE_TOPICS, type ChangeTopic } from './change-topics.ts';

/** A counter that moves whenever one of its topics changes: one cache's generation. */
interface View {
  readonly mask: number;
  value: number;
}

const BIT = new Map<ChangeTopic, number>(CHANGE_TOPICS.map((topic, index) => [topic, 1 << index]));

function maskOf(topics: Iterable<ChangeTopic>): number {
  let mask = 0;
  for (const topic of topics) mask |= BIT.get(topic)!;
  return mask;
}

/**
 * One generation per set of topics a cache depends on. A change bumps the counters of the sets it
 * touches when it happens (a handful), so a cache reads its generation as one field, as cheaply as
 * the single generation it replaces.
 */
export class ChangeGenerations {
  private readonly views: View[] = [];
  /** Moves with any change (the generation of a cache that holds a bit of everything). */
  private readonly any: View = this.view(CHANGE_TOPICS);

  /** A generation that changes whenever one of `topics` may have changed. */
  generationOf(topics: Iterable<ChangeTopic>): () => number {
    const view = this.view(topics);
    return () => view.value;
  }

  /** The generation of every topic. */
  get all(): number {
    return this.any.value;
  }

  bump(topics: Iterable<ChangeTopic>): void {
    const mask = maskOf(topics);
    if (mask === 0) return;
    for (const view of this.views) if (view.mask & mask) view.value++;
    this.tell(mask);
  }

  bumpAll(): void {
    for (const view of this.views) view.value++;
    this.tell(~0);
  }

  /**
   * Calls `listener` after each change of one of `topics` (the generations already moved), for what
   * must act at once rather than find out on its next read; returns a function that stops it.
   */
  watch(topics: Iterable<ChangeTopic>, listener: () => void): () => void {
    const watcher = { mask: maskOf(topics), listener };
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  private readonly watchers = new Set<{ mask: number; listener: () => void }>();

  private tell(mask: number): void {
    for (const watcher of this.watchers) if (watcher.mask & mask) watcher.listener();
  }

  private view(topics: Iterable<ChangeTopic>): View {
    const mask = maskOf(topics);
    const existing = this.views.find((view) => view.mask === mask);
    if (existing) return existing;
    const view = { mask, value: 0 };
    this.views.push(view);
    return view;
  }
}
