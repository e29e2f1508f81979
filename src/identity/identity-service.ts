import { cacheRow, LoadingCache, type CacheEpoch } from '../support/cache.ts';
import type { AccessEpoch } from '../events/access-epoch.ts';
import type { Clock } from '../support/clock.ts';
import { AuthenticationError, ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import type { Revocations } from '../events/revocation.ts';
import { newId } from '../support/ids.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import { cleanOptions } from '../resource/resource-service.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { GroupRow, Json, PasswordRow, UserRow } from '../store/entities.ts';
import { isUniqueViolation, type StringMatch } from '../store/filters.ts';
import { pagesOf, type Page } from '../store/keyset.ts';
import { IdentityRepository, type GroupChanges, type IdentityBackend, type IdentityWrites, type UserChanges } from './identity-repository.ts';
import { SqlIdentityBackend } from './sql-identity-backend.ts';
import type { PasswordHasher } from './password-hash.ts';
import { PasswordPolicy, SECURITY_COMPLIANCE_OFF } from './security-compliance.ts';
import type { SecurityCompliance } from '../config.ts';

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

/** Who sets a password decides which rules apply (Keystone's admin reset vs bootstrap). */
export interface PasswordSetting {
  /**
   * 'operator': keystone-manage bootstrap's admin, whose password the operator chose or was shown
   * once: never expired for first use. `generated` skips password_regex (a random password).
   */
  setBy?: 'admin' | 'operator';
  generated?: boolean;
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

/** Users, passwords, groups and memberships, each domain's from its back end (the repository). */
export class IdentityService {
  private readonly policy: PasswordPolicy;

  // What token issue and validation read about a user, per data generation. Every change to these
  // rows is a committed transaction, except the lockout and activity bookkeeping (see
  // recordFailure): password authentication therefore reads the user row itself every time, and a
  // cached row that looks inactive is read again before the user is called disabled.
  private readonly userRows: LoadingCache<string, UserRow | null>;
  private readonly userIdsByName: LoadingCache<string, string | null>;
  private readonly currentPasswords: LoadingCache<string, PasswordRow | null>;

  constructor(
    private readonly store: Store,
    private readonly resources: ResourceService,
    private readonly hasher: PasswordHasher,
    private readonly revocations: Revocations,
    private readonly clock: Clock,
    compliance: SecurityCompliance = SECURITY_COMPLIANCE_OFF,
    /** ClusterSync: without it nothing is cached. */
    epoch?: CacheEpoch,
    cacheSize = 20_000,
    /** Bumped by every change that takes roles away (other nodes' polls notice it). */
    private readonly accessEpoch?: AccessEpoch,
    /** Which back end holds each domain's users and groups (SQL for every domain by default). */
    private readonly repository: IdentityRepository = new IdentityRepository(new SqlIdentityBackend()),
  ) {
    this.policy = new PasswordPolicy(compliance);
    this.userRows = new LoadingCache(cacheSize, epoch);
    this.userIdsByName = new LoadingCache(cacheSize, epoch);
    this.currentPasswords = new LoadingCache(cacheSize, epoch);
  }

  // ---- users -----------------------------------------------------------------------------

  async getUser(id: string, em: EntityManager = this.store.reader()): Promise<User> {
    const backend = await this.repository.resolve(id, em);
    const row = await backend.findUser(em, id);
    if (!row) throw NotFoundError.of('user', id);
    const passwords = await backend.currentPasswords(em, [id]);
    return this.toUser(row, passwords.get(id));
  }

  /** The user for token issue and validation (cached; `options` and `extra` are read-only). */
  async findUser(id: string): Promise<User | null> {
    const load = async () => {
      const em = this.store.reader();
      return cacheRow(await (await this.repository.resolve(id, em)).findUser(em, id));
    };
    let row = await this.userRows.get(id, load);
    // last_active_at changes without a new generation, and only forwards: a cached row may look
    // inactive when the user is not (never the other way), so that verdict is checked first.
    if (row?.enabled && !this.policy.isEnabled(row, this.clock.now())) row = await this.userRows.reload(id, load);
    if (!row) return null;
    return this.toUser(row, await this.currentPassword(id));
  }

  /** The newest password row of a user (cached, read-only). */
  private async currentPassword(userId: string): Promise<PasswordRow | undefined> {
    const current = await this.currentPasswords.get(userId, async () =>
      cacheRow((await (await this.repository.resolve(userId, this.store.reader())).currentPasswords(this.store.reader(), [userId])).get(userId) ?? null),
    );
    return current ?? undefined;
  }

  async listUsers(filter: UserFilter): Promise<User[]> {
    const em = this.store.reader();
    if (filter.ids && filter.domainId === undefined) {
      // Users by id (names for role assignments) may live in several back ends: each is asked for its own.
      const users: User[] = [];
      for (const [backend, ids] of await this.repository.byBackend(filter.ids, em)) {
        users.push(...(await this.usersOf(backend, em, await backend.listUsers(em, { ...filter, ids }))));
      }
      return users;
    }
    const backend = await this.repository.resolveQuery(filter, em);
    return this.usersOf(backend, em, await backend.listUsers(em, filter));
  }

  /** Rows as users, with their current passwords' dates (one query for the lot). */
  private async usersOf(backend: IdentityBackend, em: EntityManager, rows: UserRow[]): Promise<User[]> {
    const passwords = await backend.currentPasswords(em, rows.map((row) => row.id));
    return rows.map((row) => this.toUser(row, passwords.get(row.id)));
  }

  /**
   * listUsers read `pageSize` rows at a time (keyset pages, each on a fresh entity manager), for
   * lists too long to hold: the pages in order are listUsers' answer.
   */
  async *listUserPages(filter: UserFilter & { groupId?: string }, pageSize: number): AsyncGenerator<Page<User>, void, undefined> {
    const backend = await this.repository.resolveQuery(filter, this.store.reader());
    yield* pagesOf<UserRow, User>(
      pageSize,
      (page) => backend.listUsers(this.store.reader(), filter, page),
      (rows) => this.usersOf(backend, this.store.reader(), rows),
    );
  }

  async createUser(input: UserInput, setting: PasswordSetting = {}): Promise<User> {
    if (input.password !== undefined && !setting.generated) this.policy.checkStrength(input.password);
    const name = input.name.trim();
    if (!name) throw ValidationError.blankName();
    const passwordHash = typeof input.password === 'string' ? await this.hasher.hash(input.password) : null;
    const now = new Date(this.clock.now());
    return this.store
      .transaction(async (em) => {
        const domain = await this.resources.findAny(input.domainId, em);
        if (!domain || !domain.isDomain) throw NotFoundError.of('domain', input.domainId);
        const writes = this.writesOf(this.repository.backendFor(domain.id));
        if (input.defaultProjectId) await this.refuseDomainAsDefaultProject(em, input.defaultProjectId);
        const row = await writes.createUser(em, {
          id: newId(),
          domainId: domain.id,
          name,
          enabled: input.enabled ?? true,
          defaultProjectId: input.defaultProjectId ?? null,
          extra: input.extra ?? {},
          options: cleanOptions({}, input.options),
          createdAt: now,
        });
        const password =
          input.password === undefined
            ? undefined
            : await this.newPassword(em, writes, row, passwordHash, now, setting.setBy ?? 'admin');
        return this.toUser(row, password);
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw ConflictError.duplicateName('user', name, input.domainId);
        }
        throw error;
      });
  }

  /**
   * A federated login's shadow user, in the caller's transaction (Keystone's create_federated_user
   * and the updates of a later login): the user `id` in `domainId`, enabled, without a password,
   * created when missing; its name (the federated display name) and email brought up to date. A
   * name another user of the domain holds is Keystone's duplicate-name 409 here (Keystone keeps a
   * federated user's name apart from local users' names).
   */
  async shadowUserIn(em: EntityManager, input: { id: string; domainId: string; name: string; email?: string | undefined }): Promise<User> {
    const backend = this.repository.backendFor(input.domainId);
    const writes = this.writesOf(backend);
    const holder = await backend.findUserByName(em, input.name, input.domainId);
    if (holder && holder.id !== input.id) throw ConflictError.duplicateName('user', input.name, input.domainId);
    const found = await backend.findUser(em, input.id);
    if (!found) {
      const row = await writes.createUser(em, {
        id: input.id,
        domainId: input.domainId,
        name: input.name,
        enabled: true,
        defaultProjectId: null,
        extra: input.email ? { email: input.email } : {},
        options: {},
        createdAt: new Date(this.clock.now()),
      });
      return this.toUser(row, undefined);
    }
    const changes: UserChanges = {};
    if (found.name !== input.name) changes.name = input.name;
    if (input.email && found.extra.email !== input.email) changes.extra = { ...found.extra, email: input.email };
    const row = Object.keys(changes).length ? await writes.updateUser(em, found, changes) : found;
    return this.toUser(row, (await backend.currentPasswords(em, [row.id])).get(row.id));
  }

  async updateUser(id: string, patch: UserPatch, setting: PasswordSetting = {}): Promise<User> {
    if (patch.password !== undefined && !setting.generated) this.policy.checkStrength(patch.password);
    const passwordHash = typeof patch.password === 'string' ? await this.hasher.hash(patch.password) : null;
    const now = new Date(this.clock.now());
    const name = patch.name?.trim();
    return this.store
      .transaction(async (em) => {
        const backend = await this.repository.resolve(id, em);
        const found = await backend.findUser(em, id);
        if (!found) throw NotFoundError.of('user', id);
        const writes = this.writesOf(backend);
        if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change user ID');
        if (patch.domainId !== undefined && patch.domainId !== found.domainId) throw ValidationError.domainChange();
        const changes: UserChanges = {};
        if (name !== undefined) {
          if (!name) throw ValidationError.blankName();
          changes.name = name;
        }
        if (patch.defaultProjectId !== undefined) {
          if (patch.defaultProjectId) await this.refuseDomainAsDefaultProject(em, patch.defaultProjectId);
          changes.defaultProjectId = patch.defaultProjectId;
        }
        if (patch.options !== undefined) changes.options = cleanOptions(found.options, patch.options);
        if (patch.extra !== undefined && Object.keys(patch.extra).length) changes.extra = { ...found.extra, ...patch.extra };
        let revoke = false;
        if (patch.enabled !== undefined) {
          if (!patch.enabled && found.enabled) revoke = true;
          if (patch.enabled) {
            // Re-enabling clears a lockout and restarts the inactivity count, as in Keystone.
            changes.failedAuthCount = 0;
            changes.failedAuthAt = null;
            changes.lastActiveAt = now;
          }
          changes.enabled = patch.enabled;
        }
        const row = await writes.updateUser(em, found, changes);
        let password: PasswordRow | undefined;
        if (patch.password !== undefined) {
          password = await this.newPassword(em, writes, row, passwordHash, now, setting.setBy ?? 'admin');
          revoke = true;
        }
        if (revoke) await this.revocations.record(em, { userId: id });
        return this.toUser(row, password ?? (await backend.currentPasswords(em, [id])).get(id));
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw ConflictError.duplicateName('user', String(name), patch.domainId ?? '');
        }
        throw error;
      });
  }

  deleteUser(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const backend = await this.repository.resolve(id, em);
      const row = await backend.findUser(em, id);
      if (!row) throw NotFoundError.of('user', id);
      const writes = this.writesOf(backend);
      await this.revocations.record(em, { userId: id });
      await writes.deleteUser(em, row);
    });
  }

  /**
   * Checks a password for token issue. Every failure (unknown user, wrong password, disabled or
   * locked account) is the same generic 401 after one hash verification, so a client can tell
   * neither which check failed nor, by timing, whether the user exists. Only an expired password
   * is named, as Keystone does (the password was right).
   */
  async authenticatePassword(reference: UserReference, password: string): Promise<User> {
    const em = this.store.reader();
    const { row, current } = await this.checkCredentials(em, await this.findUserRow(em, reference), password, describe(reference));
    const domain = await this.resources.findAny(row.domainId);
    if (!domain?.enabled) throw AuthenticationError.because({ reason: `Could not find domain: ${row.domainId}.`, code: 404, userId: row.id });
    const now = this.clock.now();
    if (this.policy.isExpired(current, row.options, now)) {
      const reason = `The password is expired and needs to be changed for user: ${row.id}.`;
      throw new AuthenticationError(reason, undefined, { reason, code: 401, userId: row.id });
    }
    await this.recordSuccess(em, row, now);
    return this.toUser(row, current);
  }

  /**
   * Checks a second factor (a TOTP passcode) for token issue: `verify` says whether it is right
   * for the user. As for a password, every failure is the generic 401 (`reason` is for the audit
   * trail), a wrong one counts towards the lockout, and a locked or disabled account is refused.
   */
  async authenticateFactor(reference: UserReference, reason: string, verify: (userId: string) => Promise<boolean>): Promise<User> {
    const em = this.store.reader();
    const { row, current } = await this.checkCredentials(em, await this.findUserRow(em, reference), { verify, reason }, describe(reference));
    const domain = await this.resources.findAny(row.domainId);
    if (!domain?.enabled) throw AuthenticationError.because({ reason: `Could not find domain: ${row.domainId}.`, code: 404, userId: row.id });
    await this.recordSuccess(em, row, this.clock.now());
    return this.toUser(row, current);
  }

  /**
   * Self-service password change (no token needed; the original password proves the caller).
   * Keystone's order: the original password as in authentication (an expired one is accepted, a
   * disabled account is named) → password_regex → lock_password → minimum age → history.
   */
  async changePassword(userId: string, originalPassword: string, newPassword: string): Promise<void> {
    const em = this.store.reader();
    const backend = await this.repository.resolve(userId, em);
    const { row: user, current } = await this.checkCredentials(em, await backend.findUser(em, userId), originalPassword, userId, {
      nameDisabled: true,
    });
    await this.recordSuccess(em, user, this.clock.now());
    this.policy.checkStrength(newPassword);
    if (user.options.lock_password === true) {
      throw new ValidationError(
        'You cannot change your password at this time due to password policy disallowing password changes. ' +
          'Please contact your administrator to reset your password.',
      );
    }
    this.policy.checkMinimumAge(current, this.clock.now());
    if (this.policy.historyCount > 0) {
      const recent = (await backend.passwordHistory(em, userId)).slice(0, this.policy.historyCount);
      for (const previous of recent) {
        if (await this.hasher.verify(newPassword, previous.passwordHash)) throw this.policy.historyError();
      }
    }
    const passwordHash = await this.hasher.hash(newPassword);
    const now = new Date(this.clock.now());
    await this.store.transaction(async (transaction) => {
      const fresh = await backend.findUser(transaction, userId);
      if (!fresh) throw AuthenticationError.because({ reason: `Could not find user: ${userId}.`, code: 404 });
      await this.newPassword(transaction, this.writesOf(backend), fresh, passwordHash, now, 'self');
      await this.revocations.record(transaction, { userId });
    });
  }

  /**
   * The checks both password paths share, in Keystone's order of outcomes (lockout, password,
   * enabled) but always after one hash verification. A wrong password counts towards the lockout.
   */
  private async checkCredentials(
    em: EntityManager,
    row: UserRow | null,
    secret: string | { verify: (userId: string) => Promise<boolean>; reason: string },
    named: string,
    options: { nameDisabled?: boolean } = {},
  ): Promise<{ row: UserRow; current: PasswordRow | undefined }> {
    if (!row) {
      if (typeof secret === 'string') await this.hasher.verifyDummy(secret);
      // The work of a known user too: its (cached) password row and a failure record.
      await this.currentPassword(NOBODY);
      await this.recordFailure(em, NOBODY, this.clock.now());
      throw AuthenticationError.because({ reason: `Could not find user: ${named}.`, code: 404 });
    }
    const now = this.clock.now();
    const current = await this.currentPassword(row.id);
    const locked = this.policy.isLocked(row, now);
    // Verified even when locked, so a locked account answers in the same time as any other failure.
    // A directory checks its users' passwords itself (a bind as the user).
    const backend = this.repository.backendFor(row.domainId);
    const verified =
      typeof secret !== 'string'
        ? await secret.verify(row.id)
        : backend.checkPassword
          ? await backend.checkPassword(em, row, secret)
          : await this.hasher.verify(secret, current?.passwordHash);
    // Every failure writes one failure record; the ones Keystone does not count write it for nobody.
    const fail = async (reason: string, counted: boolean, shownToClient = false) => {
      await this.recordFailure(em, counted ? row.id : NOBODY, now);
      const failure = { reason, code: 401, userId: row.id };
      return shownToClient ? new AuthenticationError(reason, undefined, failure) : AuthenticationError.because(failure);
    };
    if (locked) throw await fail(`The account is locked for user: ${row.id}.`, false);
    if (!verified) throw await fail(typeof secret === 'string' ? 'Invalid user / password' : secret.reason, true);
    if (!this.policy.isEnabled(row, now)) throw await fail(`The account is disabled for user: ${row.id}.`, false, options.nameDisabled);
    return { row, current };
  }

  // Lockout and activity bookkeeping are single-statement writes outside Store.transaction on
  // purpose: they change nothing a token depends on, so they must not drop every node's caches
  // (a flood of wrong passwords would otherwise flush them continuously).

  private async recordFailure(em: EntityManager, userId: string, now: number): Promise<void> {
    const attempts = this.policy.settings.lockoutFailureAttempts;
    if (attempts === undefined) return;
    const expiredBefore = new Date(now - this.policy.settings.lockoutDurationSeconds * 1000);
    await this.repository.backendOf(userId).recordFailedAuth(em, userId, new Date(now), { attempts, expiredBefore });
  }

  private async recordSuccess(em: EntityManager, row: UserRow, now: number): Promise<void> {
    const backend = this.repository.backendFor(row.domainId);
    if (row.failedAuthCount > 0) await backend.resetFailedAuth(em, row.id);
    if (this.policy.needsActivityUpdate(row, now)) await backend.recordActivity(em, row.id, new Date(now));
  }

  /** The user a token request names, or null (unknown user, or its domain unknown or disabled). Cached. */
  async resolveUser(reference: UserReference): Promise<User | null> {
    if ('id' in reference) return this.findUser(reference.id);
    const domainId = await this.namedUserDomainId(reference);
    if (!domainId) return null;
    const id = await this.userIdsByName.get(`${domainId}\u0000${reference.name}`, async () => {
      const row = await this.repository.backendFor(domainId).findUserByName(this.store.reader(), reference.name, domainId);
      return row?.id ?? null;
    });
    return id ? this.findUser(id) : null;
  }

  /**
   * The user row a password authentication checks, read from the database every time (its lockout
   * counters change outside transactions, on any node); the domain of a name comes from the cache.
   */
  private async findUserRow(em: EntityManager, reference: UserReference): Promise<UserRow | null> {
    if ('id' in reference) return (await this.repository.resolve(reference.id, em)).findUser(em, reference.id);
    const domainId = await this.namedUserDomainId(reference);
    return domainId ? this.repository.backendFor(domainId).findUserByName(em, reference.name, domainId) : null;
  }

  /** The domain a user name is looked up in: it must exist and be enabled. */
  private async namedUserDomainId(reference: { domainId: string } | { domainName: string }): Promise<string | null> {
    const domain =
      'domainId' in reference ? await this.resources.findAny(reference.domainId) : await this.resources.findDomainByName(reference.domainName);
    return domain && domain.isDomain && domain.enabled ? domain.id : null;
  }

  /**
   * A new current password. As Keystone: only the newest unique_last_password_count rows (at least
   * one) are kept as history, and every earlier password expires now.
   */
  private newPassword(
    em: EntityManager,
    writes: IdentityWrites,
    user: UserRow,
    passwordHash: string | null,
    now: Date,
    setBy: 'admin' | 'self' | 'operator',
  ): Promise<PasswordRow> {
    const expiresAt = this.policy.expiresAt(now.getTime(), user.options, setBy);
    return writes.setPassword(em, user.id, { passwordHash, createdAt: now, expiresAt, selfService: setBy === 'self' }, this.policy.rowsKept);
  }

  /** How `backend` writes; a read-only back end's users and groups are refused as Keystone does (403). */
  private writesOf(backend: IdentityBackend): IdentityWrites {
    if (!backend.writes) throw ForbiddenError.action();
    return backend.writes;
  }

  /** A user as the API and tokens see it: the row plus its current password's expiry. */
  private toUser(row: UserRow, password: PasswordRow | undefined): User {
    return new UserView(
      row.id,
      row.name,
      row.domainId,
      this.policy.isEnabled(row, this.clock.now()),
      row.defaultProjectId ?? null,
      row.options,
      row.extra,
      password?.expiresAt ?? null,
    );
  }

  private async refuseDomainAsDefaultProject(em: EntityManager, projectId: string): Promise<void> {
    const project = await this.resources.findAny(projectId, em);
    if (project?.isDomain) throw new ValidationError(`User's default project ID cannot be a domain ID: ${projectId}`);
  }

  // ---- groups ----------------------------------------------------------------------------

  async getGroup(id: string, em: EntityManager = this.store.reader()): Promise<Group> {
    const row = await (await this.repository.resolve(id, em)).findGroup(em, id);
    if (!row) throw NotFoundError.of('group', id);
    return row;
  }

  async listGroups(filter: GroupFilter & { userId?: string }): Promise<Group[]> {
    const em = this.store.reader();
    if (filter.ids && filter.domainId === undefined && filter.userId === undefined) {
      const groups: Group[] = [];
      for (const [backend, ids] of await this.repository.byBackend(filter.ids, em)) groups.push(...(await backend.listGroups(em, { ...filter, ids })));
      return groups;
    }
    return (await this.repository.resolveQuery(filter, em)).listGroups(em, filter);
  }

  createGroup(input: GroupInput): Promise<Group> {
    return this.store
      .transaction(async (em) => {
        const domain = await this.resources.findAny(input.domainId, em);
        if (!domain || !domain.isDomain) throw NotFoundError.of('domain', input.domainId);
        return this.writesOf(this.repository.backendFor(domain.id)).createGroup(em, {
          id: newId(),
          domainId: domain.id,
          name: input.name,
          description: input.description ?? '',
          extra: input.extra ?? {},
        });
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw ConflictError.duplicateName('group', input.name, input.domainId);
        }
        throw error;
      });
  }

  updateGroup(id: string, patch: GroupPatch): Promise<Group> {
    return this.store
      .transaction(async (em) => {
        const row = await this.getGroup(id, em);
        const writes = this.writesOf(await this.repository.resolve(id, em));
        if (patch.id !== undefined && patch.id !== id) throw new ValidationError('Cannot change group ID');
        if (patch.domainId !== undefined && patch.domainId !== row.domainId) throw ValidationError.domainChange();
        const changes: GroupChanges = {};
        if (patch.name !== undefined) changes.name = patch.name;
        if (patch.description !== undefined) changes.description = patch.description ?? '';
        if (patch.extra !== undefined && Object.keys(patch.extra).length) changes.extra = { ...row.extra, ...patch.extra };
        return writes.updateGroup(em, row, changes);
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw ConflictError.duplicateName('group', String(patch.name), patch.domainId ?? '');
        }
        throw error;
      });
  }

  deleteGroup(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const row = await this.getGroup(id, em);
      await this.writesOf(await this.repository.resolve(id, em)).deleteGroup(em, row);
      // Its grants and memberships go by cascade: its members lose those roles.
      await this.accessEpoch?.bump(em);
    });
  }

  async addUserToGroup(groupId: string, userId: string): Promise<void> {
    await this.store.transaction(async (em) => {
      const backend = await this.repository.resolve(groupId, em);
      await this.getGroup(groupId, em);
      const userBackend = await this.repository.resolve(userId, em);
      if (!(await userBackend.findUser(em, userId))) throw NotFoundError.of('user', userId);
      const writes = this.writesOf(backend);
      refuseAcrossBackends(backend, userBackend);
      if (await backend.isMember(em, userId, groupId)) return;
      await writes.addMember(em, userId, groupId);
    });
  }

  async removeUserFromGroup(groupId: string, userId: string): Promise<void> {
    await this.store.transaction(async (em) => {
      await this.assertMembership(em, groupId, userId);
      await this.writesOf(await this.repository.resolve(groupId, em)).removeMember(em, userId, groupId);
      // Keystone's remove_user_from_group persists a revocation event for the user: every token dies.
      await this.revocations.record(em, { userId });
      await this.accessEpoch?.bump(em);
    });
  }

  async checkUserInGroup(groupId: string, userId: string): Promise<void> {
    await this.assertMembership(this.store.reader(), groupId, userId);
  }

  async groupIdsOfUser(userId: string, em: EntityManager = this.store.reader()): Promise<string[]> {
    return (await this.repository.resolve(userId, em)).groupIdsOfUser(em, userId);
  }

  /** Members of each group, for expanding group assignments. */
  async membersOfGroups(groupIds: string[]): Promise<Map<string, string[]>> {
    const em = this.store.reader();
    const members = new Map<string, string[]>();
    for (const [backend, ids] of await this.repository.byBackend(groupIds, em)) {
      for (const [groupId, userIds] of await backend.userIdsInGroups(em, ids)) members.set(groupId, userIds);
    }
    return members;
  }

  private async assertMembership(em: EntityManager, groupId: string, userId: string): Promise<void> {
    await this.getGroup(groupId, em);
    const userBackend = await this.repository.resolve(userId, em);
    if (!(await userBackend.findUser(em, userId))) throw NotFoundError.of('user', userId);
    const groupBackend = await this.repository.resolve(groupId, em);
    refuseAcrossBackends(groupBackend, userBackend);
    if (!(await groupBackend.isMember(em, userId, groupId))) {
      throw new NotFoundError(`User '${userId}' not found in group '${groupId}'`);
    }
  }
}

/**
 * Keystone's CrossBackendNotAllowed: a group's members are users of its own back end (a SQL group
 * cannot hold a directory user, nor the other way); a Forbidden whose text Keystone hides.
 */
function refuseAcrossBackends(groupBackend: IdentityBackend, userBackend: IdentityBackend): void {
  if (groupBackend !== userBackend) throw ForbiddenError.action();
}

/** A user id that exists nowhere: failures of unknown users do the same database work as the others'. */
const NOBODY = '';

/** How a token request named the user, for the audit trail. */
function describe(reference: UserReference): string {
  return 'id' in reference ? reference.id : reference.name;
}

/**
 * A user as the service hands it out. A class, not an object literal: a users list makes one per
 * row, and V8 tenures a literal's allocation site when a young-generation collection finds a page of
 * them alive, after which every user it makes is old-generation garbage (bench/README.md, "the
 * effective list's promoted pages").
 */
class UserView implements User {
  constructor(
    readonly id: string,
    readonly name: string,
    readonly domainId: string,
    readonly enabled: boolean,
    readonly defaultProjectId: string | null,
    readonly options: Json,
    readonly extra: Json,
    readonly passwordExpiresAt: Date | null,
  ) {}
}
