import type { FastifyRequest } from 'fastify';
import type { Trust } from '../../trust/trust-service.ts';
import { ForbiddenError, ValidationError } from '../../support/errors.ts';
import { isDelegatedMethod } from '../../token/delegation.ts';
import type { TokenContext } from '../../token/token-service.ts';
import { parseExpirationDate } from '../../support/timestamps.ts';
import { authorize, extraAttributes, noContent, type App, type IdentityApi } from '../context.ts';
import { sentField } from '../decision-order.ts';
import { baseUrl, collectionLinks, selfLink } from '../links.ts';
import { querySchema, stringParameter } from '../query.ts';
import { renderRole } from '../render.ts';
import { many, one, params, RoleEntity, TrustCreate, TrustEntity, TrustSummary } from '../schemas.ts';

const TrustParams = params('trust_id');
const TrustRoleParams = params('trust_id', 'role_id');
const TrustListQuery = querySchema('trustor_user_id', 'trustee_user_id');
/** The create body's known attributes; any other is kept and echoed back (Keystone's extra). */
const TRUST_ATTRIBUTES = ['trustor_user_id', 'trustee_user_id', 'project_id', 'impersonation', 'roles', 'expires_at', 'remaining_uses', 'allow_redelegation', 'redelegation_count'];

/** Keystone's trust time: whole seconds, six zero digits, Z. */
function trustTime(date: Date | null): string | null {
  return date ? `${date.toISOString().slice(0, 19)}.000000Z` : null;
}

function renderSummary(request: FastifyRequest, trust: Trust) {
  return {
    ...trust.extra,
    id: trust.id,
    trustor_user_id: trust.trustorUserId,
    trustee_user_id: trust.trusteeUserId,
    project_id: trust.projectId,
    impersonation: trust.impersonation,
    expires_at: trustTime(trust.expiresAt),
    remaining_uses: trust.remainingUses,
    deleted_at: null,
    redelegated_trust_id: trust.redelegatedTrustId,
    redelegation_count: trust.redelegationCount,
    links: selfLink(request, 'OS-TRUST/trusts', trust.id),
  };
}

/** Keystone 22's roles_links point at /v3/{trust_id}/roles (a path it does not route); kept as it is. */
function rolesLinks(request: FastifyRequest, trust: Trust) {
  return { self: `${baseUrl(request)}/v3/${encodeURIComponent(trust.id)}/roles`, next: null, previous: null };
}

function renderTrust(request: FastifyRequest, trust: Trust) {
  return { roles: trust.roles.map((role) => renderRole(request, role)), ...renderSummary(request, trust), roles_links: rolesLinks(request, trust) };
}

/** The trust as policy sees it (target.trust.trustor_user_id, trustee_user_id). */
function trustTarget(trust: Trust) {
  return { trust: { trustorUserId: trust.trustorUserId, trusteeUserId: trust.trusteeUserId } };
}

/**
 * Keystone refuses every trust operation to a token of a delegated method (application
 * credential, OAuth1, EC2 signature): a trust made from one would reach beyond what it was issued
 * for. A trust-scoped token of a primary method may (redelegation, a trustee's own reads).
 */
function refuseDelegatedMethod(auth: TokenContext): void {
  if (isDelegatedMethod(auth)) throw ForbiddenError.action('Delegated tokens cannot manage trusts.');
}

/** /v3/OS-TRUST/trusts: delegation of a trustor's roles on a project to a trustee. */
export function registerTrustRoutes(app: App, api: IdentityApi): void {
  app.post('/v3/OS-TRUST/trusts', { schema: { body: TrustCreate, response: { 201: one('trust', TrustEntity) } } }, async (request, reply) => {
    const target = { trustorUserId: sentField(request, 'trust', 'trustor_user_id'), trusteeUserId: sentField(request, 'trust', 'trustee_user_id') };
    const auth = authorize(api, request, 'identity:create_trust', { trust: target });
    const body = request.body.trust;
    refuseDelegatedMethod(auth);
    let expiresAt: Date | null = null;
    if (typeof body.expires_at === 'string') {
      const parsed = parseExpirationDate(body.expires_at);
      if (!parsed) throw ValidationError.timestampFormat();
      expiresAt = parsed.date;
    }
    const trust = await api.trusts.create(
      {
        trustorUserId: body.trustor_user_id,
        trusteeUserId: body.trustee_user_id,
        projectId: body.project_id,
        impersonation: body.impersonation,
        expiresAt,
        remainingUses: body.remaining_uses,
        allowRedelegation: body.allow_redelegation,
        redelegationCount: body.redelegation_count,
        roles: body.roles,
        extra: extraAttributes(body, TRUST_ATTRIBUTES),
      },
      { trustId: auth.trust?.id },
    );
    reply.code(201);
    return { trust: renderTrust(request, trust) };
  });

  app.get('/v3/OS-TRUST/trusts', { schema: { querystring: TrustListQuery, response: { 200: many('trusts', TrustSummary) } } }, async (request) => {
    const trustorUserId = stringParameter(request.query.trustor_user_id);
    const trusteeUserId = stringParameter(request.query.trustee_user_id);
    let trusts: Trust[];
    // Keystone: the trustor filter wins over the trustee one; any other query lists nothing.
    if (trustorUserId) {
      refuseDelegatedMethod(authorize(api, request, 'identity:list_trusts_for_trustor', { trust: { trustorUserId } }));
      trusts = await api.trusts.list({ trustorUserId });
    } else if (trusteeUserId) {
      refuseDelegatedMethod(authorize(api, request, 'identity:list_trusts_for_trustee', { trust: { trusteeUserId } }));
      trusts = await api.trusts.list({ trusteeUserId });
    } else {
      refuseDelegatedMethod(authorize(api, request, 'identity:list_trusts'));
      trusts = Object.keys(request.query as object).length === 0 ? await api.trusts.list() : [];
    }
    return { trusts: trusts.map((trust) => renderSummary(request, trust)), links: collectionLinks(request) };
  });

  app.get('/v3/OS-TRUST/trusts/:trust_id', { schema: { params: TrustParams, response: { 200: one('trust', TrustEntity) } } }, async (request) => {
    // Keystone reads the trust before it decides: a missing one is a 404 for anyone.
    const trust = await api.trusts.get(request.params.trust_id);
    refuseDelegatedMethod(authorize(api, request, 'identity:get_trust', trustTarget(trust)));
    return { trust: renderTrust(request, trust) };
  });

  app.delete('/v3/OS-TRUST/trusts/:trust_id', { schema: { params: TrustParams } }, async (request, reply) => {
    const trust = await api.trusts.get(request.params.trust_id);
    refuseDelegatedMethod(authorize(api, request, 'identity:delete_trust', trustTarget(trust)));
    await api.trusts.delete(trust.id);
    return noContent(reply);
  });

  app.get(
    '/v3/OS-TRUST/trusts/:trust_id/roles',
    { schema: { params: TrustParams, response: { 200: many('roles', RoleEntity) } } },
    async (request) => {
      const trust = await api.trusts.get(request.params.trust_id);
      refuseDelegatedMethod(authorize(api, request, 'identity:list_roles_for_trust', trustTarget(trust)));
      return { roles: trust.roles.map((role) => renderRole(request, role)), links: rolesLinks(request, trust) };
    },
  );

  app.get(
    '/v3/OS-TRUST/trusts/:trust_id/roles/:role_id',
    { schema: { params: TrustRoleParams, response: { 200: one('role', RoleEntity) } } },
    async (request) => {
      const trust = await api.trusts.get(request.params.trust_id);
      refuseDelegatedMethod(authorize(api, request, 'identity:get_role_for_trust', trustTarget(trust)));
      return { role: renderRole(request, await api.trusts.getRole(trust.id, request.params.role_id)) };
    },
  );
}
