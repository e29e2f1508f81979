import type { FastifyInstance, FastifyRequest } from 'fastify';

// Keystone's order for a request: authenticate (401), read what it acts on (404), decide (403), and
// only then validate the body (400): a caller the policy refuses gets 403 whatever it sent.
// Fastify validates before the handler, where routes decide. So on the routes that need a token, a
// body that fails its schema is held back (attachValidation): reading request.body throws it, as
// fastify would have, and so does authorize() once the policy has let the call through. A handler
// that reads the body before deciding answers the 400 first, as it did before.

declare module 'fastify' {
  interface FastifyRequest {
    /** The body as sent, while its failed validation is held back (request.body throws meanwhile). */
    heldBody?: { sent: unknown };
  }
}

/** Registers the holding on every route that needs a token and has a body schema; call before the routes are added. */
export function holdBodyValidation(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (route.config?.public === true || !route.schema?.body) return;
    route.attachValidation = true;
    const own = route.preHandler === undefined ? [] : Array.isArray(route.preHandler) ? route.preHandler : [route.preHandler];
    route.preHandler = [holdFailedBody, ...own];
  });
}

/** A route's first preHandler: a failed body is kept for the 400 and request.body throws it. */
async function holdFailedBody(request: FastifyRequest): Promise<void> {
  const error = request.validationError;
  if (!error) return;
  if (error.validationContext !== 'body') throw error;
  request.heldBody = { sent: request.body };
  Object.defineProperty(request, 'body', {
    configurable: true,
    get() {
      throw error;
    },
  });
}

/** After an allowed decision: the body's 400, if its validation was held back. */
export function releaseHeldValidation(request: FastifyRequest): void {
  if (request.heldBody && request.validationError) throw request.validationError;
}

/** The body as sent, for the 400's message (request.body throws while validation is held). */
export function bodyAsSent(request: FastifyRequest): unknown {
  return request.heldBody ? request.heldBody.sent : request.body;
}

/**
 * A string field of the entity a body carries, as sent: Keystone builds a create's policy target
 * from the body before validating it (a user's or project's domain_id), so this one does too.
 */
export function sentField(request: FastifyRequest, entity: string, field: string): string | undefined {
  const body = bodyAsSent(request);
  const value = body && typeof body === 'object' ? (body as Record<string, unknown>)[entity] : undefined;
  const fieldValue = value && typeof value === 'object' ? (value as Record<string, unknown>)[field] : undefined;
  return typeof fieldValue === 'string' ? fieldValue : undefined;
}
