import type { Role } from '../assignment/assignment-service.ts';
import type { AssignmentService } from '../assignment/assignment-service.ts';
import type { IdentityService, User } from '../identity/identity-service.ts';
import { publicIdOf } from '../identity/id-mapping.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { EntityManager } from '../store/database.ts';
import { ForbiddenError, NotFoundError } from '../support/errors.ts';
import type { FederationRepository } from './federation-repository.ts';
import type { ProjectRule } from './mapping-types.ts';

/** Who a federated login shadows: Keystone's (idp, protocol, unique id) and what the mapping said of the user. */
export interface ShadowedIdentity {
  idpId: string;
  protocolId: string;
  /** The provider's domain: shadow users live there. */
  domainId: string;
  /** The mapped user id (else its name), URL-quoted (ephemeralUserIdentity). */
  uniqueId: string;
  displayName: string;
  email?: string | undefined;
}

/**
 * Keystone's id of a shadow user: its sha256 public-id generator over
 * {domain_id, entity_type: "user", local_id: unique_id}, i.e. sha256(domain_id + "user" + unique_id).
 */
export function shadowUserId(domainId: string, uniqueId: string): string {
  return publicIdOf({ domainId, entityType: 'user', localId: uniqueId });
}

/**
 * Keystone's shadow_federated_user and the mapped plugin's project provisioning, in the caller's
 * transaction. Group memberships are not stored: the groups go into the token.
 */
export class ShadowUsers {
  constructor(
    private readonly repository: FederationRepository,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    private readonly assignments: AssignmentService,
  ) {}

  /**
   * The federated_user row of (idp, protocol, unique id) and its user: found (display name and
   * email brought up to date, as at each Keystone login) or created with Keystone's id in the
   * provider's domain. A user of that id that already exists (the same unique id through another
   * protocol of a provider in the same domain) gets the new federated_user row.
   */
  async shadow(em: EntityManager, who: ShadowedIdentity): Promise<User> {
    const found = await this.repository.findFederatedUser(em, who.idpId, who.protocolId, who.uniqueId);
    if (found) {
      await this.repository.updateFederatedUserDisplayName(em, who.idpId, who.protocolId, who.uniqueId, who.displayName);
      const existing = await this.identity.getUser(found.userId, em);
      return this.identity.shadowUserIn(em, { id: existing.id, domainId: existing.domainId, name: who.displayName, email: who.email });
    }
    const user = await this.identity.shadowUserIn(em, { id: shadowUserId(who.domainId, who.uniqueId), domainId: who.domainId, name: who.displayName, email: who.email });
    await this.repository.insertFederatedUser(em, { userId: user.id, idpId: who.idpId, protocolId: who.protocolId, uniqueId: who.uniqueId, displayName: who.displayName });
    return user;
  }

  /**
   * Keystone's validate_shadow_mapping and create_projects_from_mapping: every role named must exist
   * (404 "Could not find role: <name>.") and be global or of the provider's domain (403), checked
   * before anything is created; then each project is found by name in the provider's domain or
   * created there, and the user granted the roles on it.
   */
  async provisionProjects(em: EntityManager, user: User, projects: readonly ProjectRule[], idp: { id: string; domainId: string }): Promise<void> {
    if (!projects.length) return;
    const roles = new Map<string, Role>();
    for (const role of await this.assignments.listRoles({}, em)) if (!roles.has(role.name)) roles.set(role.name, role);
    for (const project of projects) {
      for (const wanted of project.roles) {
        const role = roles.get(wanted.name);
        if (!role) throw new NotFoundError(`Could not find role: ${wanted.name}.`);
        if (role.domainId && role.domainId !== idp.domainId) {
          // Keystone's DomainSpecificRoleNotWithinIdPDomain, a Forbidden whose text it hides.
          throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
        }
      }
    }
    for (const project of projects) {
      const row = await this.resources.findOrCreateProjectIn(em, project.name, idp.domainId);
      for (const wanted of project.roles) {
        await this.assignments.grantIn(em, { actorType: 'user', actorId: user.id, targetType: 'project', targetId: row.id, roleId: roles.get(wanted.name)!.id });
      }
    }
  }
}
