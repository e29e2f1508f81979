import type { Clock } from '../clock.ts';
import { AuthenticationError, ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { Revocations } from '../events/revocation.ts';
import { newId } from '../ids.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import { cleanOptions } from '../resource/resource-service.ts';
import type { EntityManager, Store } from '../store/database.ts';
import {
  GroupEntity,
  MembershipEntity,
  PasswordEntity,
  UserEntity,
  type GroupRow,
  type Json,
  type PasswordRow,
  type UserRow,
} from '../store/entities.ts';
import { isUniqueViolation, type StringMatch } from '../store/filters.ts';
import { IdentityRepository } from './identity-repository.ts';
import type { PasswordHasher } from './password-hash.ts';

/** A user as the API and tokens see it: the row plus its current password's expiry. */
export interface User {
  id: string;
  name: string;
  domainId: string;
  enabled: boolean;
  defaultProjectId: string | null;
  options: Json;
  extra: Json;
  passwordExpiresAt: Date | null;
}

export type Group = GroupRow;

export interface UserInput {
  name: string;
  domainId: string;
  password?: string | null | undefined;
  enabled?: boolean | undefined;
  defaultProjectId?: string | null | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface UserPatch {
  id?: string | undefined;
  name?: string | undefined;
  domainId?: string | undefined;
  password?: string | null | undefined;
  enabled?: boolean | undefined;
  defaultProjectId?: string | null | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface UserFilter {
  ids?: string[];
  name?: StringMatch[];
  domainId?: string;
  enabled?: boolean;
}

export interface GroupInput {
  name: string;
  domainId: string;
  description?: string | null | undefined;
  extra?: Json | undefined;
}

export interface GroupPatch {
  id?: string | undefined;
  name?: string | undefined;
  domainId?: string | undefined;
  description?: string | null | undefined;
  extra?: Json | undefined;
}

export interface GroupFilter {
  ids?: string[];
  name?: StringMatch[];
  domainId?: string;
}

/** How a client names the user it authenticates as. */
export type UserReference = { id: string } | { name: string; domainId: string } | { name: string; domainName: string };

/** Users, passwords, groups and memberships. */
export class IdentityService {
  private readonly repository = new IdentityRepository();

  constructor(
    private readonly store: Store,
    private readonly resources: ResourceService,
    private readonly hasher: PasswordHasher,
    private readonly revocations: Revocations,
    private readonly clock: Clock,
  ) {}

  // ---- users -----------------------------------------------------------------------------

  async getUser(id: string, em: EntityManager = this.store.reader()): Promise<User> {
    const row = await this.repository.findUser(em, id);
    if (!row) throw NotFoundError.of('user', id);
    const passwords = await this.repository.currentPasswords(em, [id]);
    return toUser(row, passwords.get(id));
  }

  async findUser(id: string): Promise<User | null> {
    const em = this.store.reader();
    const row = await this.repository.findUser(em, id);
    if (!row) return null;
    return toUser(row, (await this.repository.currentPasswords(em, [id])).get(id));
  }

  async listUsers(filter: UserFilter & { groupId?: string }): Promise<User[]> {
    const em = this.store.reader();
    const rows = await this.repository.listUsers(em, filter);
    const passwords = await this.repository.currentPasswords(em, rows.map((row) => row.id));
    return rows.map((row) => toUser(row, passwords.get(row.id)));
  }

  async createUser(input: UserInput): Promise<User> {
    const name = input.name.trim();
    if (!name) throw new ValidationError("Invalid input for field 'name': the name must contain a non-space character.");
    const passwordHash = typeof input.password === 'string' ? await this.hasher.hash(input.password) : null;
    const now = new Date(this.clock.now());
    return this.store
      .transaction(async (em) => {
        const domain = await this.resources.findAny(input.domainId, em);
        if (!domain || !domain.isDomain) throw NotFoundError.of('domain', input.domainId);
        if (input.defaultProjectId) await this.refuseDomainAsDefaultProject(em, input.defaultProjectId);
        const row = em.create(UserEntity, {
          id: newId(),
          domainId: domain.id,
          name,
          enabled: input.enabled ?? true,
          defaultProjectId: input.defaultProjectId ?? null,
          extra: input.extra ?? {},
          options: cleanOptions({}, input.options),
          failedAuthCount: 0,
          failedAuthAt: null,
          lastActiveAt: null,
          createdAt: now,
        });
        // The user row must exist before its password row (the unit of work does not order them).
        await em.flush();
        const password =
          input.password === undefined ? undefined : this.newPassword(em, row.id, passwordHash, now, false);
        await em.flush();
        return toUser(row, password);
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('user', `Duplicate entry found with name ${name} at domain ID ${input.domainId}`);
        }
        throw error;
      });
  }

  async updateUser(id: string, patch: UserPatch): Promise<User> {
    const passwordHash = typeof patch.password === 'string' ? await this.hasher.hash(patch.password) : null;
    const now = new Date(this.clock.now());
    const name = patch.name?.trim();
    return this.store
      .transaction(async (em) => {
        const row = await this.repository.findUser(em, id);
        if (!row) throw NotFoundError.of('user', id);
        if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change user ID');
        if (patch.domainId !== undefined && patch.domainId !== row.domainId) throw new ValidationError('Cannot change Domain ID');
        if (name !== undefined) {
          if (!name) throw new ValidationError("Invalid input for field 'name': the name must contain a non-space character.");
          row.name = name;
        }
        if (patch.defaultProjectId !== undefined) {
          if (patch.defaultProjectId) await this.refuseDomainAsDefaultProject(em, patch.defaultProjectId);
          row.defaultProjectId = patch.defaultProjectId;
        }
        if (patch.options !== undefined) row.options = cleanOptions(row.options, patch.options);
        if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
        let revoke = false;
        if (patch.enabled !== undefined) {
          if (!patch.enabled && row.enabled) revoke = true;
          // Re-enabling clears a lockout, as in Keystone.
          if (patch.enabled) row.failedAuthCount = 0;
          row.enabled = patch.enabled;
        }
        let password: PasswordRow | undefined;
        if (patch.password !== undefined) {
          password = this.newPassword(em, id, passwordHash, now, false);
          revoke = true;
        }
        if (revoke) await this.revocations.record(em, { userId: id });
        await em.flush();
        return toUser(row, password ?? (await this.repository.currentPasswords(em, [id])).get(id));
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('user', `Duplicate entry found with name ${name} at domain ID ${patch.domainId ?? ''}`);
        }
        throw error;
      });
  }

  deleteUser(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.repository.findUser(em, id);
      if (!row) throw NotFoundError.of('user', id);
      await this.revocations.record(em, { userId: id });
      em.remove(row);
      await em.flush();
    });
  }

  /**
   * Checks a password for token issue. Every failure is the same generic 401, and an unknown user
   * costs a hash verification too, so a client cannot tell which check failed.
   */
  async authenticatePassword(reference: UserReference, password: string): Promise<User> {
    const em = this.store.reader();
    const row = await this.findUserRow(em, reference);
    if (!row) {
      await this.hasher.verifyDummy(password);
      throw new AuthenticationError();
    }
    const current = (await this.repository.currentPasswords(em, [row.id])).get(row.id);
    const verified = await this.hasher.verify(password, current?.passwordHash);
    if (!verified || !row.enabled) throw new AuthenticationError();
    const domain = await this.resources.findAny(row.domainId, em);
    if (!domain?.enabled) throw new AuthenticationError();
    const user = toUser(row, current);
    if (user.passwordExpiresAt && user.passwordExpiresAt.getTime() <= this.clock.now() && user.options.ignore_password_expiry !== true) {
      throw new AuthenticationError(`The password is expired and needs to be changed for user: ${row.id}.`);
    }
    return user;
  }

  /** Self-service password change (no token needed; the original password proves the caller). */
  async changePassword(userId: string, originalPassword: string, newPassword: string): Promise<void> {
    const em = this.store.reader();
    const row = await this.repository.findUser(em, userId);
    if (!row) {
      await this.hasher.verifyDummy(originalPassword);
      throw new AuthenticationError();
    }
    const current = (await this.repository.currentPasswords(em, [userId])).get(userId);
    if (!(await this.hasher.verify(originalPassword, current?.passwordHash))) throw new AuthenticationError();
    if (!row.enabled) throw new AuthenticationError(`The account is disabled for user: ${userId}.`);
    if (row.options.lock_password === true) {
      throw new ValidationError(
        'You cannot change your password at this time due to password policy disallowing password changes. ' +
          'Please contact your administrator to reset your password.',
      );
    }
    const passwordHash = await this.hasher.hash(newPassword);
    const now = new Date(this.clock.now());
    await this.store.transaction(async (transaction) => {
      this.newPassword(transaction, userId, passwordHash, now, true);
      await this.revocations.record(transaction, { userId });
      await transaction.flush();
    });
  }

  /** The user a token request names, or null (unknown user, or its domain unknown or disabled). */
  async resolveUser(reference: UserReference): Promise<User | null> {
    const em = this.store.reader();
    const row = await this.findUserRow(em, reference);
    return row ? toUser(row, (await this.repository.currentPasswords(em, [row.id])).get(row.id)) : null;
  }

  /** Finds the user a token request names; domains are resolved by id or name and must exist. */
  private async findUserRow(em: EntityManager, reference: UserReference): Promise<UserRow | null> {
    if ('id' in reference) return this.repository.findUser(em, reference.id);
    const domain =
      'domainId' in reference
        ? await this.resources.findAny(reference.domainId, em)
        : await this.resources.findDomainByName(reference.domainName, em);
    if (!domain || !domain.isDomain || !domain.enabled) return null;
    return this.repository.findUserByName(em, reference.name, domain.id);
  }

  private newPassword(em: EntityManager, userId: string, passwordHash: string | null, now: Date, selfService: boolean): PasswordRow {
    return em.create(PasswordEntity, { userId, passwordHash, createdAt: now, expiresAt: null, selfService });
  }

  private async refuseDomainAsDefaultProject(em: EntityManager, projectId: string): Promise<void> {
    const project = await this.resources.findAny(projectId, em);
    if (project?.isDomain) throw new ValidationError(`User's default project ID cannot be a domain ID: ${projectId}`);
  }

  // ---- groups ----------------------------------------------------------------------------

  async getGroup(id: string, em: EntityManager = this.store.reader()): Promise<Group> {
    const row = await this.repository.findGroup(em, id);
    if (!row) throw NotFoundError.of('group', id);
    return row;
  }

  listGroups(filter: GroupFilter & { userId?: string }): Promise<Group[]> {
    return this.repository.listGroups(this.store.reader(), filter);
  }

  createGroup(input: GroupInput): Promise<Group> {
    return this.store
      .transaction(async (em) => {
        const domain = await this.resources.findAny(input.domainId, em);
        if (!domain || !domain.isDomain) throw NotFoundError.of('domain', input.domainId);
        const row = em.create(GroupEntity, {
          id: newId(),
          domainId: domain.id,
          name: input.name,
          description: input.description ?? '',
          extra: input.extra ?? {},
        });
        await em.flush();
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('group', `Duplicate entry found with name ${input.name} at domain ID ${input.domainId}`);
        }
        throw error;
      });
  }

  updateGroup(id: string, patch: GroupPatch): Promise<Group> {
    return this.store
      .transaction(async (em) => {
        const row = await this.getGroup(id, em);
        if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change group ID');
        if (patch.domainId !== undefined && patch.domainId !== row.domainId) throw new ValidationError('Cannot change Domain ID');
        if (patch.name !== undefined) row.name = patch.name;
        if (patch.description !== undefined) row.description = patch.description ?? '';
        if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
        await em.flush();
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('group', `Duplicate entry found with name ${patch.name} at domain ID ${patch.domainId ?? ''}`);
        }
        throw error;
      });
  }

  deleteGroup(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getGroup(id, em);
      em.remove(row);
      await em.flush();
    });
  }

  async addUserToGroup(groupId: string, userId: string): Promise<void> {
    await this.store.transaction(async (em) => {
      await this.getGroup(groupId, em);
      if (!(await this.repository.findUser(em, userId))) throw NotFoundError.of('user', userId);
      if (await this.repository.isMember(em, userId, groupId)) return;
      em.create(MembershipEntity, { userId, groupId });
      await em.flush();
    });
  }

  async removeUserFromGroup(groupId: string, userId: string): Promise<void> {
    await this.store.transaction(async (em) => {
      await this.assertMembership(em, groupId, userId);
      await em.nativeDelete(MembershipEntity, { userId, groupId });
    });
  }

  async checkUserInGroup(groupId: string, userId: string): Promise<void> {
    await this.assertMembership(this.store.reader(), groupId, userId);
  }

  async groupIdsOfUser(userId: string): Promise<string[]> {
    return this.repository.groupIdsOfUser(this.store.reader(), userId);
  }

  /** Members of each group, for expanding group assignments. */
  async membersOfGroups(groupIds: string[]): Promise<Map<string, string[]>> {
    return this.repository.userIdsInGroups(this.store.reader(), groupIds);
  }

  private async assertMembership(em: EntityManager, groupId: string, userId: string): Promise<void> {
    await this.getGroup(groupId, em);
    if (!(await this.repository.findUser(em, userId))) throw NotFoundError.of('user', userId);
    if (!(await this.repository.isMember(em, userId, groupId))) {
      throw new NotFoundError(`User '${userId}' not found in group '${groupId}'`);
    }
  }
}

function toUser(row: UserRow, password: PasswordRow | undefined): User {
  return {
    id: row.id,
    name: row.name,
    domainId: row.domainId,
    enabled: row.enabled,
    defaultProjectId: row.defaultProjectId ?? null,
    options: row.options,
    extra: row.extra,
    passwordExpiresAt: password?.expiresAt ?? null,
  };
}
