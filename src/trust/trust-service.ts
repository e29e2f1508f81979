import type { AssignmentService, Role } from '../assignment/assignment-service.ts';
import type { AccessEpoch } from '../events/access-epoch.ts';
import type { Revocations } from '../events/revocation.ts';
import type { IdentityService } from '../identity/identity-service.ts';
import type { ResourceService } from '../resource/resource-service.ts';
import type { Clock } from '../support/clock.ts';
import { ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import { newId } from '../support/ids.ts';
import type { Store } from '../store/database.ts';
import type { TrustRow } from '../store/entities.ts';
import { TrustRepository } from './trust-repository.ts';

/** Keystone's [trust] max_redelegation_count default. */
export const MAX_REDELEGATION_COUNT = 3;

export interface TrustServiceOptions {
  /** TRUST_MAX_REDELEGATION_COUNT: the depth a redelegatable chain starts with, and the most one may ask. */
  maxRedelegationCount: number;
}

export interface Trust {
  id: string;
  trustorUserId: string;
  trusteeUserId: string;
  projectId: string | null;
  impersonation: boolean;
  /** Whole seconds (Keystone keeps no more). */
  expiresAt: Date | null;
  remainingUses: number | null;
  redelegatedTrustId: string | null;
  redelegationCount: number;
  roles: Role[];
  /** Unknown attributes of the create body, echoed back as Keystone does. */
  extra: Record<string, unknown>;
}

export interface TrustInput {
  trustorUserId: string;
  trusteeUserId: string;
  projectId?: string | null | undefined;
  impersonation: boolean;
  expiresAt?: Date | null | undefined;
  remainingUses?: number | null | undefined;
  allowRedelegation?: boolean | null | undefined;
  redelegationCount?: number | null | undefined;
  roles?: { id?: string | undefined; name?: string | undefined }[] | undefined;
  extra?: Record<string, unknown> | undefined;
}

/** Who creates the trust: the caller's token (its trust, when it is trust-scoped: a redelegation). */
export interface TrustCreator {
  trustId?: string | undefined;
}

/** OS-TRUST: a trustor delegates roles it holds on a project to a trustee (Keystone's trust manager). */
export class TrustService {
  constructor(
    private readonly store: Store,
    private readonly identity: IdentityService,
    private readonly resources: ResourceService,
    private readonly assignments: AssignmentService,
    private readonly revocations: Revocations,
    private readonly clock: Clock,
    private readonly options: TrustServiceOptions = { maxRedelegationCount: MAX_REDELEGATION_COUNT },
    /** Bumped when a trust's last use deletes it (its tokens die without a revocation event, as in Keystone). */
    private readonly accessEpoch?: AccessEpoch,
    private readonly repository = new TrustRepository(),
  ) {}

  async create(input: TrustInput, creator: TrustCreator = {}): Promise<Trust> {
    if (input.projectId && !input.roles?.length) throw ForbiddenError.action('At least one role should be specified');
    const redelegated = creator.trustId ? await this.get(creator.trustId) : undefined;
    const now = this.clock.now();
    let expiresAt = input.expiresAt ? new Date(Math.floor(input.expiresAt.getTime() / 1000) * 1000) : null;
    if (input.expiresAt && input.expiresAt.getTime() < now) throw ValidationError.expiresBeforeNow();
    const roles: Role[] = [];
    for (const reference of input.roles ?? []) {
      const role = await this.resolveRole(reference);
      if (!roles.some((each) => each.id === role.id)) roles.push(role);
    }
    if (!(await this.identity.findUser(input.trusteeUserId))) throw NotFoundError.of('user', input.trusteeUserId);
    const projectId = input.projectId ?? null;
    if (projectId) await this.resources.getProject(projectId);
    const held = projectId ? await this.trustorRoles(input.trustorUserId, projectId) : [];
    for (const role of roles) {
      if (!held.some((each) => each.id === role.id)) throw NotFoundError.of('role', role.id);
    }

    // Keystone's trust manager: the redelegation depth and its rules.
    let requestedCount = input.redelegationCount ?? null;
    const redelegatable = input.allowRedelegation === true && requestedCount !== 0;
    let redelegationCount: number | null = null;
    const remainingUses = input.remainingUses ?? null;
    if (!redelegatable) {
      redelegationCount = requestedCount = 0;
    } else {
      if (requestedCount && requestedCount > this.options.maxRedelegationCount) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
      if (remainingUses !== null) throw new ValidationError('remaining_uses must not be set if redelegation is allowed');
      redelegationCount = requestedCount;
    }
    if (redelegated) {
      const remainingCount = redelegated.redelegationCount - 1;
      // Modifying "redelegation_count" upon redelegation is forbidden (Keystone hides the reason).
      if (redelegatable && requestedCount && requestedCount !== remainingCount) throw new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
      redelegationCount ??= remainingCount;
      expiresAt = this.checkRedelegation(redelegated, { expiresAt, remainingUses, roles, impersonation: input.impersonation });
    }
    redelegationCount ??= this.options.maxRedelegationCount;

    const id = newId();
    const row: TrustRow = {
      id,
      trustorUserId: input.trustorUserId,
      trusteeUserId: input.trusteeUserId,
      projectId,
      impersonation: input.impersonation,
      expiresAt,
      remainingUses,
      redelegatedTrustId: redelegated?.id ?? null,
      redelegationCount,
      deletedAt: null,
      extra: input.extra ?? {},
    };
    await this.store.transaction((em) => this.repository.createTrust(em, row, roles.map((role) => role.id)));
    return { ...toTrust(row), roles };
  }

  /**
   * Keystone's _validate_redelegation: depth left, no remaining_uses, no later expiry, a subset of
   * the roles, no impersonation from a trust without it. Every refusal is Keystone's hidden 403.
   * Answers the new trust's expiry (the parent's when it asked none).
   */
  private checkRedelegation(parent: Trust, child: { expiresAt: Date | null; remainingUses: number | null; roles: Role[]; impersonation: boolean }): Date | null {
    const refuse = () => new ForbiddenError(ForbiddenError.NOT_AUTHORIZED);
    if (!(parent.redelegationCount > 0 && parent.redelegationCount <= this.options.maxRedelegationCount)) throw refuse();
    if (child.remainingUses !== null) throw refuse();
    let expiresAt = child.expiresAt;
    if (expiresAt) {
      if (parent.expiresAt && parent.expiresAt < expiresAt) throw refuse();
    } else {
      expiresAt = parent.expiresAt;
    }
    const parentRoles = new Set(parent.roles.map((role) => role.id));
    if (!child.roles.every((role) => parentRoles.has(role.id))) throw refuse();
    if (!parent.impersonation && child.impersonation) throw refuse();
    return expiresAt;
  }

  /** A live trust, or 404 "Could not find trust". */
  async get(id: string): Promise<Trust> {
    const trust = await this.find(id);
    if (!trust) throw NotFoundError.of('trust', id);
    return trust;
  }

  /** A live trust, or null. Expired trusts are still found (Keystone lists and shows them). */
  async find(id: string): Promise<Trust | null> {
    const em = this.store.reader();
    const row = await this.repository.findTrust(em, id);
    if (!row) return null;
    return { ...toTrust(row), roles: await this.repository.rolesOf(em, id) };
  }

  /** Live trusts (without their roles, as Keystone lists them). */
  async list(filter: { trustorUserId?: string | undefined; trusteeUserId?: string | undefined } = {}): Promise<Trust[]> {
    const rows = await this.repository.listTrusts(this.store.reader(), filter);
    return rows.map((row) => ({ ...toTrust(row), roles: [] }));
  }

  /** Deletes the trust and revokes its tokens (a trust_id revocation event, in the same transaction). */
  async delete(id: string): Promise<void> {
    await this.store.transaction(async (em) => {
      if (!(await this.repository.deleteTrust(em, id, new Date(this.clock.now())))) throw NotFoundError.of('trust', id);
      await this.revocations.record(em, { trustId: id });
    });
  }

  /** A role of the trust, or 404 "Could not find role". */
  async getRole(trustId: string, roleId: string): Promise<Role> {
    const trust = await this.get(trustId);
    const role = trust.roles.find((each) => each.id === roleId);
    if (!role) throw NotFoundError.of('role', roleId);
    return role;
  }

  /**
   * Takes one use for a token about to be issued; false when the trust has none left, is expired,
   * or is gone. The trust whose last use it was is deleted (its tokens then stop validating too,
   * as in Keystone).
   */
  async consumeUse(id: string): Promise<boolean> {
    const now = new Date(this.clock.now());
    const left = await this.store.transaction(async (em) => {
      const uses = await this.repository.consumeUse(em, id, now);
      if (uses === 0) await this.accessEpoch?.bump(em);
      return uses;
    });
    return left !== undefined;
  }

  /** The roles the trustor holds on the project, implied ones included (Keystone recomputes them). */
  trustorRoles(trustorUserId: string, projectId: string): Promise<Role[]> {
    return this.assignments.effectiveRoles(trustorUserId, 'project', projectId);
  }

  /** The trust's roles with the roles they imply (Keystone's add_implied_roles). */
  delegatedRoles(trust: Trust): Promise<Role[]> {
    return this.assignments.withImpliedRoles(trust.roles.map((role) => role.id));
  }

  private async resolveRole(reference: { id?: string | undefined; name?: string | undefined }): Promise<Role> {
    if (reference.id) return this.assignments.getRole(reference.id);
    const name = reference.name ?? '';
    const [role] = (await this.assignments.listRoles({ name: [{ operator: 'equals', value: name }], domainId: null })).filter((each) => each.name === name);
    if (!role) throw new NotFoundError(`Role ${name} is not defined`);
    return role;
  }
}

function toTrust(row: TrustRow): Omit<Trust, 'roles'> {
  return {
    id: row.id,
    trustorUserId: row.trustorUserId,
    trusteeUserId: row.trusteeUserId,
    projectId: row.projectId ?? null,
    impersonation: row.impersonation,
    expiresAt: row.expiresAt ?? null,
    remainingUses: row.remainingUses ?? null,
    redelegatedTrustId: row.redelegatedTrustId ?? null,
    redelegationCount: row.redelegationCount,
    extra: row.extra ?? {},
  };
}
