import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';
import { NotFoundError, ServiceError, ValidationError } from '../errors.ts';
import { registerAuditHooks } from './audit.ts';
import type { App, IdentityApi } from './context.ts';
import { handleError, NOT_JSON, sendError } from './errors.ts';
import { awaitsContinue, continueIfExpected } from './expect.ts';
import { deriveBaseUrl } from './links.ts';
import { registerApplicationCredentialRoutes } from './routes/application-credentials.ts';
import { registerAssignmentRoutes } from './routes/assignments.ts';
import { registerAuthRoutes } from './routes/auth.ts';
import { registerCatalogRoutes } from './routes/catalog.ts';
import { registerDiscoveryRoutes } from './routes/discovery.ts';
import { registerDomainRoutes } from './routes/domains.ts';
import { registerGatewayPolicyRoutes } from './routes/gateway-policy.ts';
import { registerGroupRoutes } from './routes/groups.ts';
import { registerHealthRoutes, type ReadinessProbe } from './routes/health.ts';
import { registerMetricsRoutes, registerRequestMetrics } from './routes/metrics.ts';
import { registerProjectRoutes } from './routes/projects.ts';
import { registerRoleRoutes } from './routes/roles.ts';
import { registerUserRoutes } from './routes/users.ts';

const INVALID_JSON_BODY = Object.assign(new SyntaxError('invalid JSON body'), { statusCode: 400 });

/** Keystone parses a body as JSON when Content-Type is JSON or absent; an empty body is no body. */
function parseJsonBody(body: string): unknown {
  if (body.trim() === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw INVALID_JSON_BODY;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw INVALID_JSON_BODY;
  if (containsNul(parsed)) throw NUL_IN_INPUT;
  return parsed;
}

const NUL_IN_INPUT = new ValidationError('Invalid input: NUL characters are not allowed.');

/** PostgreSQL text cannot hold NUL, and no identity value needs one. */
function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(containsNul);
  if (value && typeof value === 'object') return Object.entries(value).some(([key, item]) => key.includes('\u0000') || containsNul(item));
  return false;
}

/**
 * The Keystone v3 API: request ids, base URL, authentication of X-Auth-Token, body parsing,
 * Keystone-shaped errors (404 and 405 included) and every route.
 */
export interface RouteInfo {
  method: string;
  url: string;
  public: boolean;
}

export function registerIdentityApi(app: App, api: IdentityApi, readiness: ReadinessProbe): RouteInfo[] {
  const routes: RouteInfo[] = [];
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    // No Content-Type at all is read as JSON, as Keystone does; any other type with a body is refused.
    if (request.headers['content-type'] === undefined || (body as string).length === 0) {
      try {
        done(null, parseJsonBody(body as string));
      } catch (error) {
        done(error as Error, undefined);
      }
      return;
    }
    done(Object.assign(new Error(NOT_JSON), { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 400 }), undefined);
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-openstack-request-id', `req-${randomUUID()}`);
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
    if (typeof token !== 'string' || token.length === 0) return sendError(request, reply, 401, 'The request you have made requires authentication.');
    try {
      request.auth = await api.tokens.validate(token);
    } catch (error) {
      // Any reason the caller's own token is no good is the same generic 401 (never a 404).
      if (error instanceof ServiceError) return sendError(request, reply, 401, 'The request you have made requires authentication.');
      throw error;
    }
    continueIfExpected(request.raw, reply.raw);
  });

  app.setErrorHandler(handleError);
  registerAuditHooks(app, api);
  if (api.metrics) registerRequestMetrics(app, api.metrics);

  // A mirror of the route table answers "which methods does this path have" for 405 responses.
  const knownRoutes = FindMyWay({ ignoreTrailingSlash: true });
  app.addHook('onRoute', (route) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((method) => method.toUpperCase() as 'GET');
    for (const method of methods) {
      if (!knownRoutes.hasRoute(method, route.url)) knownRoutes.on(method, route.url, () => {});
      routes.push({ method, url: route.url, public: route.config?.public === true });
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
  registerProjectRoutes(app, api);
  registerUserRoutes(app, api);
  registerGroupRoutes(app, api);
  registerRoleRoutes(app, api);
  registerAssignmentRoutes(app, api);
  registerCatalogRoutes(app, api);
  registerApplicationCredentialRoutes(app, api);
  registerGatewayPolicyRoutes(app, api);
  return routes;
}
