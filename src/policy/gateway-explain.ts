import type { PolicyDecision, PolicyMatch, PolicyScope } from './gateway-policy-types.ts';

// The gateway's "explain" contract, shared by the gateway (which answers it) and the identity API
// and CLI (which ask it), so neither needs to import the other.

/** Who policy sees: the token's roles (implied ones expanded), scope, project and user. */
export interface PolicySubject {
  roles: string[];
  scope: PolicyScope;
  projectId?: string;
  userId: string;
}

/** A request as a client would send it to the gateway, and who sends it. */
export interface GatewayExplainRequest {
  method: string;
  /** The gateway path, /{service_type}/…, canonicalised exactly as a proxied request is. */
  path: string;
  /** A token to take the subject from; otherwise `subject` is used as given. */
  token?: string;
  subject?: PolicySubject;
}

export interface GatewayExplanation {
  service: string;
  method: string;
  /** The canonical path after /{service_type}: what policy decided on. */
  path: string;
  subject: PolicySubject;
  allowed: boolean;
  reason: PolicyDecision['reason'] | 'application credential access rules';
  rule?: string;
  source?: string;
  line?: number;
  /** Every policy line that matched, allow and deny, in file order. */
  matches: PolicyMatch[];
}

/** The rule that decided, where it was written. */
export interface DecisionRule {
  file: string | null;
  line: number | null;
  text: string;
}

/**
 * One proxied request's decision as GET /v3/gateway/decisions/{request_id} answers it: what was
 * asked, by whom (ids, and the token's audit id: never the token), what the live policy and the
 * shadow policy decided and by which rule, and how it ended. Fixed when recorded: a later policy
 * reload does not change it.
 */
export interface DecisionRecord {
  request_id: string;
  /** ISO 8601, when the response closed. */
  time: string;
  service: string | null;
  method: string;
  path: string;
  user_id: string | null;
  project_id: string | null;
  token_audit_id: string | null;
  /** null: the request ended before any policy decision (401, 404, ...). */
  effect: 'allow' | 'deny' | null;
  reason: string | null;
  rule: DecisionRule | null;
  /** What the shadow policy decided (null: no shadow policy, or no decision). */
  shadow: { effect: 'allow' | 'deny'; rule: DecisionRule | null } | null;
  upstream: string | null;
  status: number;
}

/** POST /v3/gateway/policy/replay: candidate rule files (the live policy's for the others) and how many recorded decisions to replay. */
export interface GatewayReplayRequest {
  files: Record<string, string>;
  limit: number;
}

export interface GatewayReplay {
  /** Recorded decisions a policy had decided, replayed. */
  decisions: number;
  /** Those the candidate decides otherwise, newest first. */
  changed: {
    request_id: string;
    service: string;
    method: string;
    path: string;
    live: 'allow' | 'deny';
    candidate: 'allow' | 'deny';
    /** The candidate's deciding line (null: no line allows). */
    rule: DecisionRule | null;
  }[];
}

export interface GatewayExplainer {
  explain(request: GatewayExplainRequest): Promise<GatewayExplanation>;
  /** The recorded decision of a proxied request, by its X-OpenStack-Request-Id; undefined when none is kept. */
  decision(requestId: string): Promise<DecisionRecord | undefined>;
  /** The recorded decisions decided again with a candidate policy; a candidate that does not load or fails its fixtures is a ValidationError. */
  replay(request: GatewayReplayRequest): Promise<GatewayReplay>;
}
