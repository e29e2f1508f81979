import type { CacheStats } from '../support/cache.ts';
import type { PathTemplate } from './path-template.ts';

// The gateway policy's vocabulary: what a request to decide, a decision and a fixture case look like.

export type PolicyScope = 'project' | 'domain' | 'system';

export interface PolicyRequest {
  /** The service type, i.e. the first path segment at the gateway (compute, placement, ...). */
  service: string;
  /** Role names of the token, implied roles already expanded; never changed once passed (it is memoised). */
  roles: string[];
  scope: PolicyScope;
  projectId?: string;
  userId: string;
  method: string;
  /** The canonical path after the service prefix, e.g. /v2.1/abc/servers. */
  path: string;
}

export interface PolicyDecision {
  allowed: boolean;
  /** the policy line that decided, as written in the file, e.g. "p, member, project, /v2.1/{project_id}/servers, GET, allow" */
  rule?: string;
  /** file it came from */
  source?: string;
  /** 1-based line number of `rule` in `source` */
  line?: number;
  reason: 'allowed' | 'denied by rule' | 'no rule allows' | 'unknown service';
}

export interface PolicyMatch {
  rule: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
}

export interface PolicyExplanation extends PolicyDecision {
  /** Every line that matched the request, allow and deny, in file order. */
  matches: PolicyMatch[];
}

export interface PolicyFixtureCase {
  /** The fixture file, relative to the policy directory, and the case's position in it. */
  file: string;
  index: number;
  name: string;
  request: PolicyRequest;
  expect: 'allow' | 'deny';
  rule?: string;
}

export interface GatewayPolicyOptions {
  /** Bound of the decision cache (entries); 0 disables it. */
  decisionCacheSize?: number;
  /** Where the decision cache counts hits and misses; pass the same object to every reload so counts carry over. */
  decisionCacheStats?: CacheStats;
}

/** One rule line as loaded: what Casbin holds, where it was written, and its compiled template. */
export interface PolicyLine {
  /** [sub, scope, obj, act, eft]: the row Casbin holds. */
  fields: string[];
  /** The line as written (trimmed). */
  text: string;
  source: string;
  line: number;
  effect: 'allow' | 'deny';
  template: PathTemplate;
}
