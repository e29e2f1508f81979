import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { ForbiddenError, NotFoundError, ValidationError } from '../../support/errors.ts';
import { catalogFor, issueToken } from '../../token/issue-token.ts';
import { JwsTokenProvider } from '../../token/jws-provider.ts';
import { MAPPED_METHODS } from '../../token/token-request.ts';
import { auditInitiator } from '../audit.ts';
import { authorize, noContent, signedRequest, type App, type IdentityApi } from '../context.ts';
import { baseUrl, collectionLinks } from '../links.ts';
import { querySchema, truthyFlag } from '../query.ts';
import { renderCatalog, renderDomain, renderProject, renderRevokeEvent, renderToken } from '../render.ts';
import { AuthBody, CatalogBody, DomainEntity, ProjectEntity, RevokeEvents, TokenBody, many } from '../schemas.ts';

// ?nocatalog (any value, even none): the token body without its catalog. ?allow_expired: Keystone's truthy words.
const IssueQuery = querySchema('nocatalog');
const ValidateQuery = querySchema('nocatalog', 'allow_expired');
const RevokeEventsQuery = querySchema('since');
// Declared optional so the schema never refuses a request: without X-Subject-Token Keystone answers
// 404 "No token in the request" (subjectToken), not a validation 400. Declared for the API description.
const SubjectToken = Type.Optional(Type.String({ description: 'The token to validate, check or revoke (404 without it).' }));
const ValidateHeaders = Type.Object({
  'x-subject-token': SubjectToken,
  'openstack-identity-access-rules': Type.Optional(Type.String({ description: 'A version (1 or more) when the caller enforces application-credential access rules.' })),
});
const RevokeHeaders = Type.Object({ 'x-subject-token': SubjectToken });

/** Openstack-Auth-Receipt (an MFA receipt), when sent. */
function receiptHeader(request: FastifyRequest): string | undefined {
  const receipt = request.headers['openstack-auth-receipt'];
  return typeof receipt === 'string' && receipt ? receipt : undefined;
}

function subjectToken(request: FastifyRequest): string {
  const subject = request.headers['x-subject-token'];
  if (typeof subject !== 'string' || subject.length === 0) throw new NotFoundError('No token in the request');
  return subject;
}

/** /v3/auth/*: issue, validate, check and revoke tokens; what the caller may scope to; its catalog. */
export function registerAuthRoutes(app: App, api: IdentityApi): void {
  app.post(
    '/v3/auth/tokens',
    { config: { public: true }, schema: { querystring: IssueQuery, body: AuthBody, response: { 201: TokenBody } } },
    async (request, reply) => {
      const auth = request.body.auth;
      if (!auth || Object.keys(auth).length === 0) throw ValidationError.expecting('auth', 'request body');
      const { token, catalog } = await issueToken(api, {
        request: {
          ...auth.identity,
          methods: auth.identity.methods,
          scope: auth.scope,
          ...(auth.identity.methods.includes('oauth1') ? { signedRequest: signedRequest(request) } : {}),
          // A mapped method without a token id: the protocol's verifier reads the request (its bearer token).
          ...(auth.identity.methods.some((method) => MAPPED_METHODS.includes(method)) ? { requestHeaders: request.headers } : {}),
        },
        initiator: auditInitiator(api, request, reply),
        withCatalog: request.query.nocatalog === undefined,
        receipt: receiptHeader(request),
      });
      reply.code(201).header('X-Subject-Token', token.id);
      return { token: renderToken(token, catalog, await api.federation.enabledServiceProviders()) };
    },
  );

  app.get('/v3/auth/tokens', { schema: { headers: ValidateHeaders, querystring: ValidateQuery, response: { 200: TokenBody } } }, async (request, reply) => {
    const subject = subjectToken(request);
    const token = await api.tokens.validate(subject, { allowExpired: truthyFlag(request.query.allow_expired) });
    // A validator that cannot enforce access rules must not accept a token that carries them.
    if (token.applicationCredential?.accessRules.length && !(Number(request.headers['openstack-identity-access-rules']) >= 1)) {
      throw NotFoundError.tokenNotValidated();
    }
    const action = request.method === 'HEAD' ? 'identity:check_token' : 'identity:validate_token';
    authorize(api, request, action, { token: { userId: token.user.id } });
    const catalog = request.query.nocatalog === undefined ? await catalogFor(api.clientCatalog, token) : undefined;
    reply.header('X-Subject-Token', subject);
    return { token: renderToken(token, catalog, await api.federation.enabledServiceProviders()) };
  });

  app.delete('/v3/auth/tokens', { schema: { headers: RevokeHeaders } }, async (request, reply) => {
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
    const catalog = await catalogFor(api.clientCatalog, auth);
    return { catalog: renderCatalog(catalog ?? []), links: { self: `${baseUrl(request)}/v3/auth/catalog` } };
  });

  // Also as OS-FEDERATION's /v3/OS-FEDERATION/projects and /domains (Keystone's alternate URLs of the same resources).
  for (const path of ['/v3/auth/projects', '/v3/OS-FEDERATION/projects'])
  app.get(path, { schema: { response: { 200: many('projects', ProjectEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_auth_projects');
    // A federated token's groups reach projects too (Keystone: the user's and its groups' projects).
    const ids = [...new Set([...(await api.assignments.targetsOfUser(auth.user.id, 'project')), ...(await api.assignments.targetsOfGroups(auth.federation?.groupIds ?? [], 'project'))])];
    const projects = ids.length ? await api.resources.listProjects({ ids }) : [];
    return { projects: projects.map((project) => renderProject(request, project)), links: collectionLinks(request) };
  });

  for (const path of ['/v3/auth/domains', '/v3/OS-FEDERATION/domains'])
  app.get(path, { schema: { response: { 200: many('domains', DomainEntity) } } }, async (request) => {
    const auth = authorize(api, request, 'identity:get_auth_domains');
    const ids = [...new Set([...(await api.assignments.targetsOfUser(auth.user.id, 'domain')), ...(await api.assignments.targetsOfGroups(auth.federation?.groupIds ?? [], 'domain'))])];
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

  app.get('/v3/OS-REVOKE/events', { schema: { querystring: RevokeEventsQuery, response: { 200: RevokeEvents } } }, async (request) => {
    authorize(api, request, 'identity:list_revoke_events');
    const since = request.query.since;
    let sinceMs: number | undefined;
    // A repeated `since` is no filter.
    if (typeof since === 'string') {
      sinceMs = Date.parse(since);
      if (Number.isNaN(sinceMs)) throw new ValidationError(`invalidate date format ${since}`);
    }
    const events = await api.revocations.list(sinceMs);
    return { events: events.map(renderRevokeEvent), links: { self: `${baseUrl(request)}/v3/OS-REVOKE/events`, previous: null, next: null } };
  });
}
