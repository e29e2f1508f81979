import { ForbiddenError } from '../support/errors.ts';
import type { TokenContext } from '../token/token-service.ts';
import type { IdentityDecision, IdentityPolicy, IdentitySubject, IdentityTarget } from './identity-policy.ts';

/** Decides identity API calls; throws Keystone's 403 for a denial. */
export interface IdentityAuthorizer {
  enforce(auth: TokenContext, action: string, target?: IdentityTarget): void;
}

/** What identity policy sees of a token: Keystone's policy credentials. */
export function identitySubject(auth: TokenContext): IdentitySubject {
  const subject: IdentitySubject = { roles: auth.roles.map((role) => role.name), scope: auth.scope.type, userId: auth.user.id };
  if (auth.scope.type === 'project') {
    subject.projectId = auth.scope.project.id;
    subject.projectDomainId = auth.scope.project.domainId;
  } else if (auth.scope.type === 'domain') {
    subject.domainId = auth.scope.domain.id;
  }
  return subject;
}

/**
 * Keystone's rules (identity:*) decided by the identity policy files, policies/identity/. The
 * policy is read through `current()` on every call, so a hot reload takes effect at once.
 */
export class PolicyIdentityAuthorizer implements IdentityAuthorizer {
  constructor(private readonly current: () => Pick<IdentityPolicy, 'decide'>) {}

  enforce(auth: TokenContext, action: string, target: IdentityTarget = {}): void {
    if (!this.decide(auth, action, target).allowed) throw ForbiddenError.action(action);
  }

  decide(auth: TokenContext, action: string, target: IdentityTarget = {}): IdentityDecision {
    return this.current().decide(action, identitySubject(auth), target);
  }
}
