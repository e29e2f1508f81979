import { Type } from 'typebox';

/**
 * The OpenAPI 3.1 document of the identity API and the gateway's admin routes, built from the
 * routes as registered (their TypeBox schemas are JSON Schema 2020-12, OpenAPI 3.1's dialect), so
 * it cannot drift from what the service validates and serialises. Nothing here is written per route.
 */

/** The schemas a route declares, as fastify holds them (any of them may be absent). */
export interface RouteSchemas {
  params?: unknown;
  querystring?: unknown;
  body?: unknown;
  headers?: unknown;
  response?: Record<string, unknown>;
}

/** A registered route, as the identity API records it (see RouteInfo in identity-api.ts). */
export interface DocumentedRoute {
  method: string;
  url: string;
  public: boolean;
  schema?: RouteSchemas;
}

type JsonSchema = Record<string, unknown>;

export interface OpenApiOperation {
  operationId: string;
  tags: string[];
  security: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: JsonSchema }>;
  requestBody?: { required: true; content: { 'application/json': { schema: JsonSchema } } };
  responses: Record<string, OpenApiResponse>;
}

export type OpenApiResponse = { description: string; content?: Record<string, { schema: JsonSchema }> } | { $ref: string };

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, OpenApiResponse>;
    securitySchemes: Record<string, { type: 'apiKey'; in: 'header'; name: string; description: string }>;
  };
}

/** Keystone's error envelope (support/errors.ts errorBody); an auth-plugin failure adds `identity`. */
const ErrorEnvelope = Type.Object({
  error: Type.Object({
    code: Type.Integer({ minimum: 400, maximum: 599 }),
    title: Type.String(),
    message: Type.String(),
    identity: Type.Optional(Type.Object({}, { additionalProperties: true })),
  }),
});

const TOKEN_SCHEME = 'keystoneToken';
const ERROR_RESPONSE = { $ref: '#/components/responses/Error' } as const;
const OPENAPI_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** A plain JSON copy: drops TypeBox's symbols (Optional, Kind) and anything else JSON cannot hold. */
function plainSchema(schema: unknown): JsonSchema {
  return JSON.parse(JSON.stringify(schema)) as JsonSchema;
}

/** fastify's `/v3/users/:user_id` is OpenAPI's `/v3/users/{user_id}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/**
 * The resource a route belongs to (`/v3/projects/{id}/tags` → projects; `/`, `/v3` → discovery;
 * what is outside /v3, such as /healthz and this document, → operations).
 */
function tagOf(path: string): string {
  const segments = path.split('/').filter(Boolean);
  if (segments[0] !== 'v3') return segments.length === 0 ? 'discovery' : 'operations';
  return segments[1] ?? 'discovery';
}

function parametersOf(schemas: RouteSchemas): OpenApiOperation['parameters'] {
  const parameters: NonNullable<OpenApiOperation['parameters']> = [];
  const sources = [
    ['path', schemas.params],
    ['query', schemas.querystring],
    ['header', schemas.headers],
  ] as const;
  for (const [location, schema] of sources) {
    if (schema === undefined) continue;
    const object = plainSchema(schema);
    const required = new Set((object.required as string[] | undefined) ?? []);
    for (const [name, property] of Object.entries((object.properties as Record<string, JsonSchema> | undefined) ?? {})) {
      // A path parameter is always required in OpenAPI, whatever the schema says.
      parameters.push({ name, in: location, required: location === 'path' || required.has(name), schema: property });
    }
  }
  return parameters.length > 0 ? parameters : undefined;
}

/** fastify's status keys (`200`, `2xx`, `default`) in OpenAPI's spelling (`200`, `2XX`, `default`). */
function statusKey(status: string): string {
  return status.toUpperCase() === 'DEFAULT' ? 'default' : status.toUpperCase();
}

function responsesOf(method: string, schemas: RouteSchemas): Record<string, OpenApiResponse> {
  const responses: Record<string, OpenApiResponse> = {};
  for (const [status, schema] of Object.entries(schemas.response ?? {})) {
    // A HEAD answer has the headers of its GET and no body.
    responses[statusKey(status)] =
      method === 'head'
        ? { description: `As GET, without a body.` }
        : { description: `Declared response (${status}).`, content: { 'application/json': { schema: plainSchema(schema) } } };
  }
  const declaresSuccess = Object.keys(responses).some((status) => status.startsWith('2') || status.startsWith('3'));
  if (!declaresSuccess) responses['2XX'] = { description: 'Success; the route declares no response schema.' };
  responses['4XX'] = ERROR_RESPONSE;
  responses['5XX'] = ERROR_RESPONSE;
  return responses;
}

function operationOf(route: DocumentedRoute, method: string, path: string): OpenApiOperation {
  const schemas = route.schema ?? {};
  const parameters = parametersOf(schemas);
  return {
    operationId: `${method}${path.replace(/[^A-Za-z0-9]+/g, '_').replace(/_$/, '')}`,
    tags: [tagOf(path)],
    security: route.public ? [] : [{ [TOKEN_SCHEME]: [] }],
    ...(parameters ? { parameters } : {}),
    ...(schemas.body !== undefined ? { requestBody: { required: true, content: { 'application/json': { schema: plainSchema(schemas.body) } } } } : {}),
    responses: responsesOf(method, schemas),
  };
}

/** The document for `routes` (each method of each path once; a repeated registration is a bug, thrown). */
export function buildOpenApiDocument(routes: readonly DocumentedRoute[], version: string): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const route of routes) {
    const method = route.method.toLowerCase();
    if (!OPENAPI_METHODS.has(method)) throw new Error(`OpenAPI has no method ${route.method} (route ${route.url})`);
    const path = openApiPath(route.url);
    const operations = (paths[path] ??= {});
    if (operations[method]) throw new Error(`route ${route.method} ${route.url} is registered twice`);
    operations[method] = operationOf(route, method, path);
  }
  const tags = [...new Set(Object.values(paths).flatMap((operations) => Object.values(operations).flatMap((operation) => operation.tags)))].sort();
  return {
    openapi: '3.1.0',
    info: {
      title: 'keystone-gateway',
      version,
      description:
        "OpenStack Keystone v3 compatible identity API and the gateway's admin routes, generated from the routes' schemas. " +
        'Errors use Keystone\'s envelope {"error": {"code", "title", "message"}}.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: { Error: plainSchema(ErrorEnvelope) },
      responses: { Error: { description: "Keystone's error envelope.", content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
      securitySchemes: {
        [TOKEN_SCHEME]: { type: 'apiKey', in: 'header', name: 'X-Auth-Token', description: 'A token from POST /v3/auth/tokens (its X-Subject-Token header).' },
      },
    },
  };
}
