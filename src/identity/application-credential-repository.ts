import type { EntityManager } from '../store/database.ts';
import {
  AccessRuleEntity,
  ApplicationCredentialAccessRuleEntity,
  ApplicationCredentialEntity,
  ApplicationCredentialRoleEntity,
  RoleEntity,
  type AccessRuleRow,
  type ApplicationCredentialRow,
  type RoleRow,
} from '../store/entities.ts';

export type NewApplicationCredential = ApplicationCredentialRow;

export interface AccessRuleFilter {
  service?: string;
  path?: string;
  method?: string;
}

/**
 * Storage of application credentials, the roles they carry and their access rules (the rules are
 * the user's, shared by that user's credentials). Writes are stored when they return.
 */
export class ApplicationCredentialRepository {
  // ---- credentials -------------------------------------------------------------------------

  findCredential(em: EntityManager, id: string): Promise<ApplicationCredentialRow | null> {
    return em.findOne(ApplicationCredentialEntity, { id });
  }

  findCredentialOfUser(em: EntityManager, userId: string, id: string): Promise<ApplicationCredentialRow | null> {
    return em.findOne(ApplicationCredentialEntity, { id, userId });
  }

  findCredentialByName(em: EntityManager, userId: string, name: string): Promise<ApplicationCredentialRow | null> {
    return em.findOne(ApplicationCredentialEntity, { userId, name });
  }

  /** A user's credentials by name (only those named `name` when given). */
  listCredentials(em: EntityManager, userId: string, name?: string): Promise<ApplicationCredentialRow[]> {
    return em.find(ApplicationCredentialEntity, { userId, ...(name === undefined ? {} : { name }) }, { orderBy: { name: 'asc' } });
  }

  async createCredential(em: EntityManager, credential: NewApplicationCredential): Promise<void> {
    em.create(ApplicationCredentialEntity, credential);
    // The credential row must exist before the rows that point at it (the unit of work does not order them).
    await em.flush();
  }

  /** Gives a stored credential its roles and access rules (both stored already). */
  async linkCredential(em: EntityManager, credentialId: string, roleIds: string[], accessRuleIds: string[]): Promise<void> {
    for (const roleId of roleIds) em.create(ApplicationCredentialRoleEntity, { applicationCredentialId: credentialId, roleId });
    for (const accessRuleId of accessRuleIds) {
      em.create(ApplicationCredentialAccessRuleEntity, { applicationCredentialId: credentialId, accessRuleId });
    }
    await em.flush();
  }

  async deleteCredential(em: EntityManager, credential: ApplicationCredentialRow): Promise<void> {
    em.remove(credential);
    await em.flush();
  }

  /** The roles a credential carries. */
  async rolesOf(em: EntityManager, credentialId: string): Promise<RoleRow[]> {
    const links = await em.find(ApplicationCredentialRoleEntity, { applicationCredentialId: credentialId });
    return links.length ? em.find(RoleEntity, { id: { $in: links.map((link) => link.roleId) } }) : [];
  }

  /** The access rules a credential is limited to. */
  async accessRulesOf(em: EntityManager, credentialId: string): Promise<AccessRuleRow[]> {
    const links = await em.find(ApplicationCredentialAccessRuleEntity, { applicationCredentialId: credentialId });
    return links.length ? em.find(AccessRuleEntity, { id: { $in: links.map((link) => link.accessRuleId) } }) : [];
  }

  // ---- roles a credential may carry ----------------------------------------------------------

  findRoles(em: EntityManager, ids: string[]): Promise<RoleRow[]> {
    return em.find(RoleEntity, { id: { $in: ids } });
  }

  findRole(em: EntityManager, id: string): Promise<RoleRow | null> {
    return em.findOne(RoleEntity, { id });
  }

  /** A global role (not domain-specific) by name. */
  findGlobalRoleByName(em: EntityManager, name: string): Promise<RoleRow | null> {
    return em.findOne(RoleEntity, { name, domainId: null });
  }

  // ---- access rules --------------------------------------------------------------------------

  listAccessRules(em: EntityManager, userId: string, filter: AccessRuleFilter = {}): Promise<AccessRuleRow[]> {
    return em.find(AccessRuleEntity, { userId, ...filter }, { orderBy: { service: 'asc', path: 'asc', method: 'asc' } });
  }

  findAccessRule(em: EntityManager, userId: string, id: string): Promise<AccessRuleRow | null> {
    return em.findOne(AccessRuleEntity, { id, userId });
  }

  /** The user's rule for exactly this service, path and method. */
  findMatchingAccessRule(em: EntityManager, rule: Omit<AccessRuleRow, 'id'>): Promise<AccessRuleRow | null> {
    return em.findOne(AccessRuleEntity, rule);
  }

  async createAccessRule(em: EntityManager, rule: AccessRuleRow): Promise<AccessRuleRow> {
    const row = em.create(AccessRuleEntity, rule);
    await em.flush();
    return row;
  }

  async isAccessRuleInUse(em: EntityManager, id: string): Promise<boolean> {
    return (await em.count(ApplicationCredentialAccessRuleEntity, { accessRuleId: id })) > 0;
  }

  async deleteAccessRule(em: EntityManager, rule: AccessRuleRow): Promise<void> {
    em.remove(rule);
    await em.flush();
  }
}
