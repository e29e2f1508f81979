import type { Role } from '../assignment/assignment-service.ts';
import { cacheRow, LoadingCache, type CacheEpoch } from '../support/cache.ts';
import type { Clock } from '../support/clock.ts';
import type { AccessEpoch } from '../events/access-epoch.ts';
import { AuthenticationError, ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { MicrosecondTime } from '../support/timestamps.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { AccessRuleRow, ApplicationCredentialRow } from '../store/entities.ts';
import { isUniqueViolation } from '../store/filters.ts';
import { ApplicationCredentialRepository, type AccessRuleFilter } from './application-credential-repository.ts';
import type { IdentityService, UserReference } from './identity-service.ts';
import { newSecret, type SecretHasher } from './secret-hash.ts';

export interface AccessRule {
  id: string;
  service: string;
  path: string;
  method: string;
}

export interface ApplicationCredential {
  id: string;
  name: string;
  description: string | null;
  userId: string;
  projectId: string | null;
  expiresAt: Date | null;
  /** Microseconds past expiresAt's milliseconds, 0–999 (Keystone keeps microseconds). */
  expiresAtMicroseconds: number;
  unrestricted: boolean | null;
  roles: Role[];
  accessRules: AccessRule[];
}

/** Who is creating the credential: the caller's token, reduced to what the rules need. */
export interface CredentialCreator {
  userId: string;
  projectId: string | null;
  roleIds: string[];
  /** Set when the caller's own token came from an application credential. */
  viaApplicationCredential?: { restricted: boolean } | undefined;
}

export interface ApplicationCredentialInput {
  name: string;
  description?: string | null | undefined;
  secret?: string | undefined;
  expiresAt?: MicrosecondTime | null | undefined;
  roles?: { id?: string | undefined; name?: string | undefined }[] | undefined;
  unrestricted?: boolean | undefined;
  accessRules?: { id?: string | undefined; service?: string | undefined; path?: string | undefined; method?: string | undefined }[] | undefined;
}

export type ApplicationCredentialReference =
  | { id: string }
  | { name: string; user: UserReference };

const RESTRICTED_MANAGEMENT =
  "You are not authorized to perform the requested action: Using method 'application_credential' is not allowed for managing additional application credentials..";

/** Application credentials ("API keys"): a secret that yields tokens for one project and role set. */
export class ApplicationCredentialService {
  // Token issue and validation read credentials (with their roles, access rules and secret hash)
  // per data generation: creating or deleting one, or anything that cascades to it (a user, a role,
  // an access rule), is a committed transaction.
  private readonly byId: LoadingCache<string, CachedCredential | null>;
  private readonly idsByName: LoadingCache<string, string | null>;

  constructor(
    private readonly store: Store,
    private readonly identity: IdentityService,
    private readonly hasher: SecretHasher,
    private readonly clock: Clock,
    /** ClusterSync: without it nothing is cached. */
    epoch?: CacheEpoch,
    cacheSize = 20_000,
    /** Bumped when a credential is deleted (its tokens die without a revocation event). */
    private readonly accessEpoch?: AccessEpoch,
    private readonly repository = new ApplicationCredentialRepository(),
  ) {
    this.byId = new LoadingCache(cacheSize, epoch);
    this.idsByName = new LoadingCache(cacheSize, epoch);
  }

  async create(userId: string, creator: CredentialCreator, input: ApplicationCredentialInput): Promise<{ credential: ApplicationCredential; secret: string }> {
    if (creator.userId !== userId) {
      throw ForbiddenError.action('Cannot create an application credential for another user');
    }
    if (creator.viaApplicationCredential?.restricted) throw new ForbiddenError(RESTRICTED_MANAGEMENT);
    if (input.expiresAt && input.expiresAt.date.getTime() < this.clock.now()) throw ValidationError.expiresBeforeNow();
    const secret = input.secret ?? newSecret();
    const secretHash = this.hasher.hash(secret);
    try {
      const credential = await this.store.transaction(async (em) => {
        const roles = await this.resolveRoles(em, creator, input.roles);
        const id = newId();
        await this.repository.createCredential(em, {
          id,
          name: input.name,
          userId,
          projectId: creator.projectId,
          secretHash,
          description: input.description ?? null,
          expiresAt: input.expiresAt?.date ?? null,
          expiresAtMicroseconds: input.expiresAt?.extraMicroseconds ?? 0,
          unrestricted: input.unrestricted ?? null,
          createdAt: new Date(this.clock.now()),
        });
        const accessRuleIds: string[] = [];
        for (const requested of input.accessRules ?? []) accessRuleIds.push((await this.resolveAccessRule(em, userId, requested)).id);
        await this.repository.linkCredential(em, id, roles.map((role) => role.id), accessRuleIds);
        return this.load(em, id);
      });
      return { credential: credential!, secret };
    } catch (error) {
      if (isUniqueViolation(error)) throw ConflictError.duplicateName('application_credential', input.name);
      throw error;
    }
  }

  /** An application credential by id alone, whoever owns it (Keystone's policy target is its owner); null when it does not exist. */
  lookup(id: string): Promise<ApplicationCredential | null> {
    return this.load(this.store.reader(), id);
  }

  /** Null when it does not exist (token validation treats that as a revoked token). Cached, read-only. */
  async find(id: string): Promise<ApplicationCredential | null> {
    return (await this.cached(id))?.credential ?? null;
  }

  async list(userId: string, name?: string): Promise<ApplicationCredential[]> {
    const em = this.store.reader();
    const rows = await this.repository.listCredentials(em, userId, name);
    const loaded = await Promise.all(rows.map((row) => this.load(em, row.id)));
    return loaded.filter((credential): credential is ApplicationCredential => credential !== null);
  }

  async delete(userId: string, id: string, deleter?: Pick<CredentialCreator, 'viaApplicationCredential'>): Promise<void> {
    if (deleter?.viaApplicationCredential?.restricted) throw new ForbiddenError(RESTRICTED_MANAGEMENT);
    await this.store.transaction(async (em) => {
      const row = await this.repository.findCredentialOfUser(em, userId, id);
      if (!row) throw NotFoundError.of('Application Credential', id);
      await this.repository.deleteCredential(em, row);
      await this.accessEpoch?.bump(em);
    });
  }

  /** Checks a secret; every failure is the same generic 401. */
  async authenticate(reference: ApplicationCredentialReference, secret: string): Promise<ApplicationCredential> {
    let id: string | null;
    if ('id' in reference) {
      id = reference.id;
    } else {
      const user = await this.identity.resolveUser(reference.user);
      id = user
        ? await this.idsByName.get(`${user.id}\u0000${reference.name}`, async () => {
            const row = await this.repository.findCredentialByName(this.store.reader(), user.id, reference.name);
            return row?.id ?? null;
          })
        : null;
    }
    const found = id === null ? null : await this.cached(id);
    if (!found || !(await this.hasher.verify(secret, found.secretHash))) throw new AuthenticationError();
    const credential = found.credential;
    if (credential.expiresAt && credential.expiresAt.getTime() <= this.clock.now()) throw new AuthenticationError();
    return credential;
  }

  private cached(id: string): Promise<CachedCredential | null> {
    return this.byId.get(id, async () => {
      const em = this.store.reader();
      const row = await this.repository.findCredential(em, id);
      if (!row) return null;
      const credential = await this.load(em, id, row);
      if (!credential) return null;
      const shared: ApplicationCredential = {
        ...credential,
        roles: Object.freeze(credential.roles.map((role) => cacheRow(role))) as Role[],
        accessRules: Object.freeze(credential.accessRules.map((rule) => Object.freeze(rule))) as AccessRule[],
      };
      return { credential: Object.freeze(shared), secretHash: row.secretHash };
    });
  }

  // ---- access rules ------------------------------------------------------------------------

  async listAccessRules(userId: string, filter: AccessRuleFilter = {}): Promise<AccessRule[]> {
    const rows = await this.repository.listAccessRules(this.store.reader(), userId, filter);
    return rows.map(toAccessRule);
  }

  async getAccessRule(userId: string, id: string): Promise<AccessRule> {
    const row = await this.repository.findAccessRule(this.store.reader(), userId, id);
    if (!row) throw NotFoundError.of('Access Rule', id);
    return toAccessRule(row);
  }

  async deleteAccessRule(userId: string, id: string): Promise<void> {
    await this.store.transaction(async (em) => {
      const row = await this.repository.findAccessRule(em, userId, id);
      if (!row) throw NotFoundError.of('Access Rule', id);
      if (await this.repository.isAccessRuleInUse(em, id)) throw new ForbiddenError('May not delete access rule in use');
      await this.repository.deleteAccessRule(em, row);
    });
  }

  // ---- helpers -----------------------------------------------------------------------------

  private async resolveRoles(em: EntityManager, creator: CredentialCreator, requested: ApplicationCredentialInput['roles']): Promise<Role[]> {
    if (!requested) {
      return creator.roleIds.length ? this.repository.findRoles(em, creator.roleIds) : [];
    }
    const roles: Role[] = [];
    for (const reference of requested) {
      const role = reference.id
        ? await this.repository.findRole(em, reference.id)
        : reference.name
          ? await this.repository.findGlobalRoleByName(em, reference.name)
          : null;
      if (!role || !creator.roleIds.includes(role.id)) {
        throw new ValidationError('Invalid application credential: Cannot create an application credential with unassigned role');
      }
      if (!roles.some((existing) => existing.id === role.id)) roles.push(role);
    }
    return roles;
  }

  private async resolveAccessRule(em: EntityManager, userId: string, requested: NonNullable<ApplicationCredentialInput['accessRules']>[number]): Promise<AccessRule> {
    if (requested.id) {
      const existing = await this.repository.findAccessRule(em, userId, requested.id);
      if (!existing) throw NotFoundError.of('Access Rule', requested.id);
      return toAccessRule(existing);
    }
    if (!requested.service || !requested.path || !requested.method) {
      throw new ValidationError('Invalid application credential: an access rule needs service, path and method.');
    }
    const identity = { userId, service: requested.service, path: requested.path, method: requested.method };
    const existing = await this.repository.findMatchingAccessRule(em, identity);
    if (existing) return toAccessRule(existing);
    return toAccessRule(await this.repository.createAccessRule(em, { id: newId(), ...identity }));
  }

  private async load(em: EntityManager, id: string, loaded?: ApplicationCredentialRow): Promise<ApplicationCredential | null> {
    const row = loaded ?? (await this.repository.findCredential(em, id));
    if (!row) return null;
    const roles = await this.repository.rolesOf(em, id);
    const rules = await this.repository.accessRulesOf(em, id);
    return {
      id: row.id,
      name: row.name,
      description: row.description ?? null,
      userId: row.userId,
      projectId: row.projectId ?? null,
      expiresAt: row.expiresAt ?? null,
      expiresAtMicroseconds: row.expiresAtMicroseconds ?? 0,
      unrestricted: row.unrestricted ?? null,
      roles,
      accessRules: rules.map(toAccessRule),
    };
  }
}

interface CachedCredential {
  credential: ApplicationCredential;
  secretHash: string;
}

function toAccessRule(row: AccessRuleRow): AccessRule {
  return { id: row.id, service: row.service, path: row.path, method: row.method };
}
