// autocannon ships no types (and @types/autocannon would be another dependency): the subset
// bench/load.ts uses, from autocannon 9's lib/run.js and lib/aggregateResult.js.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    /** seconds */
    duration?: number;
    /** seconds, per request */
    timeout?: number;
    pipelining?: number;
  }

  export interface Result {
    /** seconds */
    duration: number;
    errors: number;
    timeouts: number;
    resets: number;
    non2xx: number;
    statusCodeStats: Record<string, { count: number }>;
    /** total = completed responses (any status); sent = requests written. */
    requests: { total: number; sent: number; average: number };
  }

  export interface Instance extends EventEmitter {
    stop(): void;
    on(event: 'response', listener: (client: unknown, statusCode: number, bytes: number, responseTimeMs: number) => void): this;
    on(event: 'reqError', listener: (error: Error) => void): this;
    on(event: string, listener: (...args: any[]) => void): this;
  }

  function autocannon(options: Options, callback: (error: Error | null, result: Result) => void): Instance;
  export default autocannon;
}
