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

/** Storage of users, their password history, groups and memberships. */
export class IdentityRepository {
  findUser(em: EntityManager, id: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { id });
  }

  findUserByName(em: EntityManager, name: string, domainId: string): Promise<UserRow | null> {
    return em.findOne(UserEntity, { name, domainId });
  }

  async listUsers(em: EntityManager, query: UserQuery): Promise<UserRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.groupId !== undefined) {
      const members = await em.find(MembershipEntity, { groupId: query.groupId });
      and.push({ id: { $in: members.map((member) => member.userId) } });
    }
    if (query.ids) and.push({ id: { $in: query.ids } });
    if (query.name) and.push(...stringConditions('name', query.name));
    if (query.domainId !== undefined) and.push({ domainId: query.domainId });
    if (query.enabled !== undefined) and.push({ enabled: query.enabled });
    return em.find(UserEntity, and.length ? { $and: and } : {}, { orderBy: { name: 'asc', id: 'asc' } });
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
