/**
 * What a process's resident memory is made of, for npm run bench:memory: its mappings
 * (/proc/<pid>/smaps) grouped by what backs them, and the V8 heap by space (the service's
 * /metrics, nodejs_heap_space_size_total_bytes). RSS alone says that a worker grew, not where.
 */

/** Resident MB by kind of mapping: 'anonymous', 'malloc heap', 'node binary', 'other files', 'stacks', or `[anon:<name>]`. */
export type MappingComposition = Record<string, number>;

const MAPPING_HEADER = /^[0-9a-f]+-[0-9a-f]+\s+\S+\s+\S+\s+\S+\s+\d+\s*(.*)$/;

/** Sums smaps' `Rss:` by mapping kind; `executable` is node's path (its pages are file-backed and shared by a node's workers). */
export function mappingComposition(smaps: string, executable: string): MappingComposition {
  const kb: Record<string, number> = {};
  let kind = 'anonymous';
  for (const line of smaps.split('\n')) {
    const header = MAPPING_HEADER.exec(line);
    if (header) {
      kind = mappingKind(header[1]!.trim(), executable);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kb[kind] = (kb[kind] ?? 0) + Number(rss[1]);
  }
  return Object.fromEntries(Object.entries(kb).map(([name, value]) => [name, megabytes(value * 1024)]));
}

/**
 * Proportional set size in MB (the sum of smaps' `Pss:`): each page counted once, shared pages divided
 * among the processes that map them. A node's workers share node's binary (its text is ~50 MB of every
 * worker's RSS), so a node's memory is its processes' PSS summed, where their RSS would count it in each.
 */
export function proportionalMb(smaps: string): number {
  let kb = 0;
  for (const match of smaps.matchAll(/^Pss:\s+(\d+) kB/gm)) kb += Number(match[1]);
  return megabytes(kb * 1024);
}

function mappingKind(path: string, executable: string): string {
  if (path === '') return 'anonymous';
  if (path === '[heap]') return 'malloc heap';
  if (path === '[stack]' || path.startsWith('[stack:')) return 'stacks';
  if (path.startsWith('[anon:')) return path; // a region its owner named (prctl PR_SET_VMA_ANON_NAME)
  if (path.startsWith('[')) return 'kernel'; // [vdso], [vvar], [vsyscall]
  if (path === executable || path === `${executable} (deleted)`) return 'node binary';
  return 'other files';
}

/**
 * Committed MB of each V8 heap space (prom-client's names: new, old, code, trusted, large_object…),
 * from /metrics text: all workers summed, divided by `divisor` (the worker count for their mean).
 */
export function heapSpaces(metricsText: string, divisor = 1): Record<string, number> {
  const bytes: Record<string, number> = {};
  for (const match of metricsText.matchAll(/^nodejs_heap_space_size_total_bytes\{(?:[^}]*,)?space="([^"]+)"[^}]*\} (\S+)$/gm)) {
    bytes[match[1]!] = (bytes[match[1]!] ?? 0) + Number(match[2]);
  }
  for (const match of metricsText.matchAll(/^nodejs_external_memory_bytes(?:\{[^}]*\})? (\S+)$/gm)) {
    bytes['(external)'] = (bytes['(external)'] ?? 0) + Number(match[1]);
  }
  return Object.fromEntries(Object.entries(bytes).map(([name, value]) => [name, megabytes(value / divisor)]));
}

/** Bytes in MB, to 0.1. */
export function megabytes(bytes: number): number {
  return Math.round(bytes / 1024 / 102.4) / 10;
}
