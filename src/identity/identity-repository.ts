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
import { stringConditions, type StringMatch } from '../store/filters.ts';
import { after, orderByOf, type PageRequest, type SortKey } from '../store/keyset.ts';

export interface UserQuery {
  ids?: string[];
  name?: StringMatch[];
  domainId?: string;
  enabled?: boolean;
  groupId?: string;
}

export interface GroupQuery {
  ids?: string[];
  name?: StringMatch[];
  domainId?: string;
  userId?: string;
}

/** The order of user lists (name, then id: unique). */
export const USER_ORDER: readonly SortKey<UserRow>[] = [
  { property: 'name', column: 'name', direction: 'asc' },
  { property: 'id', column: 'id', direction: 'asc' },
];

/** Storage of users, their password history, groups and memberships. */
export class IdentityRepository {
  findUser(em: EntityManager, id: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { id });
  }

  findUserByName(em: EntityManager, name: string, domainId: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { name, domainId });
  }

  /** The users matching `query` in USER_ORDER; with `page`, only that page of them. */
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
    return em.find(UserEntity, and.length ? { $and: and } : {}, { orderBy: orderByOf(USER_ORDER), ...(page ? { limit: page.limit } : {}) });
  }

  /** Current password rows (the newest per user) for the given users. */
  async currentPasswords(em: EntityManager, userIds: string[]): Promise<Map<string, PasswordRow>> {
    const current = new Map<string, PasswordRow>();
    if (userIds.length === 0) return current;
    const rows = await em.find(PasswordEntity, { userId: { $in: userIds } }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    for (const row of rows) if (!current.has(row.userId)) current.set(row.userId, row);
    return current;
  }

  /** Newest first. */
  passwordHistory(em: EntityManager, userId: string): Promise<PasswordRow[]> {
    return em.find(PasswordEntity, { userId }, { orderBy: { createdAt: 'desc', id: 'desc' } });
  }

  /**
   * One more failed authentication, atomically (concurrent attempts all count). A lock that has
   * run out starts a new count, as Keystone resets the counter when the lockout duration is over.
   */
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
}
