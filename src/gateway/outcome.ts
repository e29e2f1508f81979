import type { Authorization, ProxiedRequest } from './proxied-request.ts';

/**
 * A stage's verdict that the request ends here, answered by the gateway rather than the upstream:
 * the status and message the client gets (Keystone's error envelope), headers to send with them,
 * and the reason for the audit line.
 */
export class Refusal {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly reason: string,
    readonly headers: readonly (readonly [name: string, value: string])[] = [],
  ) {}
}

/** How a proxied request ended, for metrics: the gateway's own decision, else 'error' (400, 404, 405, 5xx before forwarding). */
export type GatewayDecision = 'allowed' | 'denied' | 'unauthenticated' | 'error';

/**
 * How one proxied request ended: the audit line (logged as is, so in its field names; never the
 * token itself), and what the metrics and the denial events read.
 */
export interface Outcome {
  request_id: string;
  method: string;
  /** The canonical path ('' when the request never got that far). */
  path: string;
  service?: string | undefined;
  audit_id?: string | undefined;
  user_id?: string | undefined;
  project_id?: string | undefined;
  upstream?: string | undefined;
  effect?: 'allow' | 'deny' | undefined;
  rule?: string | undefined;
  reason?: string | undefined;
  /** With a shadow policy, only where it decided otherwise than the live one: its effect and rule. */
  shadow?: ShadowOutcome | undefined;
  status: number;
  latency_ms: number;
}

export interface ShadowOutcome {
  effect: 'allow' | 'deny';
  rule: string | undefined;
}

/** The outcome of `proxied` as its response closes with `status` after `elapsedMs`: what its stages found, so far as it got. */
export function outcomeOf(proxied: ProxiedRequest, status: number, elapsedMs: number): Outcome {
  const { route, caller, authorization } = proxied;
  const scope = caller?.user.scope;
  return {
    request_id: proxied.requestId,
    method: proxied.request.method ?? '',
    path: route ? route.target.path : '',
    service: route?.serviceType,
    audit_id: caller?.user.auditIds[0],
    user_id: caller?.user.user.id,
    project_id: scope?.type === 'project' ? scope.project.id : undefined,
    upstream: proxied.upstream?.origin,
    effect: authorization ? (authorization.allowed ? 'allow' : 'deny') : undefined,
    rule: authorization?.rule || undefined,
    reason: proxied.reason,
    shadow: proxied.shadow === undefined || proxied.shadow.allowed === authorization!.allowed ? undefined : shadowOutcomeOf(proxied.shadow),
    status,
    latency_ms: Math.round(elapsedMs * 1000) / 1000,
  };
}

/** What the shadow policy decided, as the audit line and the decision lookup show it. */
export function shadowOutcomeOf(shadow: Authorization): ShadowOutcome {
  return { effect: shadow.allowed ? 'allow' : 'deny', rule: shadow.rule || undefined };
}

export function decisionOf(outcome: Outcome): GatewayDecision {
  if (outcome.effect === 'allow') return 'allowed';
  if (outcome.effect === 'deny') return 'denied';
  return outcome.status === 401 ? 'unauthenticated' : 'error';
}

/** A refusal of the gateway's own: a 401 before any policy decision, or a policy deny (a 401 or 403 of the service is not ours). */
export function refusedByGateway(outcome: Outcome): boolean {
  return outcome.effect === 'deny' || (outcome.effect === undefined && outcome.status === 401);
}
