import { raw } from '@mikro-orm/core';
import type { EntityManager } from '../store/database.ts';
import {
  GroupEntity,
  MembershipEntity,
  PasswordEntity,
  UserEntity,
  type GroupRow,
  type PasswordRow,
  type UserRow,
} from '../store/entities.ts';
import { stringConditions } from '../store/filters.ts';
import { after, orderByOf, type PageRequest, type SortKey } from '../store/keyset.ts';
import { plainRows } from '../store/plain-rows.ts';
import type {
  GroupChanges,
  GroupQuery,
  IdentityBackend,
  IdentityWrites,
  NewGroup,
  NewPassword,
  NewUser,
  UserChanges,
  UserQuery,
} from './identity-repository.ts';

/** The order of user lists (name, then id: unique). */
export const USER_ORDER: readonly SortKey<UserRow>[] = [
  { property: 'name', column: 'name', direction: 'asc' },
  { property: 'id', column: 'id', direction: 'asc' },
];

/** The SQL identity driver: users, their password history, groups and memberships in this database. */
export class SqlIdentityBackend implements IdentityBackend, IdentityWrites {
  readonly writes: IdentityWrites = this;

  // ---- users -----------------------------------------------------------------------------

  findUser(em: EntityManager, id: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { id });
  }

  findUserByName(em: EntityManager, name: string, domainId: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { name, domainId });
  }

  async listUsers(em: EntityManager, query: UserQuery, page?: PageRequest<UserRow>): Promise<UserRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.groupId !== undefined) {
      // A subquery, not the member ids: a group may hold every user, and each page repeats this.
      and.push({ [raw((alias: string) => `${alias}.id`)]: { $in: raw('(select user_id from group_membership where group_id = ?)', [query.groupId]) } });
    }
    if (query.ids) and.push({ id: { $in: query.ids } });
    if (query.name) and.push(...stringConditions('name', query.name));
    if (query.domainId !== undefined) and.push({ domainId: query.domainId });
    if (query.enabled !== undefined) and.push({ enabled: query.enabled });
    if (page?.after) and.push(after(USER_ORDER, page.after));
    return plainRows<UserRow>(em, UserEntity, and.length ? { $and: and } : {}, { orderBy: orderByOf(USER_ORDER), limit: page?.limit });
  }

  async createUser(em: EntityManager, user: NewUser): Promise<UserRow> {
    const row = em.create(UserEntity, { ...user, failedAuthCount: 0, failedAuthAt: null, lastActiveAt: null });
    // The user row must exist before its password row (the unit of work does not order them).
    await em.flush();
    return row;
  }

  async updateUser(em: EntityManager, user: UserRow, changes: UserChanges): Promise<UserRow> {
    Object.assign(user, changes);
    await em.flush();
    return user;
  }

  async deleteUser(em: EntityManager, user: UserRow): Promise<void> {
    em.remove(user);
    await em.flush();
  }

  // ---- passwords -------------------------------------------------------------------------

  async currentPasswords(em: EntityManager, userIds: string[]): Promise<Map<string, PasswordRow>> {
    const current = new Map<string, PasswordRow>();
    if (userIds.length === 0) return current;
    const rows = await plainRows<PasswordRow>(em, PasswordEntity, { userId: { $in: userIds } }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    for (const row of rows) if (!current.has(row.userId)) current.set(row.userId, row);
    return current;
  }

  passwordHistory(em: EntityManager, userId: string): Promise<PasswordRow[]> {
    return em.find(PasswordEntity, { userId }, { orderBy: { createdAt: 'desc', id: 'desc' } });
  }

  async setPassword(em: EntityManager, userId: string, password: NewPassword, keep: number): Promise<PasswordRow> {
    const history = await this.passwordHistory(em, userId);
    const now = password.createdAt;
    for (const [index, previous] of history.entries()) {
      if (index >= keep) em.remove(previous);
      else if (!previous.expiresAt || previous.expiresAt > now) previous.expiresAt = now;
    }
    const row = em.create(PasswordEntity, { userId, ...password });
    await em.flush();
    return row;
  }

  // ---- lockout and activity bookkeeping --------------------------------------------------

  async recordFailedAuth(em: EntityManager, userId: string, now: Date, lock: { attempts: number; expiredBefore: Date }): Promise<void> {
    await em.getConnection().execute(
      `update identity_user set
         failed_auth_count = case when failed_auth_count >= ? and failed_auth_at <= ? then 1 else failed_auth_count + 1 end,
         failed_auth_at = ?
       where id = ?`,
      [lock.attempts, lock.expiredBefore, now, userId],
    );
  }

  async resetFailedAuth(em: EntityManager, userId: string): Promise<void> {
    await em.nativeUpdate(UserEntity, { id: userId }, { failedAuthCount: 0, failedAuthAt: null });
  }

  async recordActivity(em: EntityManager, userId: string, now: Date): Promise<void> {
    await em.nativeUpdate(UserEntity, { id: userId }, { lastActiveAt: now });
  }

  // ---- groups and memberships ------------------------------------------------------------

  findGroup(em: EntityManager, id: string): Promise<GroupRow | null> {
    return em.findOne(GroupEntity, { id });
  }

  async listGroups(em: EntityManager, query: GroupQuery): Promise<GroupRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.userId !== undefined) {
      and.push({ id: { $in: await this.groupIdsOfUser(em, query.userId) } });
    }
    if (query.ids) and.push({ id: { $in: query.ids } });
    if (query.name) and.push(...stringConditions('name', query.name));
    if (query.domainId !== undefined) and.push({ domainId: query.domainId });
    return em.find(GroupEntity, and.length ? { $and: and } : {}, { orderBy: { name: 'asc', id: 'asc' } });
  }

  async createGroup(em: EntityManager, group: NewGroup): Promise<GroupRow> {
    const row = em.create(GroupEntity, group);
    await em.flush();
    return row;
  }

  async updateGroup(em: EntityManager, group: GroupRow, changes: GroupChanges): Promise<GroupRow> {
    Object.assign(group, changes);
    await em.flush();
    return group;
  }

  async deleteGroup(em: EntityManager, group: GroupRow): Promise<void> {
    em.remove(group);
    await em.flush();
  }

  async groupIdsOfUser(em: EntityManager, userId: string): Promise<string[]> {
    const memberships = await em.find(MembershipEntity, { userId });
    return memberships.map((membership) => membership.groupId);
  }

  async userIdsInGroups(em: EntityManager, groupIds: string[]): Promise<Map<string, string[]>> {
    const byGroup = new Map<string, string[]>();
    if (groupIds.length === 0) return byGroup;
    const memberships = await em.find(MembershipEntity, { groupId: { $in: groupIds } });
    for (const membership of memberships) {
      const members = byGroup.get(membership.groupId);
      if (members) members.push(membership.userId);
      else byGroup.set(membership.groupId, [membership.userId]);
    }
    return byGroup;
  }

  async isMember(em: EntityManager, userId: string, groupId: string): Promise<boolean> {
    return (await em.count(MembershipEntity, { userId, groupId })) > 0;
  }

  async addMember(em: EntityManager, userId: string, groupId: string): Promise<void> {
    em.create(MembershipEntity, { userId, groupId });
    await em.flush();
  }

  async removeMember(em: EntityManager, userId: string, groupId: string): Promise<void> {
    await em.nativeDelete(MembershipEntity, { userId, groupId });
  }
}
