import type { EntityManager } from '../store/database.ts';
import type { GroupRow, Json, PasswordRow, UserRow } from '../store/entities.ts';
import type { StringMatch } from '../store/filters.ts';
import type { PageRequest } from '../store/keyset.ts';
import { ValidationError } from '../support/errors.ts';
import { identityDriverOf, type DomainConfigGroups, type DomainIdentityConfigSource } from './domain-identity-config.ts';
import { mayBePublicId, type IdMappings } from './id-mapping.ts';

// The identity back end interface, as Keystone's identity drivers: each domain's users, groups and
// memberships come from one back end (SQL today; a read-only LDAP directory for some domains next).
// Every method takes the entity manager of the caller's unit of work: the SQL driver reads and writes
// through it (inside the service's transaction when there is one); a directory driver still needs it
// for what stays in SQL (Keystone keeps its public-id mapping there).

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

/** A user row about to be stored. */
export type NewUser = Pick<UserRow, 'id' | 'domainId' | 'name' | 'enabled' | 'defaultProjectId' | 'extra' | 'options' | 'createdAt'>;

/** The columns a user update may change. */
export type UserChanges = Partial<
  Pick<UserRow, 'name' | 'enabled' | 'defaultProjectId' | 'extra' | 'options' | 'failedAuthCount' | 'failedAuthAt' | 'lastActiveAt'>
>;

/** A new current password. */
export interface NewPassword {
  passwordHash: string | null;
  createdAt: Date;
  expiresAt: Date | null;
  selfService: boolean;
}

export type NewGroup = Pick<GroupRow, 'id' | 'domainId' | 'name' | 'description'> & { extra: Json };

export type GroupChanges = Partial<Pick<GroupRow, 'name' | 'description' | 'extra'>>;

/** What a back end supplies for the domains it serves. */
export interface IdentityBackend {
  /**
   * How this back end changes users, groups and memberships; null for a read-only one (Keystone's
   * LDAP driver), whose every write the service refuses with Keystone's generic 403.
   */
  readonly writes: IdentityWrites | null;

  // ---- users
  findUser(em: EntityManager, id: string): Promise<UserRow | null>;
  findUserByName(em: EntityManager, name: string, domainId: string): Promise<UserRow | null>;
  /** The users matching `query`, by name then id; with `page`, only that page of them. */
  listUsers(em: EntityManager, query: UserQuery, page?: PageRequest<UserRow>): Promise<UserRow[]>;

  // ---- passwords (a back end without stored passwords answers none)
  /** Current password rows (the newest per user) for the given users. */
  currentPasswords(em: EntityManager, userIds: string[]): Promise<Map<string, PasswordRow>>;
  /** Newest first. */
  passwordHistory(em: EntityManager, userId: string): Promise<PasswordRow[]>;

  /**
   * For a back end that checks passwords itself (a directory: a bind as the user), whether `password`
   * is the user's; without it the service verifies the current password row's hash.
   */
  checkPassword?(em: EntityManager, user: UserRow, password: string): Promise<boolean>;

  // ---- lockout and activity bookkeeping: single statements outside any transaction (see the service)
  /**
   * One more failed authentication, atomically (concurrent attempts all count). A lock that has
   * run out starts a new count, as Keystone resets the counter when the lockout duration is over.
   */
  recordFailedAuth(em: EntityManager, userId: string, now: Date, lock: { attempts: number; expiredBefore: Date }): Promise<void>;
  resetFailedAuth(em: EntityManager, userId: string): Promise<void>;
  recordActivity(em: EntityManager, userId: string, now: Date): Promise<void>;

  // ---- groups and memberships
  findGroup(em: EntityManager, id: string): Promise<GroupRow | null>;
  /** The groups matching `query`, by name then id. */
  listGroups(em: EntityManager, query: GroupQuery): Promise<GroupRow[]>;
  groupIdsOfUser(em: EntityManager, userId: string): Promise<string[]>;
  /** The members of each group (groups without members are absent). */
  userIdsInGroups(em: EntityManager, groupIds: string[]): Promise<Map<string, string[]>>;
  isMember(em: EntityManager, userId: string, groupId: string): Promise<boolean>;
}

/** The writes of a writable back end; each is stored when it returns (within the caller's transaction). */
export interface IdentityWrites {
  createUser(em: EntityManager, user: NewUser): Promise<UserRow>;
  /** `user` as found by this back end in the same unit of work; returned changed. */
  updateUser(em: EntityManager, user: UserRow, changes: UserChanges): Promise<UserRow>;
  deleteUser(em: EntityManager, user: UserRow): Promise<void>;
  /**
   * Stores a new current password. Of the earlier ones, the newest `keep` stay as history, expiring
   * now if they have not yet, and the rest are deleted.
   */
  setPassword(em: EntityManager, userId: string, password: NewPassword, keep: number): Promise<PasswordRow>;

  createGroup(em: EntityManager, group: NewGroup): Promise<GroupRow>;
  /** `group` as found by this back end in the same unit of work; returned changed. */
  updateGroup(em: EntityManager, group: GroupRow, changes: GroupChanges): Promise<GroupRow>;
  deleteGroup(em: EntityManager, group: GroupRow): Promise<void>;
  addMember(em: EntityManager, userId: string, groupId: string): Promise<void>;
  removeMember(em: EntityManager, userId: string, groupId: string): Promise<void>;
}

/** A back end built for one domain from its configuration; closed when the configuration changes. */
export interface DomainBackend extends IdentityBackend {
  close(): Promise<void>;
}

/** Builds a domain's back end for a driver named in its configuration (`[identity] driver`). */
export type DomainBackendFactory = (domainId: string, groups: DomainConfigGroups) => DomainBackend;

export interface DomainBackends {
  /** The domains with a configuration of their own. */
  configs: DomainIdentityConfigSource;
  /** The id_mapping (public ids of directory users and groups). */
  mappings: IdMappings;
  /** The drivers other than the default one (sql), by name. */
  drivers: Readonly<Record<string, DomainBackendFactory>>;
}

/**
 * Which back end holds what: a domain's users and groups, or the entity with an id. A domain whose
 * configuration names a driver of its own (ldap) gets a back end of that driver, built on first use
 * and rebuilt after its configuration changes; every other domain's back end is the default (SQL).
 * An id is placed through Keystone's public-id mapping, kept in memory so resolving a known id is
 * synchronous (`backendOf`); `resolve` also reads a mapping another node wrote.
 */
export class IdentityRepository {
  private readonly built = new Map<string, DomainBackend>();

  constructor(
    /** The default back end: every domain without a driver of its own (and lists that name none). */
    readonly defaultBackend: IdentityBackend,
    private readonly domains?: DomainBackends,
  ) {
    domains?.configs.onChange((domainId) => this.forget(domainId));
  }

  /** Reads the id mapping into memory (before serving). */
  async load(em: EntityManager): Promise<void> {
    await this.domains?.mappings.load(em);
  }

  /** The back end of a domain's users and groups. */
  backendFor(domainId: string): IdentityBackend {
    if (!this.domains) return this.defaultBackend;
    const existing = this.built.get(domainId);
    if (existing) return existing;
    const groups = this.domains.configs.configured().get(domainId);
    const driver = identityDriverOf(groups);
    if (!groups || driver === undefined || driver === 'sql') return this.defaultBackend;
    const factory = this.domains.drivers[driver];
    if (!factory) throw new ValidationError(`Unknown identity driver "${driver}" configured for domain ${domainId}.`);
    const backend = factory(domainId, groups);
    this.built.set(domainId, backend);
    return backend;
  }

  /** The back end that holds the user or group with this id, from the mapping in memory (else the default). */
  backendOf(id: string): IdentityBackend {
    const mapping = this.domains?.mappings.known(id);
    return mapping ? this.backendFor(mapping.domainId) : this.defaultBackend;
  }

  /** backendOf, reading the stored mapping of a public id not yet in memory (written by another node). */
  async resolve(id: string, em: EntityManager): Promise<IdentityBackend> {
    const backend = this.backendOf(id);
    if (backend !== this.defaultBackend || !this.domains || !mayBePublicId(id)) return backend;
    const mapping = await this.domains.mappings.find(em, id);
    return mapping ? this.backendFor(mapping.domainId) : backend;
  }

  /**
   * The back end of a list: the group's or user's it is about, else the domain's it names, else the
   * default (as in Keystone, a directory domain's users are listed only when the domain is named).
   */
  backendOfQuery(query: { groupId?: string; userId?: string; domainId?: string }): IdentityBackend {
    if (query.groupId !== undefined) return this.backendOf(query.groupId);
    if (query.userId !== undefined) return this.backendOf(query.userId);
    if (query.domainId !== undefined) return this.backendFor(query.domainId);
    return this.defaultBackend;
  }

  /** backendOfQuery, with `resolve` for the id it is about. */
  async resolveQuery(query: { groupId?: string; userId?: string; domainId?: string }, em: EntityManager): Promise<IdentityBackend> {
    if (query.groupId !== undefined) return this.resolve(query.groupId, em);
    if (query.userId !== undefined) return this.resolve(query.userId, em);
    return this.backendOfQuery(query);
  }

  /** The ids by the back end holding them. */
  async byBackend(ids: string[], em: EntityManager): Promise<Map<IdentityBackend, string[]>> {
    const groups = new Map<IdentityBackend, string[]>();
    for (const id of ids) {
      const backend = await this.resolve(id, em);
      const held = groups.get(backend);
      if (held) held.push(id);
      else groups.set(backend, [id]);
    }
    return groups;
  }

  /** A domain's configuration changed: its back end is built again on next use, the old one closed. */
  private forget(domainId: string): void {
    const old = this.built.get(domainId);
    this.built.delete(domainId);
    void old?.close().catch(() => {});
  }

  /** Closes every domain's own back end (connection pools). */
  async close(): Promise<void> {
    const backends = [...this.built.values()];
    this.built.clear();
    await Promise.all(backends.map((backend) => backend.close().catch(() => {})));
  }
}
