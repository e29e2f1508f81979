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

export interface GatewayExplainer {
  explain(request: GatewayExplainRequest): Promise<GatewayExplanation>;
}
