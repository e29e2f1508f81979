import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { ForbiddenError, NotFoundError, ValidationError } from '../../support/errors.ts';
import { JwsTokenProvider } from '../../token/jws-provider.ts';
import type { AuthRequest, TokenContext } from '../../token/token-service.ts';
import { auditAuthenticationFailure, auditInitiator } from '../audit.ts';
import { authorize, noContent, type App, type IdentityApi } from '../context.ts';
import { baseUrl, collectionLinks } from '../links.ts';
import { truthyFlag, type Query } from '../query.ts';
import { renderCatalog, renderDomain, renderProject, renderToken, tokenTime } from '../render.ts';
import { AuthBody, CatalogBody, DomainEntity, ProjectEntity, TokenBody, many } from '../schemas.ts';

/** Catalog for a token body: only scoped tokens carry one. */
async function catalogFor(api: IdentityApi, token: TokenContext) {
  if (token.scope.type === 'unscoped') return undefined;
  return api.catalog.catalog({ projectId: token.scope.type === 'project' ? token.scope.project.id : undefined, userId: token.user.id });
}

function subjectToken(request: FastifyRequest): string {
  const subject = request.headers['x-subject-token'];
  if (typeof subject !== 'string' || subject.length === 0) throw new NotFoundError('No token in the request');
  return subject;
}

/** The user name a token request gives, if it names one. */
function requestedUserName(request: AuthRequest): string | undefined {
  const name = request.password?.user?.name ?? request.application_credential?.user?.name;
  return typeof name === 'string' ? name : undefined;
}

/** /v3/auth/*: issue, validate, check and revoke tokens; what the caller may scope to; its catalog. */
export function registerAuthRoutes(app: App, api: IdentityApi): void {
  app.post(
    '/v3/auth/tokens',
    { config: { public: true }, schema: { body: AuthBody, response: { 201: TokenBody } } },
    async (request, reply) => {
      const auth = request.body.auth;
      if (!auth || Object.keys(auth).length === 0) throw ValidationError.expecting('auth', 'request body');
      const identity = auth.identity as Record<string, unknown> & { methods: string[] };
      const authRequest: AuthRequest = { ...identity, methods: identity.methods, scope: auth.scope };
      const initiator = auditInitiator(api, request, reply);
      let token: TokenContext;
      try {
        const attempt = await api.loginThrottle.beginLogin(initiator.address, authRequest);
        token = await api.tokens.authenticate(authRequest);
        await attempt.succeeded();
      } catch (error) {
        auditAuthenticationFailure(api.audit, initiator, error, requestedUserName(authRequest));
        throw error;
      }
      api.audit.authenticate('success', { ...initiator, userId: token.user.id, userName: token.user.name });
      const catalog = 'nocatalog' in (request.query as Query) ? undefined : await catalogFor(api, token);
      reply.code(201).header('X-Subject-Token', token.id);
      return { token: renderToken(token, catalog) };
    },
  );

  app.get('/v3/auth/tokens', { schema: { response: { 200: TokenBody } } }, async (request, reply) => {
    const subject = subjectToken(request);
    const query = request.query as Query;
    const token = await api.tokens.validate(subject, { allowExpired: truthyFlag(query, 'allow_expired') });
    // A validator that cannot enforce access rules must not accept a token that carries them.
    if (token.applicationCredential?.accessRules.length && !(Number(request.headers['openstack-identity-access-rules']) >= 1)) {
      throw new NotFoundError('Failed to validate token');
    }
    const action = request.method === 'HEAD' ? 'identity:check_token' : 'identity:validate_token';
    authorize(api, request, action, { token: { userId: token.user.id } });
    const catalog = 'nocatalog' in query ? undefined : await catalogFor(api, token);
    reply.header('X-Subject-Token', subject);
    return { token: renderToken(token, catalog) };
  });

  app.delete('/v3/auth/tokens', async (request, reply) => {
    const subject = subjectToken(request);
    const token = await api.tokens.validate(subject);
    authorize(api, request, 'identity:revoke_token', { token: { userId: token.user.id } });
    await api.tokens.revoke(subject);
    api.audit.tokenRevoked(auditInitiator(api, request, reply), token.auditIds[0]!);
    return noContent(reply);
  });

  app.get('/v3/auth/catalog', { schema: { response: { 200: CatalogBody } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_auth_catalog');
    if (auth.scope.type !== 'project') throw ForbiddenError.action();
    const catalog = await catalogFor(api, auth);
    return { catalog: renderCatalog(catalog ?? []), links: { self: `${baseUrl(request)}/v3/auth/catalog` } };
  });

  app.get('/v3/auth/projects', { schema: { response: { 200: many('projects', ProjectEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_auth_projects');
    const ids = await api.assignments.targetsOfUser(auth.user.id, 'project');
    const projects = ids.length ? await api.resources.listProjects({ ids }) : [];
    return { projects: projects.map((project) => renderProject(request, project)), links: collectionLinks(request) };
  });

  app.get('/v3/auth/domains', { schema: { response: { 200: many('domains', DomainEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_auth_domains');
    const ids = await api.assignments.targetsOfUser(auth.user.id, 'domain');
    const domains = ids.length ? await api.resources.listDomains({ ids }) : [];
    return { domains: domains.map((domain) => renderDomain(request, domain)), links: collectionLinks(request) };
  });

  app.get(
    '/v3/auth/system',
    {
      schema: {
        response: { 200: Type.Object({ system: Type.Array(Type.Object({ all: Type.Boolean() })), links: Type.Object({ self: Type.String() }) }) },
      },
    },
    async (request) => {
      const auth = authorize(api, request, 'identity:get_auth_system');
      const system = (await api.assignments.hasSystemRole(auth.user.id)) ? [{ all: true }] : [];
      return { system, links: { self: `${baseUrl(request)}/v3/auth/system` } };
    },
  );

  // Public keys of the JWS provider, so services can verify tokens offline.
  app.get('/v3/auth/jwks', { config: { public: true } }, async () => {
    if (!(api.tokenProvider instanceof JwsTokenProvider)) throw new NotFoundError('This service does not issue JWS tokens.');
    return api.tokenProvider.jwks();
  });

  app.get('/v3/OS-REVOKE/events', async (request) => {
    authorize(api, request, 'identity:list_revoke_events');
    const since = (request.query as Query).since;
    let sinceMs: number | undefined;
    if (typeof since === 'string') {
      sinceMs = Date.parse(since);
      if (Number.isNaN(sinceMs)) throw new ValidationError(`invalidate date format ${since}`);
    }
    const events = await api.revocations.list(sinceMs);
    return {
      events: events.map((event) => {
        const rendered: Record<string, string> = {};
        const copy = (key: string, value: string | undefined) => {
          if (value) rendered[key] = value;
        };
        copy('user_id', event.userId);
        copy('project_id', event.projectId);
        copy('domain_id', event.domainId);
        copy('role_id', event.roleId);
        copy('audit_id', event.auditId);
        copy('audit_chain_id', event.auditChainId);
        copy('OS-TRUST:trust_id', event.trustId);
        copy('OS-OAUTH1:consumer_id', event.consumerId);
        copy('OS-OAUTH1:access_token_id', event.accessTokenId);
        if (event.expiresAt) rendered.expires_at = new Date(event.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z');
        rendered.issued_before = tokenTime(event.issuedBefore);
        rendered.revoked_at = tokenTime(event.revokedAt);
        return rendered;
      }),
      links: { self: `${baseUrl(request)}/v3/OS-REVOKE/events`, previous: null, next: null },
    };
  });
}
