import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AuthenticationError, AuthReceiptRequiredError, errorBody, statusOf, TooManyRequestsError, UnavailableError } from '../support/errors.ts';
import { loggableError } from '../store/loggable-error.ts';
import { databaseUnreachableReason, isDatabaseKnownUnreachable, serviceErrorOf } from '../store/unavailable.ts';
import { bodyAsSent } from './decision-order.ts';
import { baseUrl } from './links.ts';
import { renderReceipt } from './render.ts';

const INVALID_JSON =
  'Expecting to find valid JSON in request body. The server could not comply with the request since it is either ' +
  'malformed or otherwise incorrect. The client is assumed to be in error.';

export const NOT_JSON =
  'Expecting to find application/json in Content-Type header. The server could not comply with the request since ' +
  'it is either malformed or otherwise incorrect. The client is assumed to be in error.';

/** Keystone's error envelope. */
export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  message: string,
  extra: Record<string, unknown> = {},
): FastifyReply {
  if (status === 401) reply.header('WWW-Authenticate', `Keystone uri="${baseUrl(request)}/v3"`);
  return reply
    .code(status)
    .type('application/json')
    .send(errorBody(status, message, extra));
}

/** Fastify error handler: typed domain errors, schema failures and parser errors, never a stack trace. */
export function handleError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const known = serviceErrorOf(error);
  if (known) {
    // While the database is known unreachable its loss and return are logged once each (app.ts).
    if (known !== error && !isDatabaseKnownUnreachable(error)) request.log.warn({ reason: databaseUnreachableReason(error) }, 'database unreachable: answered 503');
    if (known instanceof AuthReceiptRequiredError) {
      return reply.code(401).header('Openstack-Auth-Receipt', known.receipt.id).type('application/json').send(renderReceipt(known.receipt));
    }
    const extra = known instanceof AuthenticationError && known.identity ? { identity: known.identity } : {};
    if (known instanceof TooManyRequestsError) reply.header('Retry-After', String(known.retryAfterSeconds));
    if (known instanceof UnavailableError && known.retryAfterSeconds !== undefined) reply.header('Retry-After', String(known.retryAfterSeconds));
    return sendError(request, reply, statusOf(known), known.message, extra);
  }
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return sendError(request, reply, 400, schemaMessage(fastifyError, bodyAsSent(request)));
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return sendError(request, reply, 400, INVALID_JSON);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return sendError(request, reply, 400, NOT_JSON);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return sendError(request, reply, 413, 'The request body is larger than this server accepts.');
  }
  if (error instanceof SyntaxError) return sendError(request, reply, 400, INVALID_JSON);
  // Last line of defence: input the database refuses is the client's error, not ours.
  const sqlState = (error as { code?: unknown }).code;
  if (typeof sqlState === 'string' && SQL_INPUT_ERRORS.has(sqlState)) {
    return sendError(request, reply, 400, 'Invalid input: the request contains a value that cannot be stored.');
  }
  const status = fastifyError.statusCode;
  if (status && status >= 400 && status < 500) {
    return sendError(request, reply, status, STATUS_CODES[status] ?? 'Bad Request');
  }
  request.log.error({ err: loggableError(error) }, 'unexpected error');
  return sendError(request, reply, 500, 'An unexpected error prevented the server from fulfilling your request.');
}

// PostgreSQL error classes caused by the values sent: too long, bad encoding (NUL), bad text,
// a reference to something that is gone.
const SQL_INPUT_ERRORS = new Set(['22001', '22021', '22P02', '22P05', '23503', '23514']);

/** Errors fastify raises before routing (malformed or oversized URLs), in Keystone's shape. */
export function handleFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    // No id that long exists.
    sendError(request, reply, 404, 'The resource could not be found.');
    return;
  }
  sendError(request, reply, 400, 'The request URL is malformed.');
}

/** Like Keystone's jsonschema text: "Invalid input for field 'enabled': must be boolean". */
function schemaMessage(error: FastifyError, body: unknown): string {
  let first = error.validation?.[0];
  if (!first) return error.message;
  // TypeBox reports each extra property as a false schema before the object's additionalProperties error: that one is Keystone's.
  if (first.keyword === 'boolean' && first.schemaPath.endsWith('/additionalProperties')) first = error.validation?.find((each) => each.keyword === 'additionalProperties') ?? first;
  const params = first.params as Record<string, unknown>;
  // The entity itself is not an object ({"policy": "x"}): Keystone validates the entity, whose own
  // type error names no field.
  const entity = /^\/([A-Za-z_]+)$/.exec(first.instancePath)?.[1];
  if (first.keyword === 'type' && params.type === 'object' && error.validationContext === 'body' && entity && body && typeof body === 'object') {
    return `${pythonRepr((body as Record<string, unknown>)[entity])} is not of type 'object'`;
  }
  // The auth body is validated as Keystone validates `auth`: the field is its path below it, and a
  // wrong type reads as jsonschema's "5 is not of type 'object', 'string'".
  if (first.keyword === 'type' && error.validationContext === 'body' && first.instancePath.startsWith('/auth/')) {
    const types = (Array.isArray(params.type) ? params.type : String(params.type).split(',')).map((type) => `'${String(type)}'`).join(', ');
    return `Invalid input for field '${first.instancePath.slice('/auth/'.length)}': ${pythonRepr(valueAt(body, first.instancePath))} is not of type ${types}`;
  }
  const missing = params.requiredProperties ?? params.missingProperty;
  const field = first.instancePath.replace(/^\//, '').split('/').pop() || error.validationContext || 'body';
  if (first.keyword === 'required' && missing) {
    const names = Array.isArray(missing) ? missing : [missing];
    return names.map((name) => `'${String(name)}' is a required property`).join('; ');
  }
  if (first.keyword === 'additionalProperties') {
    const name = params.additionalProperties ?? params.additionalProperty;
    const names = (Array.isArray(name) ? name.map(String) : [String(name)]).sort();
    return `Additional properties are not allowed ('${names.join("', '")}' ${names.length > 1 ? 'were' : 'was'} unexpected)`;
  }
  // jsonschema's "0 is less than the minimum of 1" (trust remaining_uses, redelegation_count).
  if (first.keyword === 'minimum' && typeof params.limit === 'number') {
    const value = valueAt(body, first.instancePath);
    if (typeof value === 'number') return `Invalid input for field '${field}': ${pythonRepr(value)} is less than the minimum of ${params.limit}`;
  }
  // Update bodies need one property (minProperties 1): the failing instance is always {}.
  if (first.keyword === 'minProperties') return '{} does not have enough properties';
  return `Invalid input for field '${field}': ${first.message ?? 'is not valid'}`;
}

/** The value at a JSON pointer of the body (as the validator names it). */
function valueAt(body: unknown, pointer: string): unknown {
  return pointer
    .split('/')
    .slice(1)
    .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>((at, key) => (at && typeof at === 'object' ? (at as Record<string, unknown>)[key] : undefined), body);
}

/** A JSON value as Python prints it (jsonschema's messages quote the instance so). */
export function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return value.includes("'") && !value.includes('"') ? `"${value}"` : `'${value.replaceAll("'", "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`;
  if (typeof value === 'object') return `{${Object.entries(value).map(([key, each]) => `${pythonRepr(key)}: ${pythonRepr(each)}`).join(', ')}}`;
  return String(value);
}
