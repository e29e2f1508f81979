import type { FastifyRequest } from 'fastify';
import { NotFoundError } from '../support/errors.ts';
import type { IdentityTarget } from '../policy/identity-policy.ts';
import type { IdentityApi } from './context.ts';

// Policy targets, built as Keystone builds them before enforcing: the entity acted upon, loaded for
// the attributes rules read (its domain). A missing entity is a target without attributes, so every
// condition on it fails and the caller gets Keystone's 403 rather than a 404 that would reveal
// which ids exist; callers the rules allow then get the 404 from the operation itself.

async function unlessMissing<T>(lookup: Promise<T>): Promise<T | undefined> {
  try {
    return await lookup;
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

export async function userTarget(api: IdentityApi, id: string): Promise<NonNullable<IdentityTarget['user']>> {
  const user = await api.identity.findUser(id);
  return user ? { id, domainId: user.domainId } : { id };
}

export async function groupTarget(api: IdentityApi, id: string): Promise<NonNullable<IdentityTarget['group']>> {
  const group = await unlessMissing(api.identity.getGroup(id));
  return group ? { id, domainId: group.domainId } : { id };
}

export async function projectTarget(api: IdentityApi, id: string): Promise<NonNullable<IdentityTarget['project']>> {
  const project = await api.resources.findAny(id);
  return project && !project.isDomain && project.domainId ? { id, domainId: project.domainId } : { id };
}

export async function roleTarget(api: IdentityApi, id: string): Promise<IdentityTarget['role']> {
  const role = await unlessMissing(api.assignments.getRole(id));
  return role ? { id, domainId: role.domainId ?? null } : undefined;
}

/** A list call: a domain-scoped token lists within its domain (Keystone's target.domain_id). */
export function listingTarget(request: FastifyRequest): IdentityTarget {
  return request.auth?.scope.type === 'domain' ? { domainId: request.auth.scope.domain.id } : {};
}
