import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';
import { AuthenticationError, ForbiddenError, NotFoundError, ServiceError, ValidationError } from '../support/errors.ts';
import { isEc2CredentialToken } from '../token/delegation.ts';
import { registerAuditHooks } from './audit.ts';
import type { App, IdentityApi } from './context.ts';
import { handleError, NOT_JSON, sendError } from './errors.ts';
import { holdBodyValidation } from './decision-order.ts';
import { awaitsContinue, continueIfExpected } from './expect.ts';
import { deriveBaseUrl } from './links.ts';
import { FORM_TYPE, SAML_XML_TYPES } from '../federation/saml/sp/saml-verifier.ts';
import type { DocumentedRoute, RouteSchemas } from './openapi.ts';
import { registerApiDocsRoutes } from './routes/api-docs.ts';
import { registerApplicationCredentialRoutes } from './routes/application-credentials.ts';
import { registerTrustRoutes } from './routes/trusts.ts';
import { registerAssignmentRoutes } from './routes/assignments.ts';
import { registerAuthRoutes } from './routes/auth.ts';
import { registerCatalogRoutes } from './routes/catalog.ts';
import { registerPolicyRoutes } from './routes/policies.ts';
import { registerCredentialRoutes } from './routes/credentials.ts';
import { registerEndpointFilterRoutes } from './routes/endpoint-filter.ts';
import { registerFederationRoutes } from './routes/federation.ts';
import { registerFederationAuthRoutes } from './routes/federation-auth.ts';
import { registerSamlIdpRoutes } from './routes/saml-idp.ts';
import { registerWebSsoRoutes } from './routes/websso.ts';
import { registerSamlEcpRoutes } from './routes/saml-ecp.ts';
import { registerSamlWebSsoRoutes } from './routes/saml-websso.ts';
import { registerLimitRoutes } from './routes/limits.ts';
import { registerDiscoveryRoutes } from './routes/discovery.ts';
import { registerDomainRoutes } from './routes/domains.ts';
import { registerDomainConfigRoutes } from './routes/domain-config.ts';
import { registerGatewayPolicyRoutes } from './routes/gateway-policy.ts';
import { registerGroupRoutes } from './routes/groups.ts';
import { registerHealthRoutes, type ReadinessProbe } from './routes/health.ts';
import { registerMetricsRoutes, registerRequestMetrics } from './routes/metrics.ts';
import { registerOAuth1Routes } from './routes/oauth1.ts';
import { registerProjectRoutes } from './routes/projects.ts';
import { registerRoleRoutes } from './routes/roles.ts';
import { registerUserRoutes } from './routes/users.ts';
import { newRequestId } from '../support/request-id.ts';

const INVALID_JSON_BODY = Object.assign(new SyntaxError('invalid JSON body'), { statusCode: 400 });

/**
 * How deep a body may nest. Keystone's bodies are shallow (a scoped token request with a user named
 * in a domain nests 6 levels; extra attributes add a few): 32 leaves room, and bounds the work
 * (and the stack) a body can ask of any code that walks it.
 */
const MAX_JSON_DEPTH = 32;

const TOO_DEEP = new ValidationError(`Invalid input: the JSON body is nested more than ${MAX_JSON_DEPTH} levels deep.`);
const NOT_UTF8 = new ValidationError('Invalid input: the request body is not valid UTF-8.');
const NUL_IN_INPUT = new ValidationError('Invalid input: NUL characters are not allowed.');
const LONE_SURROGATE = new ValidationError('Invalid input: the JSON body contains a lone UTF-16 surrogate.');

// Fatal: invalid bytes are refused, not replaced by U+FFFD (the stored text would differ from the
// sent one). A BOM is kept, so it stays invalid JSON as before. decode() without `stream` keeps no state.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// In a `u` regex a surrogate pair is one code point: only unpaired halves match.
const UNPAIRED_SURROGATE = /\p{Cs}/u;

/** Keystone parses a body as JSON when Content-Type is JSON or absent; an empty body is no body. */
function parseJsonBody(bytes: Buffer): unknown {
  let body: string;
  try {
    body = UTF8.decode(bytes);
  } catch {
    throw NOT_UTF8;
  }
  if (body.trim() === '') return undefined;
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) throw TOO_DEEP;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw INVALID_JSON_BODY;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw INVALID_JSON_BODY;
  // Valid UTF-8 holds neither NUL (invalid JSON unescaped) nor lone surrogates: only \u escapes make them.
  if (body.includes('\\u')) {
    const problem = badText(parsed);
    if (problem) throw problem;
  }
  return parsed;
}

/** One pass over the raw text, counting brackets outside strings: no recursion, no parse. */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 0x5c) index++; // a backslash escapes the next character (\" does not end the string)
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b || code === 0x7b) {
      if (++depth > limit) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * Text no identity value needs and that would not be stored as sent, in any string or key: NUL
 * (PostgreSQL text cannot hold it) and unpaired surrogates (they would become U+FFFD). Walks with
 * an explicit stack, so no body can overflow the call stack.
 */
function badText(root: object): ValidationError | undefined {
  const pending: unknown[] = [root];
  const problemOf = (text: string) => (text.includes('\u0000') ? NUL_IN_INPUT : UNPAIRED_SURROGATE.test(text) ? LONE_SURROGATE : undefined);
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') {
      const problem = problemOf(value);
      if (problem) return problem;
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        const problem = problemOf(key);
        if (problem) return problem;
        pending.push(item);
      }
    }
  }
  return undefined;
}

/** The content types a SAML message is posted as (saml-verifier.ts). */
function isSamlBodyType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return SAML_XML_TYPES.includes(type) || type === FORM_TYPE;
}

/** A registered route: method, URL template, whether it needs a token, and its schemas (for OpenAPI). */
export type RouteInfo = DocumentedRoute;

/**
 * The Keystone v3 API: request ids, base URL, authentication of X-Auth-Token, body parsing,
 * Keystone-shaped errors (404 and 405 included) and every route.
 */
export function registerIdentityApi(app: App, api: IdentityApi, readiness: ReadinessProbe): RouteInfo[] {
  const routes: RouteInfo[] = [];
  app.removeAllContentTypeParsers();
  // A request without Content-Length or Transfer-Encoding has no body, and Node hands it over with
  // its stream already ended (optimizeEmptyRequests, src/app.ts). Fastify parses a body whenever a
  // Content-Type is sent, and would wait for an 'end' that has been and gone: it reads an empty one.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    done(null, payload.readableEnded && request.headers['content-type'] !== undefined ? Readable.from([]) : payload);
  });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    // The SAML login takes its message as posted (XML, ECP, or a form); its verifier parses it.
    if (request.routeOptions.config.rawSamlBody === true && isSamlBodyType(request.headers['content-type'])) {
      done(null, body);
      return;
    }
    // No Content-Type at all is read as JSON, as Keystone does; any other type with a body is refused.
    if (request.headers['content-type'] === undefined || (body as Buffer).length === 0) {
      try {
        done(null, parseJsonBody(body as Buffer));
      } catch (error) {
        done(error as Error, undefined);
      }
      return;
    }
    done(Object.assign(new Error(NOT_JSON), { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 400 }), undefined);
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-openstack-request-id', newRequestId());
    reply.header('Vary', 'X-Auth-Token');
    request.publicBase = deriveBaseUrl(request, api.config.publicUrl, api.config.publicUrlFixed);
    if (/%00/.test(request.url)) return sendError(request, reply, 400, NUL_IN_INPUT.message);
    if (!request.routeOptions.url) {
      // No such route: its 404/405 now, without 100 Continue; the body is never asked for.
      if (awaitsContinue(request.raw, reply.raw)) return answerUnrouted(request, reply);
      return;
    }
    if (request.routeOptions.config.public) return continueIfExpected(request.raw, reply.raw);
    const token = request.headers['x-auth-token'];
    if (typeof token !== 'string' || token.length === 0) return sendError(request, reply, 401, AuthenticationError.GENERIC);
    try {
      request.auth = await api.tokens.validate(token);
    } catch (error) {
      // Any reason the caller's own token is no good is the same generic 401 (never a 404); not
      // being able to tell (a 503) is not one.
      if (error instanceof ServiceError && error.kind !== 'unavailable') return sendError(request, reply, 401, AuthenticationError.GENERIC);
      throw error;
    }
    // Keystone: "EC2 credential tokens cannot be used for authorization" (its generic 403).
    if (isEc2CredentialToken(request.auth)) return sendError(request, reply, 403, ForbiddenError.NOT_AUTHORIZED);
    continueIfExpected(request.raw, reply.raw);
  });

  app.setErrorHandler(handleError);
  holdBodyValidation(app);
  registerAuditHooks(app, api);
  if (api.metrics) registerRequestMetrics(app, api.metrics);

  // A mirror of the route table answers "which methods does this path have" for 405 responses.
  const knownRoutes = FindMyWay({ ignoreTrailingSlash: true });
  // The routes anyone may call get a smaller body limit: parsing is the only work an anonymous
  // request can ask for before it is throttled or refused (see PUBLIC_BODY_LIMIT_BYTES).
  const publicBodyLimit = Math.min(api.config.publicBodyLimitBytes, api.config.bodyLimitBytes);
  app.addHook('onRoute', (route) => {
    if (route.config?.public === true) route.bodyLimit ??= publicBodyLimit;
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((method) => method.toUpperCase() as 'GET');
    for (const method of methods) {
      if (!knownRoutes.hasRoute(method, route.url)) knownRoutes.on(method, route.url, () => {});
      routes.push({ method, url: route.url, public: route.config?.public === true, ...(route.schema ? { schema: route.schema as RouteSchemas } : {}) });
    }
  });
  /** A request no route takes: 405 with Allow when the path has other methods, else 404. */
  function answerUnrouted(request: FastifyRequest, reply: FastifyReply): FastifyReply {
    request.publicBase ??= deriveBaseUrl(request, api.config.publicUrl, api.config.publicUrlFixed);
    const path = request.url.split('?')[0]!;
    const allowed = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((method) => knownRoutes.find(method as 'GET', path));
    if (allowed.length) {
      reply.header('Allow', allowed.join(', '));
      return sendError(request, reply, 405, 'The method is not allowed for the requested URL.');
    }
    return handleError(new NotFoundError('The resource could not be found.'), request, reply);
  }
  app.setNotFoundHandler(answerUnrouted);

  registerDiscoveryRoutes(app);
  registerHealthRoutes(app, readiness);
  if (api.metrics) registerMetricsRoutes(app, api.metrics, api.config.metricsAllowedNetworks);
  registerAuthRoutes(app, api);
  registerDomainRoutes(app, api);
  registerDomainConfigRoutes(app, api);
  registerProjectRoutes(app, api);
  registerUserRoutes(app, api);
  registerGroupRoutes(app, api);
  registerRoleRoutes(app, api);
  registerAssignmentRoutes(app, api);
  registerCatalogRoutes(app, api);
  registerPolicyRoutes(app, api);
  registerCredentialRoutes(app, api);
  registerEndpointFilterRoutes(app, api);
  registerOAuth1Routes(app, api);
  registerLimitRoutes(app, api);
  registerApplicationCredentialRoutes(app, api);
  registerTrustRoutes(app, api);
  registerFederationRoutes(app, api);
  registerFederationAuthRoutes(app, api);
  registerWebSsoRoutes(app, api, api.oidcWebSso);
  registerSamlWebSsoRoutes(app, api, api.samlWebSso);
  registerSamlEcpRoutes(app, api);
  registerSamlIdpRoutes(app, api);
  registerGatewayPolicyRoutes(app, api);
  registerApiDocsRoutes(app, routes);
  return routes;
}
