import { AuthenticationError, ForbiddenError } from '../support/errors.ts';
import type { PolicySubject } from '../policy/gateway-explain.ts';
import type { GatewayPolicy } from '../policy/gateway-policy.ts';
import type { PolicyDecision } from '../policy/gateway-policy-types.ts';
import type { TokenContext } from '../token/token-service.ts';
import { accessRulesAllow } from './access-rules.ts';
import { Refusal } from './outcome.ts';
import type { Authorization, ProxiedRequest } from './proxied-request.ts';

const ACCESS_RULES_REFUSAL: Authorization = Object.freeze({ allowed: false, reason: 'application credential access rules' });

export interface GatewayPolicyHolder {
  /** The policy in force; replaced as a whole on reload. */
  current(): Pick<GatewayPolicy, 'decide' | 'explain' | 'directory'>;
  /** The shadow policy (POLICY_SHADOW_DIR), decided beside the live one and never enforced; absent when none is configured. */
  shadow?: (() => Pick<GatewayPolicy, 'decide'>) | undefined;
}

/**
 * Stage 4: application-credential access rules, then the policy of the service, decided on the
 * canonical path; a refusal is 403.
 */
export class Authoriser {
  private readonly subjects = new WeakMap<TokenContext, PolicySubject>();
  /**
   * One Authorization per policy decision (the policy caches its decisions): a request holds a
   * shared object, not one of its own that the decision ring would keep alive (decision-store.ts).
   */
  private readonly authorizations = new WeakMap<PolicyDecision, Authorization>();
  /** Read once: without a shadow policy the request pays one undefined check. */
  private readonly shadow: (() => Pick<GatewayPolicy, 'decide'>) | undefined;

  constructor(private readonly policy: GatewayPolicyHolder) {
    this.shadow = policy.shadow;
  }

  authorise(proxied: ProxiedRequest): Refusal | undefined {
    const { route, caller } = proxied;
    const subject = this.subjectOf(caller!.user);
    const method = proxied.request.method!;
    proxied.subject = subject;
    const authorization = this.decideWith(this.policy.current(), caller!.user, caller!.privilegedService, subject, route!.serviceType, method, route!.path);
    proxied.authorization = authorization;
    if (this.shadow !== undefined) proxied.shadow = this.decideWith(this.shadow(), caller!.user, caller!.privilegedService, subject, route!.serviceType, method, route!.path);
    return authorization.allowed ? undefined : new Refusal(403, ForbiddenError.NOT_AUTHORIZED, authorization.reason);
  }

  /**
   * Application-credential access rules first, then the policy of the service. keystonemiddleware
   * waives access rules whenever a valid service token comes along; here only for a service token
   * with a SERVICE_TOKEN_ROLES role: we are the public ingress, where anyone may add X-Service-Token,
   * and any other token of one's own must not lift a leaked credential's restrictions.
   */
  decide(user: TokenContext | undefined, privilegedService: boolean, subject: PolicySubject, serviceType: string, method: string, path: string): Authorization {
    return this.decideWith(this.policy.current(), user, privilegedService, subject, serviceType, method, path);
  }

  /** `decide` by `policy` (the live one or the shadow: the access rules apply to both alike). */
  private decideWith(
    policy: Pick<GatewayPolicy, 'decide'>,
    user: TokenContext | undefined,
    privilegedService: boolean,
    subject: PolicySubject,
    serviceType: string,
    method: string,
    path: string,
  ): Authorization {
    const accessRules = user?.applicationCredential?.accessRules ?? [];
    if (accessRules.length > 0 && !privilegedService && !accessRulesAllow(accessRules, serviceType, method, path)) {
      return ACCESS_RULES_REFUSAL;
    }
    // Field by field, not `...subject`: one shape for every request (a spread copies through a
    // builtin, and a token without a project would give the request another shape).
    const decision = policy.decide({
      service: serviceType,
      method,
      path,
      roles: subject.roles,
      scope: subject.scope,
      projectId: subject.projectId,
      userId: subject.userId,
    });
    let authorization = this.authorizations.get(decision);
    if (authorization === undefined) {
      authorization = { allowed: decision.allowed, reason: decision.reason };
      if (decision.rule !== undefined) Object.assign(authorization, { rule: decision.rule, source: decision.source, line: decision.line });
      this.authorizations.set(decision, authorization);
    }
    return authorization;
  }

  /** A validated token's policy subject, built once (the roles array is the policy's memo key too). */
  private subjectOf(user: TokenContext): PolicySubject {
    let subject = this.subjects.get(user);
    if (!subject) {
      subject = policySubject(user);
      this.subjects.set(user, subject);
    }
    return subject;
  }
}

/** The policy subject of a scoped token (an unscoped one is refused before policy runs). */
export function policySubject(user: TokenContext): PolicySubject {
  if (user.scope.type === 'unscoped') throw new AuthenticationError();
  return {
    roles: user.roles.map((role) => role.name),
    scope: user.scope.type,
    ...(user.scope.type === 'project' ? { projectId: user.scope.project.id } : {}),
    userId: user.user.id,
  };
}
