import { ForbiddenError } from '../errors.ts';
import type { TokenContext } from '../token/token-service.ts';

/** Attributes of the thing acted upon, named as Keystone's policy targets name them. */
export interface PolicyTarget {
  /** The user the request is about (target.user.id). */
  userId?: string;
  /** The project the request is about. */
  projectId?: string;
  /** The domain the request is about. */
  domainId?: string;
  /** The owner of the token being validated or revoked (target.token.user_id). */
  tokenUserId?: string;
}

/** Decides identity API calls; throws Keystone's 403 for a denial. */
export interface IdentityAuthorizer {
  enforce(auth: TokenContext, action: string, target?: PolicyTarget): void;
}

type Rule = (auth: TokenContext, target: PolicyTarget) => boolean;

const hasRole = (auth: TokenContext, name: string) => auth.roles.some((role) => role.name === name);
// Keystone 22 (enforce_scope=false) treats any token holding admin as a cloud administrator.
const admin: Rule = (auth) => hasRole(auth, 'admin');
const systemReader: Rule = (auth) => auth.scope.type === 'system' && hasRole(auth, 'reader');
const self: Rule = (auth, target) => target.userId !== undefined && target.userId === auth.user.id;
const anyone: Rule = () => true;
const either =
  (...rules: Rule[]): Rule =>
  (auth, target) =>
    rules.some((rule) => rule(auth, target));

const tokenSubject: Rule = (auth, target) => target.tokenUserId !== undefined && target.tokenUserId === auth.user.id;
const scopedToProject: Rule = (auth, target) => auth.scope.type === 'project' && auth.scope.project.id === target.projectId;
const inDomain: Rule = (auth, target) =>
  (auth.scope.type === 'domain' && auth.scope.domain.id === target.domainId) ||
  (auth.scope.type === 'project' && auth.scope.project.domainId === target.domainId);

/**
 * Interim rules until Keystone's full default policy lands as Casbin files: writes need admin,
 * readers of the system scope may read, users may read themselves and their own tokens.
 */
const RULES: Record<string, Rule> = {
  'identity:get_user': either(admin, systemReader, self),
  'identity:list_user_projects': either(admin, systemReader, self),
  'identity:list_groups_for_user': either(admin, systemReader, self),
  'identity:validate_token': either(admin, systemReader, (auth) => hasRole(auth, 'service'), tokenSubject),
  'identity:check_token': either(admin, systemReader, tokenSubject),
  'identity:revoke_token': either(admin, tokenSubject),
  'identity:get_project': either(admin, systemReader, scopedToProject),
  'identity:get_domain': either(admin, systemReader, inDomain),
  'identity:list_regions': anyone,
  'identity:get_region': anyone,
  'identity:get_auth_catalog': anyone,
  'identity:get_auth_projects': anyone,
  'identity:get_auth_domains': anyone,
  'identity:get_auth_system': anyone,
  'identity:create_application_credential': self,
  'identity:get_application_credential': either(admin, systemReader, self),
  'identity:list_application_credentials': either(admin, systemReader, self),
  'identity:delete_application_credential': either(admin, self),
  'identity:get_access_rule': either(admin, systemReader, self),
  'identity:list_access_rules': either(admin, systemReader, self),
  'identity:delete_access_rule': either(admin, self),
  'identity:list_revoke_events': either(admin, (auth) => hasRole(auth, 'service')),
};

const READ_ACTION = /^identity:(get|list|check)_/;

export class InterimIdentityAuthorizer implements IdentityAuthorizer {
  enforce(auth: TokenContext, action: string, target: PolicyTarget = {}): void {
    const rule = RULES[action] ?? (READ_ACTION.test(action) ? either(admin, systemReader) : admin);
    if (!rule(auth, target)) throw ForbiddenError.action(action);
  }
}
