import type { Client, Entry } from 'ldapts';
import type { Clock } from '../../support/clock.ts';
import type { EntityManager } from '../../store/database.ts';
import type { GroupRow, Json, PasswordRow, UserRow } from '../../store/entities.ts';
import { matchesString } from '../../store/filters.ts';
import type { PageRequest } from '../../store/keyset.ts';
import type { IdMappings, MappedEntityType } from '../id-mapping.ts';
import type { DomainBackendFactory, GroupQuery, IdentityBackend, UserQuery } from '../identity-repository.ts';
import { parseLdapOptions, type LdapOptions } from './ldap-options.ts';
import { LdapPool } from './ldap-pool.ts';

/** RFC 4515: a value inside a search filter. */
export function escapeFilterValue(value: string): string {
  return value.replace(/[\\*()\u0000]/g, (character) => `\\${character.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** The first RDN of a DN: its attribute (lowercase) and unescaped value. */
function firstRdn(dn: string): { attribute: string; value: string } | undefined {
  const match = /^\s*([^=,+\s]+)\s*=\s*((?:\\.|[^,+\\])*)/.exec(dn);
  if (!match) return undefined;
  const value = match[2]!
    .trim()
    .replace(/\\([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    .replace(/\\(.)/g, '$1');
  return { attribute: match[1]!.toLowerCase(), value };
}

/** A DN compared as the directory would (case and spacing around separators ignored). */
function normalizeDn(dn: string): string {
  return dn
    .split(/(?<!\\),/)
    .map((rdn) => rdn.trim().replace(/\s*=\s*/, '=').toLowerCase())
    .join(',');
}

function values(entry: Entry, attribute: string): string[] {
  const found = Object.keys(entry).find((key) => key.toLowerCase() === attribute.toLowerCase() && key !== 'dn');
  if (!found) return [];
  const value = entry[found]!;
  const list = Array.isArray(value) ? value : [value];
  return list.map((item) => (Buffer.isBuffer(item) ? item.toString('utf8') : item));
}

function first(entry: Entry, attribute: string): string | undefined {
  return values(entry, attribute)[0];
}

/**
 * Keystone's LDAP identity driver (read-only, as in Zed): one domain's users and groups are read
 * from a directory; their public ids are the sha256 mapping, stored in SQL the first time an entity
 * is seen. Passwords are checked by binding as the user. Keystone keeps no lockout or activity
 * bookkeeping for directory users (its PCI options apply to SQL users only): those are no-ops.
 */
export class LdapIdentityBackend implements IdentityBackend {
  readonly writes = null;
  private readonly pool: LdapPool;

  constructor(
    readonly domainId: string,
    private readonly options: LdapOptions,
    private readonly mappings: IdMappings,
    private readonly clock: Clock,
  ) {
    this.pool = new LdapPool(options);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  // ---- searches --------------------------------------------------------------------------

  private async search(base: string, filter: string, attributes: string[], scope?: 'base'): Promise<Entry[]> {
    return this.pool.withConnection(async (client: Client) => {
      const { searchEntries } = await client.search(base, {
        scope: scope ?? this.options.queryScope,
        filter,
        attributes,
        ...(this.options.pageSize > 0 ? { paged: { pageSize: this.options.pageSize } } : {}),
      });
      return searchEntries;
    });
  }

  private userFilter(...conditions: string[]): string {
    const extra = this.options.userFilter ? [wrap(this.options.userFilter)] : [];
    return `(&(objectClass=${escapeFilterValue(this.options.userObjectclass)})${extra.join('')}${conditions.join('')})`;
  }

  private groupFilter(...conditions: string[]): string {
    const extra = this.options.groupFilter ? [wrap(this.options.groupFilter)] : [];
    return `(&(objectClass=${escapeFilterValue(this.options.groupObjectclass)})${extra.join('')}${conditions.join('')})`;
  }

  private get userAttributes(): string[] {
    const o = this.options;
    return [o.userIdAttribute, o.userNameAttribute, o.userMailAttribute, o.userDescriptionAttribute, o.userEnabledAttribute];
  }

  private get groupAttributes(): string[] {
    const o = this.options;
    return [o.groupIdAttribute, o.groupNameAttribute, o.groupDescAttribute, o.groupMemberAttribute];
  }

  private searchUsers(...conditions: string[]): Promise<Entry[]> {
    return this.search(this.options.userTreeDn, this.userFilter(...conditions), this.userAttributes);
  }

  private searchGroups(...conditions: string[]): Promise<Entry[]> {
    return this.search(this.options.groupTreeDn, this.groupFilter(...conditions), this.groupAttributes);
  }

  /** `(|(attr=a)(attr=b))` for a set of values; null when there are none (nothing can match). */
  private anyOf(attribute: string, wanted: string[]): string | null {
    if (wanted.length === 0) return null;
    const terms = wanted.map((value) => `(${attribute}=${escapeFilterValue(value)})`);
    return terms.length === 1 ? terms[0]! : `(|${terms.join('')})`;
  }

  /** The local ids of the public ids of this domain's entities of one type (unknown ones dropped). */
  private async localIds(em: EntityManager, publicIds: string[], type: MappedEntityType): Promise<string[]> {
    const local: string[] = [];
    for (const publicId of publicIds) {
      const mapping = await this.mappings.find(em, publicId);
      if (mapping && mapping.domainId === this.domainId && mapping.entityType === type) local.push(mapping.localId);
    }
    return local;
  }

  // ---- users -----------------------------------------------------------------------------

  /** Keystone's enabled: the mask (AD), else TRUE/FALSE (or a number), inverted if asked; absent → the default. */
  private enabledOf(entry: Entry): boolean {
    const o = this.options;
    const raw = first(entry, o.userEnabledAttribute) ?? o.userEnabledDefault;
    if (o.userEnabledMask > 0) {
      const flags = Number.parseInt(raw, 10);
      return Number.isNaN(flags) ? true : (flags & o.userEnabledMask) !== o.userEnabledMask;
    }
    const word = raw.trim().toLowerCase();
    let enabled = word === 'true' ? true : word === 'false' ? false : /^-?\d+$/.test(word) ? Number(word) !== 0 : true;
    if (o.userEnabledInvert) enabled = !enabled;
    return enabled;
  }

  private async usersOf(em: EntityManager, entries: Entry[]): Promise<UserRow[]> {
    const usable = entries.filter((entry) => first(entry, this.options.userIdAttribute) !== undefined);
    const ids = await this.mappings.remember(
      em,
      usable.map((entry) => ({ domainId: this.domainId, entityType: 'user', localId: first(entry, this.options.userIdAttribute)! })),
    );
    const now = new Date(this.clock.now());
    return usable.map((entry, index) => {
      const extra: Json = {};
      const email = first(entry, this.options.userMailAttribute);
      const description = first(entry, this.options.userDescriptionAttribute);
      if (email !== undefined) extra.email = email;
      if (description !== undefined) extra.description = description;
      return {
        id: ids[index]!,
        domainId: this.domainId,
        name: first(entry, this.options.userNameAttribute) ?? first(entry, this.options.userIdAttribute)!,
        enabled: this.enabledOf(entry),
        defaultProjectId: null,
        extra,
        options: {},
        failedAuthCount: 0,
        failedAuthAt: null,
        // Keystone's inactivity rule does not apply to directory users: always just active.
        lastActiveAt: now,
        createdAt: now,
      } as UserRow;
    });
  }

  /** The directory entry of a user by public id. */
  private async userEntry(em: EntityManager, id: string): Promise<Entry | undefined> {
    const [local] = await this.localIds(em, [id], 'user');
    if (local === undefined) return undefined;
    const [entry] = await this.searchUsers(`(${this.options.userIdAttribute}=${escapeFilterValue(local)})`);
    return entry;
  }

  async findUser(em: EntityManager, id: string): Promise<UserRow | null> {
    const entry = await this.userEntry(em, id);
    return entry ? ((await this.usersOf(em, [entry]))[0] ?? null) : null;
  }

  async findUserByName(em: EntityManager, name: string, domainId: string): Promise<UserRow | null> {
    if (domainId !== this.domainId) return null;
    const entries = await this.searchUsers(`(${this.options.userNameAttribute}=${escapeFilterValue(name)})`);
    const [row] = await this.usersOf(em, entries);
    return row ?? null;
  }

  /** In the directory's order (as Keystone); a page continues after the page's last row. */
  async listUsers(em: EntityManager, query: UserQuery, page?: PageRequest<UserRow>): Promise<UserRow[]> {
    if (query.domainId !== undefined && query.domainId !== this.domainId) return [];
    const conditions: string[] = [];
    if (query.ids) {
      const condition = this.anyOf(this.options.userIdAttribute, await this.localIds(em, query.ids, 'user'));
      if (!condition) return [];
      conditions.push(condition);
    }
    if (query.groupId !== undefined) {
      const members = (await this.memberLocalIds(em, [query.groupId])).get(query.groupId) ?? [];
      const condition = this.anyOf(this.options.userIdAttribute, members);
      if (!condition) return [];
      conditions.push(condition);
    }
    for (const match of query.name ?? []) {
      if (match.operator === 'equals') conditions.push(`(${this.options.userNameAttribute}=${escapeFilterValue(match.value)})`);
    }
    let rows = await this.usersOf(em, await this.searchUsers(...conditions));
    if (query.name) rows = rows.filter((row) => matchesString(row.name, query.name!));
    if (query.enabled !== undefined) rows = rows.filter((row) => row.enabled === query.enabled);
    if (!page) return rows;
    if (!page.after) return rows.slice(0, page.limit);
    // The previous page's last user left the directory meanwhile: the list ends there (never starts over).
    const previous = rows.findIndex((row) => row.id === page.after!.id);
    return previous < 0 ? [] : rows.slice(previous + 1, previous + 1 + page.limit);
  }

  // ---- passwords: the directory's own; nothing stored here -----------------------------------

  async currentPasswords(): Promise<Map<string, PasswordRow>> {
    return new Map();
  }

  async passwordHistory(): Promise<PasswordRow[]> {
    return [];
  }

  /** A simple bind as the user's entry. */
  async checkPassword(em: EntityManager, user: UserRow, password: string): Promise<boolean> {
    const entry = await this.userEntry(em, user.id);
    return entry ? this.pool.checkPassword(entry.dn, password) : false;
  }

  async recordFailedAuth(): Promise<void> {}
  async resetFailedAuth(): Promise<void> {}
  async recordActivity(): Promise<void> {}

  // ---- groups and memberships ------------------------------------------------------------

  private async groupsOf(em: EntityManager, entries: Entry[]): Promise<GroupRow[]> {
    const usable = entries.filter((entry) => first(entry, this.options.groupIdAttribute) !== undefined);
    const ids = await this.mappings.remember(
      em,
      usable.map((entry) => ({ domainId: this.domainId, entityType: 'group', localId: first(entry, this.options.groupIdAttribute)! })),
    );
    return usable.map(
      (entry, index) =>
        ({
          id: ids[index]!,
          domainId: this.domainId,
          name: first(entry, this.options.groupNameAttribute) ?? first(entry, this.options.groupIdAttribute)!,
          description: first(entry, this.options.groupDescAttribute) ?? '',
          extra: {},
        }) as GroupRow,
    );
  }

  private async groupEntries(em: EntityManager, publicIds: string[]): Promise<Entry[]> {
    const condition = this.anyOf(this.options.groupIdAttribute, await this.localIds(em, publicIds, 'group'));
    return condition ? this.searchGroups(condition) : [];
  }

  async findGroup(em: EntityManager, id: string): Promise<GroupRow | null> {
    const [row] = await this.groupsOf(em, await this.groupEntries(em, [id]));
    return row ?? null;
  }

  async listGroups(em: EntityManager, query: GroupQuery): Promise<GroupRow[]> {
    if (query.domainId !== undefined && query.domainId !== this.domainId) return [];
    let rows: GroupRow[];
    if (query.userId !== undefined) rows = await this.groupsOf(em, await this.groupEntriesOfUser(em, query.userId));
    else if (query.ids) rows = await this.groupsOf(em, await this.groupEntries(em, query.ids));
    else {
      const exact = (query.name ?? []).filter((match) => match.operator === 'equals');
      rows = await this.groupsOf(em, await this.searchGroups(...exact.map((match) => `(${this.options.groupNameAttribute}=${escapeFilterValue(match.value)})`)));
    }
    if (query.ids) {
      const wanted = new Set(query.ids);
      rows = rows.filter((row) => wanted.has(row.id));
    }
    if (query.name) rows = rows.filter((row) => matchesString(row.name, query.name!));
    return rows;
  }

  /** The groups whose member attribute names the user (its DN, or its id with group_members_are_ids). */
  private async groupEntriesOfUser(em: EntityManager, userId: string): Promise<Entry[]> {
    const entry = await this.userEntry(em, userId);
    if (!entry) return [];
    const member = this.options.groupMembersAreIds ? first(entry, this.options.userIdAttribute)! : entry.dn;
    return this.searchGroups(`(${this.options.groupMemberAttribute}=${escapeFilterValue(member)})`);
  }

  async groupIdsOfUser(em: EntityManager, userId: string): Promise<string[]> {
    return (await this.groupsOf(em, await this.groupEntriesOfUser(em, userId))).map((group) => group.id);
  }

  /** The local ids of each group's members, from its member attribute (DNs resolved to ids). */
  private async memberLocalIds(em: EntityManager, groupIds: string[]): Promise<Map<string, string[]>> {
    const entries = await this.groupEntries(em, groupIds);
    const groups = await this.groupsOf(em, entries);
    const members = new Map<string, string[]>();
    for (const [index, entry] of entries.entries()) {
      const local: string[] = [];
      for (const member of values(entry, this.options.groupMemberAttribute)) {
        const id = this.options.groupMembersAreIds ? member : await this.localIdOfDn(member);
        if (id !== undefined) local.push(id);
      }
      if (local.length) members.set(groups[index]!.id, local);
    }
    return members;
  }

  /** Keystone's _dn_to_id: the RDN's value when it is the id attribute, else the entry's id attribute. */
  private async localIdOfDn(dn: string): Promise<string | undefined> {
    const rdn = firstRdn(dn);
    if (!rdn) return undefined;
    if (rdn.attribute === this.options.userIdAttribute.toLowerCase()) {
      // Only members inside the user tree are users of this domain.
      return normalizeDn(dn).endsWith(normalizeDn(this.options.userTreeDn)) ? rdn.value : undefined;
    }
    try {
      const [entry] = await this.search(dn, this.userFilter(), [this.options.userIdAttribute], 'base');
      return entry ? first(entry, this.options.userIdAttribute) : undefined;
    } catch (error) {
      if (error instanceof Error && error.name === 'NoSuchObjectError') return undefined;
      throw error;
    }
  }

  async userIdsInGroups(em: EntityManager, groupIds: string[]): Promise<Map<string, string[]>> {
    const byGroup = new Map<string, string[]>();
    for (const [groupId, locals] of await this.memberLocalIds(em, groupIds)) {
      byGroup.set(groupId, await this.mappings.remember(em, locals.map((localId) => ({ domainId: this.domainId, entityType: 'user', localId }))));
    }
    return byGroup;
  }

  async isMember(em: EntityManager, userId: string, groupId: string): Promise<boolean> {
    return (await this.userIdsInGroups(em, [groupId])).get(groupId)?.includes(userId) ?? false;
  }
}

function wrap(filter: string): string {
  const trimmed = filter.trim();
  return trimmed.startsWith('(') ? trimmed : `(${trimmed})`;
}

/** The `ldap` identity driver: a domain's back end from its `[ldap]` options (a bad option is a ValidationError). */
export function ldapDriver(mappings: IdMappings, clock: Clock): DomainBackendFactory {
  return (domainId, groups) => new LdapIdentityBackend(domainId, parseLdapOptions(groups.ldap ?? {}), mappings, clock);
}
